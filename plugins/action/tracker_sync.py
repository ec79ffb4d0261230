"""berth.fleet.tracker_sync: one hypervisor's state into the ledger, reconciled (controller side).
The task of playbooks/gather.yml, Nova's ResourceTracker update, run per inventory host."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.host_facts import down_state, fetch_one, host_state
from ansible_collections.berth.fleet.plugins.plugin_utils._placement import DEFAULT_SERVICE_DOWN_TIME_S
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import LEDGER_ARGS, BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger


class ActionModule(BerthAction):
    ARGUMENT_SPEC = {
        "mark_missing": {"type": "bool", "default": False},
        "hypervisor_group": {"type": "str", "default": "hypervisors"},
        "service_down_time": {"type": "int", "default": DEFAULT_SERVICE_DOWN_TIME_S},
        "ledger_url": LEDGER_ARGS["ledger_url"],
    }
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        ledger = Ledger(args["ledger_url"]).open()
        check = bool(self._task.check_mode)
        if args["mark_missing"]:
            listed = task_vars.get("groups", {}).get(args["hypervisor_group"]) or []
            report = ledger.mark_missing(listed, args["service_down_time"], dry_run=check)
            return {"changed": report["changed"], "report": report, "drift": missing_report(report)}
        state = self._state(task_vars)
        report = ledger.tracker_sync([state], dry_run=check)
        rows = {row["uuid"]: row for row in ledger.hypervisors([state["uuid"]] if state.get("uuid") else [])}
        changed = report.pop("changed")
        return {"changed": changed, "report": report, "drift": drift_report([state], report, rows)}

    @staticmethod
    def _state(task_vars: Mapping[str, Any]) -> dict[str, Any]:
        """This host's state: the inventory's live facts if it gathered them, else gathered now,
        over the URI and with the settings the inventory gives the host."""
        host = task_vars["inventory_hostname"]
        uri = task_vars.get("berth_libvirt_uri")
        hypervisor = task_vars.get("berth_hypervisor")
        if not uri or not isinstance(hypervisor, Mapping):
            raise InputError("hypervisor_group", f"host {host} has no berth_libvirt_uri and berth_hypervisor: "
                                                 f"it does not come from a berth.fleet.hypervisors inventory source")
        if task_vars.get("berth_host_state"):
            return {**task_vars["berth_host_state"], "uri": uri}
        connect = {"keepalive_interval": hypervisor["keepalive_interval"],
                   "keepalive_count": hypervisor["keepalive_count"]}
        outcome = fetch_one(host, uri, hypervisor["storage_pool"], float(hypervisor["timeout"]), connect)
        where = (hypervisor["settings"], list(hypervisor["aggregates"]), hypervisor["availability_zone"],
                 outcome.get("gathered_at"))
        if "facts" in outcome:
            return {**host_state(host, outcome["facts"], *where), "uri": uri}
        return down_state(host, hypervisor["settings"], outcome["down_reason"], *where[1:])


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
    for entry in report["missing_instances"]:
        lines.append(f"{entry['name']}: {entry['state']} in the ledger but no domain on {entry['host']} "
                     f"(missing since {entry['missing_since']})")
    for entry in report["found_again"]:
        lines.append(f"{entry['name']}: found again on {entry['host']}")
    for entry in report.get("power_states", []):
        lines.append(f"{entry['name']}: {entry['was']} in the ledger but its domain is {entry['domain_state']} on "
                     f"{entry['host']}: now {entry['now']} (the ledger follows the domain's power state)")
    for entry in report["released_claims"]:
        lines.append(f"claim {entry['id']} of instance {entry['instance_uuid']} on {entry['host']} released: "
                     f"lease of {entry['owner']} expired at {entry['lease_expires_at']}, no domain")
    for entry in report["kept_expired_claims"]:
        lines.append(f"claim {entry['id']} of instance {entry['instance_uuid']} on {entry['host']} kept although "
                     f"its lease expired: {entry['why']}")
    return lines


def missing_report(report: Mapping[str, Any]) -> list[str]:
    """The lines of the missing step: hypervisors of the ledger that this inventory does not list."""
    lines = [f"{entry['host']}: MISSING: in no inventory and not synced since {entry['last_synced_at']}; its "
             f"claims are kept until an operator retires it (berth.fleet.hypervisor state=retired)"
             for entry in report["missing"]]
    lines += [f"{entry['host']}: not in this inventory, synced elsewhere at {entry['last_synced_at']}; left as it was"
              for entry in report["synced_elsewhere"]]
    return lines or ["every hypervisor of the ledger is in this inventory"]
