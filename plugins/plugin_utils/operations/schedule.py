"""The scheduling half of a launch: decide where instances go and claim their resources, as
berth.fleet.schedule, berth.fleet.server and playbooks/launch.yml do it. Private to the collection.

Given the schedule's validated options (the argument spec of berth.fleet.schedule), the opened
ledger (or None for a "what if" without it), the play's variables (for ``source=inventory``) and
the hooks port.
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import of_spec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import Decision, schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.packing import pack_request
from ansible_collections.berth.fleet.plugins.module_utils.request import Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import NUMA_TOPOLOGY_FILTER, PCI_PASSTHROUGH_FILTER
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.server_group import server_group_from_dict
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils._decision_text import failure_message
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import (
    Fleet,
    inventory_target,
    read_fleet,
    recorded_states,
    without_gc,
)
from ansible_collections.berth.fleet.plugins.plugin_utils._headroom import keeps_headroom, launch_check
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import (
    decision_request,
    ledger_group,
    request_rules,
    spec_options,
)
from ansible_collections.berth.fleet.plugins.plugin_utils._provisioning import attempt_targets, controller_refusal
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import (
    AFTER_CLAIM,
    BEFORE_CLAIM,
    NO_HOOKS,
    Hooks,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    ERROR,
    ClaimConflict,
    Ledger,
    run_owner,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

# A claim that finds a host already taken decides again with fresh usage, this many times.
CLAIM_ATTEMPTS = 5


def syncs_first(settings: Settings, hosts: Any = None) -> bool:
    """A launch on live inventory facts syncs them into the ledger first, a tracker sync of its
    own, so it may start a SQLite ledger; one that decides from the ledger's last sync needs
    gather.yml's (anything else on a missing ledger: "no ledger at PATH")."""
    return hosts is None and settings.source == "inventory"


class Schedule:
    """Place the instances ``names`` (those not ACTIVE or BUILDING already) of ``request`` and
    claim them, with the operator's ``settings``; ``launch_name`` names the launch in the
    decision record. ``run()`` returns the schedule's result (placements, existing, decision,
    summary, timing), with ``failed`` and ``msg`` when no valid host was found; ``exact`` is then
    what the request asks of NUMA cells, CPUs, pages and devices (None: nothing), which a build's
    claim on an alternate fits.

    The run's own options: ``hosts`` (host states given by the task: a "what if"), and the
    engine's ``ignore_hosts``, ``retry_hosts`` and ``image_id``.
    """

    def __init__(self, request: Request, settings: Settings, names: Sequence[str], launch_name: str,
                 ledger: Ledger | None, task_vars: Mapping[str, Any], check_mode: bool, hooks: Hooks = NO_HOOKS,
                 hosts: Sequence[Mapping[str, Any]] | None = None, **run: Any) -> None:
        self.request, self.settings, self.names, self.launch_name = request, settings, list(names), launch_name
        self.ledger, self.hooks, self.hosts, self.run_options = ledger, hooks, hosts, run
        self.task_vars, self.check_mode = task_vars, check_mode
        self.exact: Any = None

    def run(self) -> dict[str, Any]:
        with without_gc():
            return self._run()

    def _run(self) -> dict[str, Any]:
        request, settings, names, ledger, check_mode = self.request, self.settings, self.names, self.ledger, self.check_mode
        flavor = request.flavor
        started = time.perf_counter()
        if ledger is not None and syncs_first(settings, self.hosts):
            ledger.start_if_missing()
        group = ledger_group(request.server_group, ledger)
        existing = {row["name"]: row for row in ledger.instances(names)} if ledger else {}
        # ACTIVE and BUILDING instances are there already: a second launch leaves them alone.
        missing = [name for name in names if name not in existing or existing[name]["state"] == ERROR]
        refuse_host_names(missing, ledger, self.task_vars, settings.hypervisor_group)
        result: dict[str, Any] = {
            "changed": False, "flavor": flavor.to_dict(), "placements": [],
            "existing": [existing[name] for name in names if name not in missing],
        }
        if not missing:
            result["summary"] = (f"{names[0]} exists already" if names == [self.launch_name]
                                 else f"all {len(names)} instances named {self.launch_name} exist already")
            return result

        owner = run_owner()
        timing = {"read_s": 0.0, "decide_s": 0.0, "claim_s": 0.0, "record_s": 0.0}
        result["timing"] = timing
        # Hosts this controller refuses to build on (screen_targets), with why: decided again
        # without them, as a host that cannot take the instance.
        refused: dict[str, str] = {}
        before_claim = True
        for attempt in range(1, CLAIM_ATTEMPTS + 1):
            # The ledger's group, read again on every later attempt: a lost race may have been to
            # this very group.
            current = None if group is None else server_group_from_dict(
                group if attempt == 1 else ledger.scheduler_group(group["name"]))
            run = dict(self.run_options)
            if ledger is not None:
                # Read on every attempt, as the group is: the claim re-checks the hard rules as
                # they are then, so a rule written since the last attempt must be seen here.
                run["host_rules"] = request_rules(ledger.scheduler_rules(), missing, request, group)
            if refused:
                run["ignore_hosts"] = [*(run.get("ignore_hosts") or []), *refused]
            options = spec_options(request, settings, len(missing), current, **run)
            spec = RequestSpec(**options)
            self.exact = of_spec(spec)
            mark = time.perf_counter()
            fleet = read_fleet(settings, self.task_vars, spec, ledger, sync=attempt == 1 and not check_mode,
                               hosts=self.hosts)
            timing["read_s"] += _since(mark)
            mark = time.perf_counter()
            decision = decide(fleet.hosts, spec, settings)
            result["decision"] = decision.to_dict()
            result["summary"] = decision.summary
            timing["decide_s"] += _since(mark)

            def record(outcome: str) -> None:
                # What the engine needs to replay this decision: request, host states, answer.
                if ledger is not None and not check_mode:
                    mark = time.perf_counter()
                    # The names too: which decision placed web-2 (playbooks/explain.yml).
                    result["decision_id"] = ledger.record_decision(
                        self.launch_name, owner, decision_request(options, missing), recorded_states(fleet, decision),
                        result["decision"], outcome)
                    timing["record_s"] += _since(mark)

            if not decision.ok:
                record("no_valid_host")
                result.update(failed=True, msg=failure_message(decision))
                if refused:
                    result["msg"] = f"{refused_message(refused)}; and without those hosts, {result['msg']}"
                return result
            placements = placement_rows(missing, decision, fleet, ledger, flavor.to_dict(), spec)
            if ledger is not None:
                # What this run's own settings refuse is found before anything is claimed, never
                # on the hosts (where it would count as their failed builds).
                placed_refused, warnings = screen_targets(placements, request, settings)
                if warnings:
                    result.setdefault("warnings", []).extend(warnings)
                if placed_refused:
                    record("refused")
                    refused.update(placed_refused)
                    if attempt < CLAIM_ATTEMPTS:
                        continue
                    result.update(failed=True, msg=refused_message(refused))
                    return result
            if ledger is not None and keeps_headroom(settings.failover_hosts):
                # Before the claim, as the claim's own check: room kept to restart HA instances.
                refusal, warnings, headroom = launch_check(ledger, settings, placements, request, group)
                result["headroom"] = headroom.to_dict()
                if warnings:
                    result.setdefault("warnings", []).extend(warnings)
                if refusal:
                    record("refused")
                    result.update(failed=True, msg=refusal)
                    return result
            # Without the ledger nothing is claimed: a "what if" changes nothing.
            result["changed"] = ledger is not None
            if check_mode or ledger is None:
                # With what each would take of its host's CPUs, cells, pages and devices, as the
                # claim would fit it (check mode's domain shows them).
                result["placements"] = [{**p, "uuid": None, "state": "PLANNED", "assignment": placed.assignment}
                                        for p, placed in zip(placements, decision.placements)]
                result["timing"]["total_s"] = _since(started)
                return result
            if before_claim:
                self.hooks.reached(BEFORE_CLAIM)
                before_claim = False
            mark = time.perf_counter()
            try:
                rows = ledger.claim(placements, flavor, owner, settings.lease_seconds,
                                    server_group=group and group["name"], request=request.to_record(),
                                    image=request.image.name if request.image is not None else None,
                                    exact=self.exact, ha=request.ha, ha_priority=request.ha_priority,
                                    user_data=request.user_data,
                                    volumes={p["name"]: request.volume_rows(p["name"]) for p in placements}
                                    if request.volumes else None,
                                    pool=settings.storage_pool)
            except ClaimConflict as conflict:
                timing["claim_s"] += _since(mark)
                record("claim_conflict")
                result.setdefault("conflicts", []).append(str(conflict))
                unfiltered = unfiltered_exact(spec)
                if unfiltered:
                    # Deciding again would pick the same host: nothing filtered on what the claim fits.
                    result.update(failed=True, msg=(
                        f"no valid host: the claim found {conflict}; this request asks for "
                        f"{' and '.join(unfiltered.values())}, and enabled_filters lacks "
                        f"{' and '.join(unfiltered)} (not a default, as in Nova), so the scheduler did not "
                        f"choose by them: add it to enabled_filters (berth_enabled_filters)"))
                    return result
                if attempt == CLAIM_ATTEMPTS:
                    result.update(failed=True, msg=f"no valid host: every claim lost a race ({conflict})")
                    return result
                continue
            timing["claim_s"] += _since(mark)
            record("claimed")
            self.hooks.reached(AFTER_CLAIM)
            # With what each claim took of its host's CPUs, cells, pages and devices (None for most).
            result["placements"] = [
                {**p, "uuid": row["uuid"], "state": row["state"], "assignment": row.get("assignment")}
                for p, row in zip(placements, rows)
            ]
            result["timing"]["total_s"] = _since(started)
            return result
        raise AssertionError("unreachable")


def decide(hosts: Any, spec: RequestSpec, settings: Settings) -> Decision:
    """The engine's decision for a launch: Nova's greedy order, or with berth_placement=packing
    all of a request's instances packed together (packing.py; the greedy order when it cannot)."""
    if settings.placement == "packing" and spec.count > 1:
        return pack_request(hosts, spec, settings.packing_time_limit, settings.packing_objective)
    return schedule(hosts, spec)


def refuse_host_names(names: Sequence[str], ledger: Ledger | None, task_vars: Mapping[str, Any],
                      hypervisor_group: str) -> None:
    """InputError naming the first of ``names`` (instances about to be launched) that is a
    hypervisor's name in the fleet (the ledger's hypervisors, and the play's hypervisor group),
    or localhost, in any case: berth.fleet.instances lists each instance as an inventory host of
    its name, and an inventory that also lists the hypervisors would take one for the other."""
    if not names:
        return
    wanted = {name.lower(): name for name in names}
    if "localhost" in wanted:
        raise InputError("name", f"instance name {wanted['localhost']} is refused: localhost is the controller "
                                 f"itself in Ansible's inventory")
    inventory = task_vars.get("groups", {}).get(hypervisor_group) or []
    taken = [host for host in inventory if host.lower() in wanted]
    if ledger is not None and not taken:
        taken = ledger.hypervisors_named(list(wanted))
    if taken:
        instance = wanted[taken[0].lower()]
        raise InputError("name", f"instance name {instance} is refused: {taken[0]} is a hypervisor of the fleet, "
                                 f"and an inventory of both would take the instance for it; choose another name")


def screen_targets(placements: Sequence[dict[str, Any]], request: Request,
                   settings: Settings) -> tuple[dict[str, str], list[str]]:
    """Each placement's hosts (the placed one, then its alternates, as its build will try them)
    checked against what this controller refuses (_provisioning.controller_refusal: the URI
    policy, the guest CPU). Returns the placed hosts it refuses, each with the instance and why
    (the schedule decides again without them), and the warnings: a refused alternate is taken out of its
    placement (never tried, so never its failed build), and a warning says so."""
    policy = UriPolicy.from_settings(settings.uri_policy)
    reasons: dict[str, str | None] = {}
    placed_refused: dict[str, str] = {}
    warnings = []
    for placement in placements:
        targets = attempt_targets(placement, settings.max_attempts)
        for target in targets:
            if target["host"] not in reasons:
                reasons[target["host"]] = controller_refusal(target, request, policy)
        placed = targets[0]["host"]
        if reasons[placed]:
            placed_refused[placed] = f"{placement['name']} on {placed}: {reasons[placed]}"
            continue
        dropped = sorted({target["host"] for target in targets[1:] if reasons[target["host"]]})
        if dropped:
            placement["alternates"] = [host for host in placement["alternates"] if host not in dropped]
            placement["targets"] = [target for target in placement["targets"] if target["host"] not in dropped]
            warnings += [f"{placement['name']} is not to be retried on {host}: {reasons[host]}" for host in dropped]
    return placed_refused, warnings


def refused_message(refused: Mapping[str, str]) -> str:
    """Why a launch fails that this controller refused to build where it was placed."""
    return ("nothing was claimed, and no host is charged a failed build: this controller refuses to build "
            + "; ".join(why for _host, why in sorted(refused.items())))


def unfiltered_exact(spec: RequestSpec) -> dict[str, str]:
    """The filters that would choose hosts by what this request asks beyond vCPUs and memory
    (NUMA cells, dedicated CPUs, pages; devices) and that its enabled_filters leave out, each
    with what it would check."""
    missing = {}
    if spec.numa is not None and NUMA_TOPOLOGY_FILTER not in spec.enabled_filters:
        missing[NUMA_TOPOLOGY_FILTER] = "NUMA cells, dedicated CPUs or huge pages"
    if spec.pci is not None and PCI_PASSTHROUGH_FILTER not in spec.enabled_filters:
        missing[PCI_PASSTHROUGH_FILTER] = "PCI or mediated devices"
    return missing


def placement_rows(names: list[str], decision: Decision, fleet: Fleet, ledger: Ledger | None,
                   flavor: dict[str, Any], spec: RequestSpec) -> list[dict[str, Any]]:
    """One dict per placed instance: where it goes, how the build reaches that hypervisor,
    the alternates to retry on, each with the same, and what the instance records besides
    its flavor: its project and its image's properties (canonical, as the engine read
    them), which AggregateMultiTenancyIsolation and ImagePropertiesWeigher read back."""
    wanted = {p.host for p in decision.placements}
    for placement in decision.placements:
        wanted.update(placement.alternates)
    table = fleet.hosts
    positions: dict[str, int] = {}
    for position, host in enumerate(table.column("host")):
        if host in wanted:
            positions.setdefault(host, position)
    uuids = {host: table.column("uuid")[position] for host, position in positions.items()}
    uuids.update({p.host: p.uuid for p in decision.placements})
    if fleet.uris or ledger is None:
        targets = {host: {**inventory_target(table[position], fleet.uris.get(host)), "hypervisor_uuid": uuids[host]}
                   for host, position in positions.items()}
    else:
        by_uuid = ledger.build_targets(uuid for uuid in uuids.values() if uuid)
        targets = {host: by_uuid.get(uuid) or {"host": host, "hypervisor_uuid": uuid, "uri": None,
                                               "domain_types": []}
                   for host, uuid in uuids.items()}
    return [
        {"name": name, "host": p.host, "nodename": p.nodename, "hypervisor_uuid": p.uuid,
         "uri": targets[p.host]["uri"], "domain_types": targets[p.host]["domain_types"],
         "cpu": targets[p.host].get("cpu"), "cpu_shared_set": targets[p.host].get("cpu_shared_set"),
         "alternates": p.alternates, "targets": [targets[host] for host in p.alternates],
         "flavor": flavor, "vcpus": flavor["vcpus"], "memory_mb": flavor["memory_mb"],
         "project_id": spec.project_id, "image_properties": dict(spec.image_properties),
         "generation": fleet.generations[positions[p.host]]}
        for name, p in zip(names, decision.placements)
    ]


def _since(mark: float) -> float:
    return round(time.perf_counter() - mark, 6)
