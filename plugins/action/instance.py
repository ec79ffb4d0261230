"""berth.fleet.instance: build or remove placed instances' domains (controller side).
An adapter: the work is plugins/plugin_utils/operations/build.py."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import Build
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.hooks import installed


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
        ledger = Ledger(args["ledger_url"]).open() if args["ledger"] else None
        return Build(args, ledger, template_path, bool(self._task.check_mode), bool(self._task.diff),
                     installed()).run()
