"""berth.fleet.instance: build or remove placed instances' domains (controller side).
An adapter: the work is plugins/plugin_utils/operations/build.py."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import of_spec
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import request_spec
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import installed
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import PLACEMENT_FIELDS, Build
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import check_request
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


class ActionModule(BerthAction):
    _supports_check_mode = True
    _supports_diff = True
    # from_vars: a requester option from the role's variable instance_<option>.
    VARIABLE_PREFIX = "instance_"
    # The role's placements (or the deleted rows) carry each instance's name and flavor.
    TASK_SET = frozenset({"name", "flavor"})

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        # The role's template (or the play's), found as Ansible finds templates.
        template_path = self._find_needle("templates", args["template"])
        settings = Settings.from_args(args)
        ledger = Ledger(args["ledger_url"]).open() if args["ledger"] else None
        build = Build(settings, ledger, template_path, bool(self._task.check_mode), bool(self._task.diff),
                      installed(), args["timeout"])
        placements = args["placements"]
        if placements is None:
            for key in ("name", "host", "uri"):
                if not args[key]:
                    raise InputError(key, f"{key} is required (or placements, a list of instances)")
            placements = [{key: args.get(key) for key in PLACEMENT_FIELDS}]
        if args["state"] == "absent":
            return self._answer(build.remove(placements), args)
        request = check_request({**args, "flavor": self._flavor(args, placements)}, settings)
        # What an alternate's claim fits of NUMA cells, CPUs, pages and devices: the request's,
        # with this run's own PCI aliases (the operator's, never the ledger's).
        return self._answer(build.build(request, placements, exact=of_spec(request_spec(request, settings))), args)

    @staticmethod
    def _flavor(args: dict[str, Any], placements: list[Any]) -> Any:
        """The task's flavor, else the one every placement carries (the schedule gives each its
        flavor): one task builds one request."""
        if args["flavor"]:
            return args["flavor"]
        flavors = [placement.get("flavor") if isinstance(placement, dict) else None for placement in placements]
        if not flavors or flavors[0] is None:
            raise InputError("flavor", "flavor is required with state=active (or placements that carry theirs, as "
                                       "berth.fleet.schedule gives them)")
        for index, flavor in enumerate(flavors):
            if flavor != flavors[0]:
                raise InputError(f"placements[{index}].flavor", f"placements[{index}] has another flavor than "
                                                                f"placements[0]: one task builds one request")
        return flavors[0]

    @staticmethod
    def _answer(outcome: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        """Without placements, the one instance's result itself."""
        if args["placements"] is not None:
            return outcome
        one = dict(outcome["results"][0])
        one.pop("item", None)
        return one
