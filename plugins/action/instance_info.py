"""berth.fleet.instance_info: the ledger's instances, read only (controller side)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger, utcnow


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        ledger = Ledger(args["ledger_url"]).open()
        # A launch's name covers its indexed instances: web -> web-1, web-2 ... (and web itself).
        instances = ledger.launch_instances(args["name"]) if args["name"] else ledger.instances()
        now, hostvars = utcnow(), task_vars.get("hostvars") or {}
        for row in instances:
            row["age_s"] = int((now - dt.datetime.fromisoformat(row["created_at"])).total_seconds())
            row["address"] = inventory_address(hostvars, row["name"])
        return {"changed": False, "instances": instances, "ledger": ledger.shown_url}


def inventory_address(hostvars: Any, name: str) -> Any:
    """The address the berth.fleet.instances inventory found for the instance (its ansible_host),
    when the play has that inventory: addresses live on the hypervisors, not in the ledger."""
    if name not in hostvars or "berth_instance" not in hostvars[name]:
        return None
    return hostvars[name].get("ansible_host")
