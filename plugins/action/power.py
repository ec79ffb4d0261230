"""berth.fleet.power: start, stop, pause, resume or reboot instances (controller side).
An adapter: the work is plugins/plugin_utils/operations/power.py."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import dns_label
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils._power_states import check_shutdown_timeout
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import PLACED_STATES, Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.power import Power


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        dns_label("name", args["name"])
        check_shutdown_timeout(args["shutdown_timeout"])
        ledger = Ledger(args["ledger_url"]).open()
        rows = ledger.launch_instances(args["name"])
        if not rows:
            raise InputError("name", f"no instance named {args['name']} or {args['name']}-<n> in {ledger.label}")
        unplaced = [f"{row['name']} ({row['state']})" for row in rows if row["state"] not in PLACED_STATES]
        if unplaced:
            raise InputError("name", f"only {', '.join(PLACED_STATES)} instances change their power state, not: "
                                     f"{', '.join(unplaced)}")
        unreachable = sorted({row["host"] for row in rows if not row["uri"]})
        if unreachable:
            raise BerthError(f"{ledger.label} has no URI for {', '.join(unreachable)}: run playbooks/gather.yml to sync it")
        return Power(rows, args["state"], ledger, args["shutdown_timeout"], args["timeout"],
                     bool(self._task.check_mode), UriPolicy.from_settings(args["uri_policy"])).run()
