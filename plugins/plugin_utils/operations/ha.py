"""The scheduled HA run (berth.fleet.ha_restart, playbooks/ha.yml): the HA instances of every
hypervisor that is down and fenced, restarted on other hosts, highest priority first across all
those hosts, as Proxmox VE's HA manager and oVirt's HA VMs do. Private to the collection.

A run reads which hypervisors the ledger has down (their last sync older than
service_down_time). A down host with HA instances to restart is fenced only by a fencing the
ledger recorded since it went down or by the operator's fence command (berth_fence_command): a
scheduled run has no operator to confirm anything. A host that stays unfenced is reported and
none of its instances is touched (split brain: docs/docsite/rst/host_failure.rst). Then one
``Evacuation`` takes the HA instances of all the fenced hosts in the ledger's restart order
(Ledger.ha_instances); it claims each one's destination in the transaction that also decides
which run evacuates it, so two HA runs at once rebuild an instance once. Its other instances are
left to evacuate.yml (the report says so): the operator decides about them."""

from __future__ import annotations

import subprocess
from typing import Any, Callable, Mapping

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import NO_HOOKS, Hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.evacuate import (
    EVACUABLE_STATES,
    EVACUATED,
    FAILED,
    WOULD_EVACUATE,
    Evacuation,
    is_down,
    result_line,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.fence import ensure_fenced
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


class HaRestart:
    """berth.fleet.ha_restart (``args``: its validated options; ``settings``: the operator's).
    In check mode, the plan: which hosts would be fenced (the fence command is not run) and
    where each HA instance would go; nothing claimed, run or recorded. ``run_fence`` runs the
    fence command (subprocess.run)."""

    def __init__(self, args: Mapping[str, Any], settings: Settings, ledger: Ledger, task_vars: Mapping[str, Any],
                 check_mode: bool, hooks: Hooks = NO_HOOKS, connect: Connect = Hypervisor,
                 run_fence: Callable[..., Any] = subprocess.run) -> None:
        self.args, self.settings, self.ledger, self.task_vars = args, settings, ledger, task_vars
        self.check_mode, self.hooks, self.connect, self.run_fence = check_mode, hooks, connect, run_fence

    def run(self) -> dict[str, Any]:
        down = [row for row in self.ledger.hypervisors() if is_down(row, self.settings.service_down_time)]
        if not down:
            return {"changed": False, "hosts": [], "results": [], "report": [],
                    "msg": f"no hypervisor is down (none without a sync for over {self.settings.service_down_time} s)"}
        down_uuids = {row["uuid"] for row in down}
        # ERROR ones too: an HA instance an earlier run could not place is tried again each run.
        ha_rows = [row for row in self.ledger.ha_instances(EVACUABLE_STATES) if row["hypervisor_uuid"] in down_uuids]
        others: dict[str, int] = {}
        ha_uuids = {row["uuid"] for row in ha_rows}
        for row in self.ledger.instances_on(sorted(down_uuids)):
            if row["uuid"] not in ha_uuids:
                others[row["hypervisor_uuid"]] = others.get(row["hypervisor_uuid"], 0) + 1
        hosts, fenced, newly_fenced = [], [], False
        for row in sorted(down, key=lambda hv: hv["host"]):
            mine = [instance for instance in ha_rows if instance["hypervisor_uuid"] == row["uuid"]]
            host = self._host(row, len(mine), others.get(row["uuid"], 0))
            hosts.append(host)
            if host["fenced"]:
                fenced.append(row)
                newly_fenced = newly_fenced or row.get("fenced") is None
        fenced_uuids = {row["uuid"] for row in fenced}
        restarting = [row for row in ha_rows if row["hypervisor_uuid"] in fenced_uuids]
        evacuation = Evacuation(self.settings, self.ledger, self.task_vars, fenced, self.check_mode, self.hooks,
                                self.connect, self.args["timeout"], self.args.get("template"))
        results = [{**result, "ha_priority": row["ha_priority"]}
                   for row, result in zip(restarting, evacuation.run(restarting))]
        lines = [host["line"] for host in hosts] + [
            f"priority {result['ha_priority']}: {result_line(result)}" for result in results]
        outcome: dict[str, Any] = {
            "changed": newly_fenced or any(result["outcome"] in (EVACUATED, WOULD_EVACUATE) for result in results),
            "hosts": hosts, "results": results, "report": lines, "msg": "; ".join(lines)}
        warnings = [warning for result in results for warning in result.get("warnings", [])]
        warnings += [f"{host['host']} is down and not fenced: its {host['ha_instances']} HA instance(s) are not "
                     f"restarted ({host['why']})" for host in hosts if host["ha_instances"] and not host["fenced"]]
        if warnings:
            outcome["warnings"] = warnings
        failed = [result for result in results if result["outcome"] == FAILED]
        if failed and not self.check_mode:
            outcome.update(failed=True, msg=f"{len(failed)} of {len(results)} HA instance(s) could not be restarted "
                                            f"(ERROR, left on their down host; tried again next run): "
                                            + "; ".join(lines))
        return outcome

    def _host(self, row: Mapping[str, Any], ha_count: int, other_count: int) -> dict[str, Any]:
        """One down host: fenced (by a recorded fencing or the fence command) where it has HA
        instances to restart, with the report's line about it."""
        host = row["host"]
        said = f"{host}: down (last sync {row['sync_age_s']:.0f} s ago" + (
            f": {row['down_reason']})" if row["down_reason"] else ")")
        left = (f"; its {other_count} other instance(s) are not HA: left to evacuate.yml" if other_count else "")
        entry: dict[str, Any] = {"host": host, "ha_instances": ha_count, "other_instances": other_count,
                                 "fenced": False, "how": None, "why": None}
        if not ha_count:
            # Fencing powers a host off: not done where the HA run has nothing to restart.
            return {**entry, "why": "no HA instance to restart", "line": f"{said}; no HA instance to restart{left}"}
        try:
            fencing = ensure_fenced(self.ledger, row, self.settings, False, None, self.check_mode, self.run_fence)
        except BerthError as exc:
            if isinstance(exc, InputError):
                raise  # the operator's fence setting is wrong: not a verdict on this host
            return {**entry, "why": str(exc),
                    "line": f"{said}; NOT FENCED, none of its {ha_count} HA instance(s) restarted: {exc}{left}"}
        return {**entry, "fenced": True, "how": fencing["how"],
                "line": f"{said}; {fencing['how']}; {ha_count} HA instance(s) to restart{left}"}
