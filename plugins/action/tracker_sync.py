"""berth.fleet.tracker_sync: write the inventory's hypervisor facts to the ledger and reconcile
(controller side). The periodic job of playbooks/gather.yml, Nova's ResourceTracker update."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import (
    LEDGER_ARGS,
    BerthAction,
    inventory_host_states,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger


class ActionModule(BerthAction):
    ARGUMENT_SPEC = {
        "hypervisor_group": {"type": "str", "default": "hypervisors"},
        "hypervisors": {"type": "list", "elements": "str"},
        "limited": {"type": "bool", "default": False},
        "ledger_url": LEDGER_ARGS["ledger_url"],
    }
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        states, _uris = inventory_host_states(task_vars, args["hypervisor_group"], args["hypervisors"])
        ledger = Ledger(args["ledger_url"]).open()
        report = ledger.tracker_sync(states, limited=args["limited"], dry_run=bool(self._task.check_mode))
        hypervisors = {row["uuid"]: row for row in ledger.hypervisors()}
        changed = report.pop("changed")
        return {"changed": changed, "report": report, "drift": drift_report(states, report, hypervisors)}


def drift_report(states: Sequence[Mapping[str, Any]], report: Mapping[str, Any],
                 hypervisors: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per hypervisor (the ledger's view beside the hypervisor's own), then each finding."""
    lines = []
    for state in states:
        row = hypervisors.get(state.get("uuid") or "")
        if not state.get("service_up") or row is None:
            lines.append(f"{state['host']}: did not answer ({state.get('down_reason') or 'no facts'}); "
                         f"its claims are kept")
            continue
        usage = row["usage"]
        hv_free_mb = state.get("hv_memory_free_mb")
        flags = []
        if row["disabled"]:
            flags.append(f"disabled: {row['disabled_reason']}")
        if state.get("free_ram_mb") != usage["free_ram_mb"]:
            flags.append(f"hypervisor counts free RAM {state.get('free_ram_mb')} MB")
        if state.get("vcpus_used") != usage["vcpus_used"]:
            flags.append(f"hypervisor counts {state.get('vcpus_used')} vCPUs used")
        if row["unmanaged"]:
            flags.append("orphans: " + ", ".join(u["name"] for u in row["unmanaged"]))
        lines.append(
            f"{row['host']}: generation {row['generation']}, ledger free RAM {usage['free_ram_mb']} MB, "
            f"{usage['vcpus_used']}/{usage['vcpus_total']} vCPUs used, {usage['num_instances']} instance(s)"
            + (f", host memory free {hv_free_mb} MB" if hv_free_mb is not None else "")
            + ("; DRIFT " + "; ".join(flags) if flags else "; in step")
        )
    for entry in report["missing_hypervisors"]:
        lines.append(f"{entry['host']}: MISSING from this sync (last seen {entry['last_seen_at']}); its claims "
                     f"are kept until an operator retires it (berth.fleet.hypervisor state=retired)")
    for entry in report["not_in_limited_run"]:
        lines.append(f"{entry['host']}: not in this limited run (--limit); left as it was")
    for entry in report["missing_instances"]:
        lines.append(f"{entry['name']}: ACTIVE in the ledger but no domain on {entry['host']} "
                     f"(missing since {entry['missing_since']})")
    for entry in report["found_again"]:
        lines.append(f"{entry['name']}: found again on {entry['host']}")
    for entry in report["released_claims"]:
        lines.append(f"claim {entry['id']} of instance {entry['instance_uuid']} on {entry['host']} released: "
                     f"lease of {entry['owner']} expired at {entry['lease_expires_at']}, no domain")
    for entry in report["kept_expired_claims"]:
        lines.append(f"claim {entry['id']} of instance {entry['instance_uuid']} on {entry['host']} kept although "
                     f"its lease expired: {entry['why']}")
    return lines
