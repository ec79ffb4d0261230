"""berth.fleet.schedule: decide where instances go and claim their resources (controller side).
An adapter: the work is plugins/plugin_utils/operations/schedule.py."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.request import instance_names
from ansible_collections.berth.fleet.plugins.plugin_utils._flavors import flavor_option
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import (
    refuse_idle_hints,
    request_spec,
    scheduling_request,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import installed
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.schedule import Schedule
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


class ActionModule(BerthAction):

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        names = instance_names(args["name"], args["count"])
        settings = Settings.from_args(args)
        request = scheduling_request(args, flavor_option(args["flavor"], settings.flavors_file), settings)
        run = {key: args.get(key) for key in ("ignore_hosts", "retry_hosts", "image_id")}
        refuse_idle_hints(request_spec(request, settings, **run))
        ledger = Ledger(args["ledger_url"]).open() if args["ledger"] else None
        return Schedule(request, settings, names, args["name"], ledger, task_vars, bool(self._task.check_mode),
                        installed(), hosts=args["hosts"], **run).run()
