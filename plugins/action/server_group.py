"""berth.fleet.server_group: create, delete or list server groups in the ledger (controller side)."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import POLICIES, Ledger


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        state, name = args["state"], args["name"]
        if state != "list" and not name:
            raise InputError("name", f"name is required with state={state}")
        if state == "present" and not args["policy"]:
            raise InputError("policy", f"policy is required with state=present; one of {', '.join(POLICIES)}")
        ledger = Ledger(args["ledger_url"]).open()
        check = bool(self._task.check_mode)
        if state == "list":
            return {"changed": False, "groups": ledger.server_groups(name)}
        if state == "absent":
            before = ledger.server_groups(name)
            changed = ledger.delete_server_group(name, dry_run=check)
            return {"changed": changed, "group": before[0] if before else None}
        group, changed = ledger.create_server_group(name, args["policy"], args["max_server_per_host"], dry_run=check)
        return {"changed": changed, "group": group}
