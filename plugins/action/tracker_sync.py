"""berth.fleet.tracker_sync: one hypervisor's state into the ledger, reconciled (controller side).
The task of playbooks/gather.yml, Nova's ResourceTracker update, run per inventory host."""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.host_facts import (
    down_state,
    fetch_from,
    host_state,
    hypervisor_connection,
)
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.plugin_utils._build import remove_recorded
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger

# What became of each group of leftovers (report.leftovers[].outcome).
REMOVED, WOULD_REMOVE, KEPT, RUNNING, FAILED = "removed", "would remove", "kept", "running", "failed"


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        ledger = Ledger(args["ledger_url"]).open()
        check = bool(self._task.check_mode)
        if args["mark_missing"]:
            listed = task_vars.get("groups", {}).get(args["hypervisor_group"]) or []
            report = ledger.mark_missing(listed, args["service_down_time"], dry_run=check)
            return {"changed": report["changed"], "report": report, "drift": missing_report(report)}
        # The hypervisor's connection, kept from its gathering to the removal of leftovers.
        self._hv: Hypervisor | None = None
        try:
            state = self._state(task_vars)
            report = ledger.tracker_sync([state], dry_run=check)
            changed = report.pop("changed")
            changed = self._reclaim(ledger, report, task_vars, check, args["keep_leftovers"]) or changed
        finally:
            if self._hv is not None:
                self._hv.__exit__(None, None, None)
        rows = {row["uuid"]: row for row in ledger.hypervisors([state["uuid"]] if state.get("uuid") else [])}
        return {"changed": changed, "report": report, "drift": drift_report([state], report, rows)}

    @staticmethod
    def _settings(task_vars: Mapping[str, Any]) -> tuple[str, str, Mapping[str, Any]]:
        host = task_vars["inventory_hostname"]
        uri = task_vars.get("berth_libvirt_uri")
        hypervisor = task_vars.get("berth_hypervisor")
        if not uri or not isinstance(hypervisor, Mapping):
            raise InputError("hypervisor_group", f"host {host} has no berth_libvirt_uri and berth_hypervisor: "
                                                 f"it does not come from a berth.fleet.hypervisors inventory source")
        return host, uri, hypervisor

    def _connect(self, task_vars: Mapping[str, Any]) -> Hypervisor:
        """The task's connection to its hypervisor, opened once (raises HypervisorError)."""
        if self._hv is None:
            host, uri, hypervisor = self._settings(task_vars)
            connect = {"keepalive_interval": hypervisor["keepalive_interval"],
                       "keepalive_count": hypervisor["keepalive_count"]}
            self._hv = hypervisor_connection(host, uri, float(hypervisor["timeout"]), connect).__enter__()
        return self._hv

    def _state(self, task_vars: Mapping[str, Any]) -> dict[str, Any]:
        """This host's state: the inventory's live facts if it gathered them, else gathered now,
        over the URI and with the settings the inventory gives the host."""
        host, uri, hypervisor = self._settings(task_vars)
        if task_vars.get("berth_host_state"):
            return {**task_vars["berth_host_state"], "uri": uri}
        gathered_at = time.time()
        try:
            outcome = fetch_from(self._connect(task_vars), hypervisor["storage_pool"], gathered_at)
        except HypervisorError as exc:
            outcome = {"down_reason": str(exc), "gathered_at": gathered_at}
        where = (hypervisor["settings"], list(hypervisor["aggregates"]), hypervisor["availability_zone"],
                 outcome.get("gathered_at"))
        if "facts" in outcome:
            return {**host_state(host, outcome["facts"], *where), "uri": uri}
        return down_state(host, hypervisor["settings"], outcome["down_reason"], *where[1:])

    def _reclaim(self, ledger: Ledger, report: dict[str, Any], task_vars: Mapping[str, Any], check: bool,
                 keep: bool) -> bool:
        """Remove what dead builds left on this hypervisor - the ledger said which -, then have
        the ledger forget what is gone. Sets each group's ``outcome`` (and ``removed``, ``error``);
        returns whether anything changed (or would, in check mode).

        A run that dies in between leaves the rows: the next sync removes what is still there and
        forgets the rest. A guest that runs is never stopped here (delete.yml does that)."""
        gone: list[int] = []
        for group in report["leftovers"]:
            group.update(removed=[], error=None)
            if keep or check or group["running"]:
                group["outcome"] = RUNNING if group["running"] else KEPT if keep else WOULD_REMOVE
                continue
            try:
                removed, running = remove_recorded(self._connect(task_vars), group["instance_uuid"], group["items"],
                                                   spare_running=True)
            except HypervisorError as exc:
                group.update(outcome=FAILED, error=str(exc))
                continue
            group.update(outcome=RUNNING if running else REMOVED, removed=removed)
            if not running:
                gone += [item["id"] for item in group["items"]]
        if gone:
            ledger.forget_artefacts(gone)
        return any(group["outcome"] in (REMOVED, WOULD_REMOVE) for group in report["leftovers"])


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
        found = f"its domain is {entry['domain_state']}" if entry.get("domain_state") else "no domain"
        lines.append(f"claim {entry['id']} of instance {entry.get('instance_name') or entry['instance_uuid']} "
                     f"({entry['instance_uuid']}) on {entry['host']} released: lease of {entry['owner']} expired at "
                     f"{entry['lease_expires_at']}, {found}")
    for entry in report["kept_expired_claims"]:
        lines.append(f"claim {entry['id']} of instance {entry['instance_uuid']} on {entry['host']} kept although "
                     f"its lease expired: {entry['why']}")
    for entry in report.get("finished_builds", []):
        lines.append(f"{entry['instance_name']}: build finished by this sync: its domain is {entry['domain_state']} "
                     f"on {entry['host']} though {entry['owner']} never said so before its lease expired at "
                     f"{entry['lease_expires_at']}; ACTIVE")
    lines += [_leftover_line(group) for group in report.get("leftovers", [])]
    for entry in report.get("orphan_volumes", []):
        lines.append(f"{entry['host']}: orphan volume {entry['pool']}/{entry['name']}: named as Berth names a "
                     f"build's volume, but no instance holds a claim here and this ledger recorded no build of it; "
                     f"left alone (another ledger's, or older than Berth's records: virsh vol-delete removes it)")
    return lines


def _artefact(item: Mapping[str, Any]) -> str:
    return f"domain {item['name']}" if item["kind"] == "domain" else f"volume {item['pool']}/{item['name']}"


def _leftover_line(group: Mapping[str, Any]) -> str:
    """One line per dead build's leftovers on the hypervisor: what was (or would be) removed, or
    why not, and what became of its instance."""
    where, why = group["host"], group["why"]
    outcome = group.get("outcome", WOULD_REMOVE)
    there = [item for item in group["items"] if item["present"] is not False]
    if outcome == REMOVED:
        if not group["removed"]:
            return (f"{where}: forgot the records of {len(group['items'])} artefact(s) of a build of "
                    f"{group['instance_name']}, already gone ({why})")
        return f"{where}: removed what a dead build left: {', '.join(map(_artefact, group['removed']))} ({why})"
    listed = ", ".join(map(_artefact, there)) or f"nothing left ({len(group['items'])} record(s) to forget)"
    if outcome == WOULD_REMOVE:
        return f"{where}: would remove what a dead build left: {listed} ({why})"
    if outcome == KEPT:
        return (f"{where}: kept for inspection (berth_keep_leftovers): what a dead build left: {listed} ({why}); "
                f"a gather without berth_keep_leftovers removes it, and so does delete.yml with instance "
                f"{group['instance_name']}")
    if outcome == RUNNING:
        return (f"{where}: left alone, its domain runs: what a dead build of {group['instance_name']} left: {listed} "
                f"({why}); delete.yml of {group['instance_name']} removes it")
    return (f"{where}: could not remove what a dead build left: {listed} ({why}): {group['error']}; the next "
            f"sync tries again")


def missing_report(report: Mapping[str, Any]) -> list[str]:
    """The lines of the missing step: hypervisors of the ledger that this inventory does not list."""
    lines = [f"{entry['host']}: MISSING: in no inventory and not synced since {entry['last_synced_at']}; its "
             f"claims are kept until an operator retires it (berth.fleet.hypervisor state=retired)"
             for entry in report["missing"]]
    lines += [f"{entry['host']}: not in this inventory, synced elsewhere at {entry['last_synced_at']}; left as it was"
              for entry in report["synced_elsewhere"]]
    return lines or ["every hypervisor of the ledger is in this inventory"]
