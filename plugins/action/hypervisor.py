"""berth.fleet.hypervisor: disable, enable, retire or re-home a hypervisor in the ledger (controller side)."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.host_facts import check_uri
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger

# The ledger's column for a hypervisor's name.
MAX_NAME_LENGTH = 255


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        state, reason = args["state"], args["reason"]
        if state in ("disabled", "rehomed") and not reason:
            raise InputError("reason", f"reason is required with state={state}: say why, it is recorded and shown")
        if state not in ("disabled", "rehomed") and reason:
            raise InputError("reason", f"reason goes with state=disabled or rehomed only, not state={state}")
        for key in ("name", "uri"):
            if args[key] and state != "rehomed":
                raise InputError(key, f"{key} goes with state=rehomed only, not state={state}")
        if state == "rehomed":
            self._check_rehome(args)
        ledger = Ledger(args["ledger_url"]).open()
        check = bool(self._task.check_mode)
        if state == "rehomed":
            return ledger.rehome_hypervisor(args["host"], args["name"], args["uri"], reason, dry_run=check)
        if state == "retired":
            return ledger.retire_hypervisor(args["host"], dry_run=check)
        return ledger.set_disabled(args["host"], state == "disabled", reason, dry_run=check)

    @staticmethod
    def _check_rehome(args: dict[str, Any]) -> None:
        if not args["name"] and not args["uri"]:
            raise InputError("name", "state=rehomed needs name or uri (or both): who owns the UUID from now on")
        if args["name"] and (len(args["name"]) > MAX_NAME_LENGTH or not args["name"].strip()):
            raise InputError("name", f"name must be an inventory name of 1 to {MAX_NAME_LENGTH} characters")
        if args["uri"]:
            check_uri("uri", args["uri"])
            refusal = UriPolicy.from_settings(args["uri_policy"]).refusal(args["uri"])
            if refusal:
                raise InputError("uri", f"uri is refused: {refusal}")
