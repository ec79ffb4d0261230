"""berth.fleet.hypervisor: disable, enable or retire a hypervisor in the ledger (controller side)."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        state, reason = args["state"], args["reason"]
        if state == "disabled" and not reason:
            raise InputError("reason", "reason is required with state=disabled: say why, the scheduler shows it")
        if state != "disabled" and reason:
            raise InputError("reason", f"reason goes with state=disabled only, not state={state}")
        ledger = Ledger(args["ledger_url"]).open()
        check = bool(self._task.check_mode)
        if state == "retired":
            return ledger.retire_hypervisor(args["host"], dry_run=check)
        return ledger.set_disabled(args["host"], state == "disabled", reason, dry_run=check)
