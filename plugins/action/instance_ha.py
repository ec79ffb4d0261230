"""berth.fleet.instance_ha: mark an instance HA (or not) and set its restart priority, in the
ledger (controller side)."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import dns_label, ha_option, ha_priority_option
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger

SHOWN = ("ha", "ha_priority")


class ActionModule(BerthAction):
    _supports_check_mode = True
    _supports_diff = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        name = dns_label("name", args["name"])
        ha = None if args["ha"] is None else ha_option(args["ha"])
        priority = None if args["ha_priority"] is None else ha_priority_option(args["ha_priority"])
        if ha is None and priority is None:
            raise InputError("ha", "give ha, ha_priority or both: there is nothing to change otherwise")
        ledger = Ledger(args["ledger_url"]).open()
        before, after = ledger.set_instance_ha(name, ha, priority, dry_run=bool(self._task.check_mode))
        changed = any(before[key] != after[key] for key in SHOWN)
        if changed:
            said = ", ".join(f"{key} {before[key]} -> {after[key]}" for key in SHOWN if before[key] != after[key])
        else:
            said = f"ha {after['ha']}, ha_priority {after['ha_priority']} already"
        result: dict[str, Any] = {
            "changed": changed, "msg": f"{name}: {said}",
            "instance": {key: after[key] for key in ("name", "uuid", "host", "state", *SHOWN)}}
        if self._task.diff and changed:
            result["diff"] = {"before": {key: before[key] for key in SHOWN}, "after": {key: after[key] for key in SHOWN},
                              "before_header": f"{name} (ledger)", "after_header": f"{name} (wanted)"}
        return result
