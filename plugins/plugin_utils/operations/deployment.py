"""A deployment: several entries (flavor, count, server group) decided together and claimed in one
transaction, all or nothing, as berth.fleet.deployment does it. Private to the collection.

The placement is packing.place_batch's: the CP-SAT packer unless berth_placement is greedy or it
cannot run, then Nova's greedy order entry after entry. Nothing is built here: the claims are the
instances' BUILDING rows, as berth.fleet.schedule leaves them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.packing import place_batch
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.server_group import server_group_from_dict
from ansible_collections.berth.fleet.plugins.plugin_utils._decision_text import failure_message
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import read_fleet, recorded_states, without_gc
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import (
    decision_request,
    ledger_group,
    refuse_idle_hints,
    spec_options,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ClaimConflict, Ledger, run_owner
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.schedule import placement_rows, refuse_host_names
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


@dataclass(frozen=True)
class Entry:
    """One entry of a deployment, checked where the task's options come in (the action): its name,
    its instances' names (``<name>-1`` .. ``<name>-<count>``) and its typed request."""

    name: str
    names: list[str]
    request: Request


class Deployment:
    """``entries`` are the task's checked entries (Entry); ``settings`` the operator's."""

    def __init__(self, entries: Sequence[Entry], settings: Settings, ledger: Ledger,
                 task_vars: Mapping[str, Any], check_mode: bool) -> None:
        self.entries, self.settings, self.ledger = list(entries), settings, ledger
        self.task_vars, self.check_mode = task_vars, check_mode

    def run(self) -> dict[str, Any]:
        with without_gc():
            return self._run()

    def _run(self) -> dict[str, Any]:
        settings, ledger = self.settings, self.ledger
        started = time.perf_counter()
        if not self.entries:
            raise InputError("entries", "entries must list at least one entry {name, flavor, count, server_group}")
        names = [entry.names for entry in self.entries]
        requests = [entry.request for entry in self.entries]
        groups = [ledger_group(request.server_group, ledger) for request in requests]
        every = [name for entry_names in names for name in entry_names]
        existing = {row["name"]: row for row in ledger.instances(every)}
        if existing:
            if len(existing) == len(every):
                return {"changed": False, "entries": [], "placements": [], "existing": list(existing.values()),
                        "summary": f"all {len(every)} instances of the deployment exist already"}
            raise InputError("entries", f"{', '.join(sorted(existing))} exist already and the deployment's other "
                                        f"instances do not: a deployment is placed all or nothing; remove them "
                                        f"or name the entries differently")
        refuse_host_names(every, ledger, self.task_vars, settings.hypervisor_group)
        options = [spec_options(request, settings, len(entry_names),
                                None if group is None else server_group_from_dict(group))
                   for request, entry_names, group in zip(requests, names, groups)]
        specs = [RequestSpec(**option) for option in options]
        for spec in specs:
            refuse_idle_hints(spec)
        fleet = read_fleet(settings, self.task_vars, specs[0], ledger, sync=False)
        greedy_reason = "berth_placement is greedy" if settings.placement == "greedy" else None
        batch = place_batch(fleet.hosts, specs, settings.packing_time_limit, settings.packing_objective,
                            greedy_reason=greedy_reason)
        result: dict[str, Any] = {"changed": False, "packing": batch.explanation, "existing": []}
        owner = run_owner()
        if not batch.ok:
            failed = next(index for index, decision in enumerate(batch.decisions) if not decision.ok)
            result.update(failed=True, entries=[], placements=[],
                          msg=f"entry {self.entries[failed].name}: {failure_message(batch.decisions[failed])}; "
                              f"nothing of the deployment was claimed")
            result["summary"] = result["msg"]
            return result
        rows = [placement_rows(entry_names, decision, fleet, ledger, request.flavor.to_dict(), spec)
                for entry_names, decision, request, spec in zip(names, batch.decisions, requests, specs)]
        summary = "; ".join(f"{entry.name}: {decision.summary}" for entry, decision in zip(self.entries, batch.decisions))
        result["summary"] = summary
        if self.check_mode:
            result["entries"] = [
                {"name": entry.name, "placements": [{**row, "uuid": None, "state": "PLANNED"} for row in entry_rows]}
                for entry, entry_rows in zip(self.entries, rows)]
        else:
            claim_entries = [{"placements": entry_rows, "flavor": request.flavor,
                              "server_group": group and group["name"], "request": request.to_record()}
                             for entry_rows, request, group in zip(rows, requests, groups)]
            try:
                claimed = ledger.claim_batch(claim_entries, owner, settings.lease_seconds)
            except ClaimConflict as conflict:
                result.update(failed=True, entries=[], placements=[],
                              msg=f"nothing of the deployment was claimed: {conflict}; run it again to decide "
                                  f"with the fleet as it is now")
                return result
            for entry, option, decision in zip(self.entries, options, batch.decisions):
                ledger.record_decision(entry.name, owner, decision_request(option, entry.names),
                                       recorded_states(fleet, decision), decision.to_dict(), "claimed")
            result["changed"] = True
            result["entries"] = [{"name": entry.name, "placements": [
                {**row, "uuid": claim["uuid"], "state": claim["state"]} for row, claim in zip(entry_rows, entry_claims)]}
                for entry, entry_rows, entry_claims in zip(self.entries, rows, claimed)]
        result["placements"] = [placement for entry in result["entries"] for placement in entry["placements"]]
        result["timing"] = {"total_s": round(time.perf_counter() - started, 6)}
        return result
