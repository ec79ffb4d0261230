"""berth.fleet.instance_info: the ledger's instances, read only (controller side)."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        ledger = Ledger(args["ledger_url"]).open()
        # A launch's name covers its indexed instances: web -> web-1, web-2 ... (and web itself).
        instances = ledger.launch_instances(args["name"]) if args["name"] else ledger.instances()
        return {"changed": False, "instances": instances}
