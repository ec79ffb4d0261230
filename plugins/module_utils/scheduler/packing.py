"""Batch placement that packs: many instances, or a deployment of several (flavor, count, server
group) entries, placed together on as few hosts as a solver can find, all or nothing.

The greedy engine (driver.schedule) places one instance at a time on the best host of the
moment, as Nova does; with a spreading weigher a batch of a thousand lands on every host. Here the
whole batch is one CP-SAT model (OR-Tools, an optional extra: ``pip install ortools``):

- which hosts each entry may use, and how many of its instances each takes, come from the real
  filters (capacity.host_capacities: the filters asked after n instances), so every hard filter
  the greedy path runs also bounds the solver;
- what entries share on a host (RAM, vCPUs, disk as the enabled resource filters count them,
  with their allocation ratios; instances and IO operations as their filters count them) is a sum
  constraint per filter;
- server groups: anti-affinity at most max_server_per_host members per host (those already there
  included), affinity all members on one host (the one holding members, if any);
- the objective is the hosts in use afterwards (``hosts``) or the memory stranded on them
  (``stranded``: the free memory of every host the batch opens), within a time limit.

The solver's answer is then replayed through the filters instance by instance, consuming each
host as the greedy path does; a placement any filter refuses there (a rule across entries the
model does not hold) sends the batch to the greedy order. So
does a missing ortools, a time limit of 0, no solution in time, and a request the model does
not describe (forced hosts, NUMA cells, pinned CPUs, pages or devices). The explanation says
which method placed the batch, why, and the gap between the best objective and the solver's
bound.
"""
from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import of_spec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.backend import first_rejection
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.capacity import host_capacities
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import (
    Decision,
    Placement,
    active_filters,
    schedule,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import SchedulerInputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.explain import (
    closest_misses,
    count_reasons,
    success_summary,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.io_ops import IoOpsFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.num_instances import NumInstancesFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.resource import ResourceFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import REASON_IGNORED, Rejection
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.server_group import ServerGroup

OBJECTIVES = ("hosts", "stranded")
METHOD_PACKING = "packing"
METHOD_GREEDY = "greedy"
# The solver's seed: the same batch on the same fleet gets the same answer when it is proved
# optimal; a timed-out search may still differ run to run (CP-SAT's workers race).
SOLVER_SEED = 1


def load_solver() -> Any:
    """The seam to OR-Tools' CP-SAT module, or None where it is not installed (the batch then
    goes in greedy order). Unit tests replace this function to take the solver away."""
    try:
        from ortools.sat.python import cp_model
    except ImportError:
        return None
    return cp_model


@dataclass
class Batch:
    """The answer to a batch: one Decision per entry (all ok, or the failed one not ok), and how
    it was reached (``explanation``: method, reason, objective, hosts used, bound, gap)."""

    decisions: list[Decision]
    explanation: dict[str, Any]

    @property
    def ok(self) -> bool:
        return all(decision.ok for decision in self.decisions)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "decisions": [decision.to_dict() for decision in self.decisions],
                "packing": dict(self.explanation)}


def place_batch(hosts: Sequence[HostState] | HostTable, specs: Sequence[RequestSpec], time_limit_s: float,
                objective: str = "hosts", greedy_reason: str | None = None) -> Batch:
    """Place every entry of ``specs`` (each a request of ``count`` instances) together on
    ``hosts``: packed by the solver when it can, else in Nova's greedy order, entry after entry
    (always, with ``greedy_reason`` given: the operator chose it).

    Works on copies, as driver.schedule does. Entries naming the same server group share it.
    """
    if objective not in OBJECTIVES:
        raise SchedulerInputError("packing_objective", f"packing_objective must be one of {', '.join(OBJECTIVES)}, "
                                                       f"got {objective!r}")
    if isinstance(time_limit_s, bool) or not isinstance(time_limit_s, (int, float)) or time_limit_s < 0:
        raise SchedulerInputError("packing_time_limit", f"packing_time_limit must be a number of seconds, 0 or more, "
                                                        f"got {time_limit_s!r}")
    states = list(HostTable.of(hosts))
    greedy = _greedy(states, _shared_groups(specs))
    greedy_used = _hosts_used(states, greedy) if all(d.ok for d in greedy) else None
    explanation: dict[str, Any] = {"objective": objective, "time_limit_s": time_limit_s,
                                   "greedy_hosts_used": greedy_used}

    def fallback(reason: str) -> Batch:
        explanation.update(method=METHOD_GREEDY, reason=reason, hosts_used=greedy_used, best=None, bound=None,
                           gap_percent=None)
        note = f"placed in Nova's greedy order: {reason}"
        return Batch([_noted(decision, note) for decision in greedy], explanation)

    specs = _shared_groups(specs)
    why_not = greedy_reason or _not_modelled(specs)
    if why_not:
        return fallback(why_not)
    if time_limit_s == 0:
        return fallback("the packing time limit is 0")
    cp_model = load_solver()
    if cp_model is None:
        return fallback("the Python package ortools is not installed (pip install ortools)")
    started = time.perf_counter()
    capacities = [host_capacities(states, spec) for spec in specs]
    solved = _solve(cp_model, states, specs, capacities, time_limit_s, objective,
                    greedy if greedy_used is not None else None)
    explanation["solve_s"] = round(time.perf_counter() - started, 3)
    explanation["status"] = solved.status
    if solved.counts is None:
        return fallback(f"the solver found no placement in {time_limit_s:g} s ({solved.status})")
    decisions, refusal = _replay(states, _shared_groups(specs), capacities, solved.counts)
    if refusal:
        return fallback(f"a filter refused the solver's placement: {refusal}")
    gap = 0.0 if solved.best == 0 else 100.0 * (solved.best - solved.bound) / solved.best
    explanation.update(method=METHOD_PACKING, reason=f"CP-SAT, {solved.status.lower()}",
                       hosts_used=_hosts_used(states, decisions), best=solved.best, bound=solved.bound,
                       gap_percent=round(gap, 2))
    note = (f"packed by CP-SAT ({solved.status.lower()}, objective {objective} {solved.best:g}, "
            f"bound {solved.bound:g}, gap {gap:.2f} %)")
    return Batch([_noted(decision, note) for decision in decisions], explanation)


def pack_request(hosts: Sequence[HostState] | HostTable, spec: RequestSpec, time_limit_s: float,
                 objective: str = "hosts") -> Decision:
    """One request's instances placed as a batch of one entry: its Decision, whose ``packing``
    says how."""
    batch = place_batch(hosts, [spec], time_limit_s, objective)
    decision = batch.decisions[0]
    decision.packing = batch.explanation
    return decision


def _shared_groups(specs: Sequence[RequestSpec]) -> list[RequestSpec]:
    """Copies of the specs whose server groups are one object per group name (a deployment's
    entries of one group count each other's members), copied from the caller's: each pass
    (greedy, solver, replay) adds members to its own."""
    groups: dict[str, ServerGroup] = {}
    shared = []
    for spec in specs:
        group = spec.server_group
        if group is not None:
            if group.name not in groups:
                groups[group.name] = group.copy()
            elif groups[group.name].policy != group.policy:
                raise SchedulerInputError("server_group", f"server group {group.name} is given with two policies, "
                                                          f"{groups[group.name].policy} and {group.policy}")
            group = groups[group.name]
        shared.append(dataclasses.replace(spec, server_group=group))
    return shared


def _not_modelled(specs: Sequence[RequestSpec]) -> str | None:
    """Why the model cannot describe these requests, or None."""
    for spec in specs:
        if spec.force_hosts or spec.force_nodes:
            return "forced hosts skip the filters, which the packing model is built from"
        if of_spec(spec) is not None:
            return "NUMA cells, dedicated CPUs, pages or devices are placed one instance at a time"
        if spec.driver == "chance":
            return "the chance driver places at random"
    return None


def _greedy(states: list[HostState], specs: Sequence[RequestSpec]) -> list[Decision]:
    """Nova's order, entry after entry, each seeing the previous ones' instances consumed; stops at
    the first entry that does not fit (its Decision says why)."""
    current = [state.copy() for state in states]
    position = {state.host: index for index, state in enumerate(current)}
    decisions = []
    for spec in specs:
        decision = schedule(current, spec)
        decisions.append(decision)
        if not decision.ok:
            break
        for placement in decision.placements:
            current[position[placement.host]].consume(spec.flavor, volume_disk_mb=spec.volume_disk_mb)
            if spec.server_group is not None:
                spec.server_group.add(placement.host)
    return decisions


def _hosts_used(states: Sequence[HostState], decisions: Sequence[Decision]) -> int:
    """Hosts holding instances once the batch is placed: those that held some, and those it uses."""
    used = {state.host for state in states if state.num_instances}
    for decision in decisions:
        used.update(placement.host for placement in decision.placements)
    return len(used)


@dataclass
class _Solved:
    status: str
    counts: list[dict[int, int]] | None  # per entry: host position -> instances
    best: float = 0.0
    bound: float = 0.0


def _solve(cp_model: Any, states: list[HostState], specs: Sequence[RequestSpec], capacities: list[list[Any]],
           time_limit_s: float, objective: str, greedy: list[Decision] | None) -> _Solved:
    model = cp_model.CpModel()
    # x[e][h]: how many of entry e's instances host h takes, for the hosts its filters admit.
    x: list[dict[int, Any]] = []
    for entry, spec in enumerate(specs):
        variables = {}
        room = 0
        for position, found in enumerate(capacities[entry]):
            bound = spec.count if found.fits is None else min(found.fits, spec.count)
            if bound > 0:
                variables[position] = model.NewIntVar(0, bound, f"x{entry}_{position}")
                room += bound
        if room < spec.count:
            return _Solved("INFEASIBLE", None)
        model.Add(sum(variables.values()) == spec.count)
        x.append(variables)
    # used[h]: the batch puts something on h (a host already holding instances costs nothing more).
    used = {}
    for position in sorted({position for variables in x for position in variables}):
        flag = model.NewBoolVar(f"used{position}")
        for entry, variables in enumerate(x):
            if position in variables:
                model.Add(variables[position] <= specs[entry].count * flag)
        used[position] = flag
    _resource_constraints(model, states, specs, x, used)
    _group_constraints(model, states, specs, x)
    costs = _costs(states, specs, used, objective)
    _break_symmetry(model, states, capacities, used, costs)
    model.Minimize(sum(costs[position] * flag for position, flag in used.items()))
    constant = sum(1 for state in states if state.num_instances) if objective == "hosts" else 0
    if greedy is not None:
        # Start from Nova's answer: the solver can only do better, and has one at once.
        hint = [dict() for _spec in specs]
        position = {state.host: index for index, state in enumerate(states)}
        for entry, decision in enumerate(greedy):
            for placement in decision.placements:
                host = position[placement.host]
                hint[entry][host] = hint[entry].get(host, 0) + 1
        for entry, variables in enumerate(x):
            for host, var in variables.items():
                model.AddHint(var, hint[entry].get(host, 0))
        for host, flag in used.items():
            model.AddHint(flag, int(any(host in counts for counts in hint)))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.random_seed = SOLVER_SEED
    status = solver.Solve(model)
    name = solver.StatusName(status)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return _Solved(name, None)
    counts = [{host: solver.Value(var) for host, var in variables.items() if solver.Value(var)}
              for variables in x]
    best = solver.ObjectiveValue() + constant
    bound = solver.BestObjectiveBound() + constant
    if objective == "hosts":
        bound = math.ceil(bound - 1e-9)
    return _Solved(name, counts, best, min(bound, best))


def _resource_constraints(model: Any, states: list[HostState], specs: Sequence[RequestSpec],
                          x: list[dict[int, Any]], used: dict[int, Any]) -> None:
    """What the entries take together of each host stays within what every enabled resource filter
    leaves free there (its limit with the allocation ratio, minus what is used), and their number
    within what the instance and IO-operation filters still admit."""
    filters = [active_filters(spec) for spec in specs]
    for position, flag in used.items():
        state = states[position]
        taken: dict[str, list[Any]] = {}
        free: dict[str, float] = {}
        for entry, spec in enumerate(specs):
            if position not in x[entry]:
                continue
            for host_filter in filters[entry]:
                if isinstance(host_filter, (NumInstancesFilter, IoOpsFilter)):
                    # Every instance placed adds one to the host's instances and IO operations,
                    # whatever its entry: the entries together stay under the filter's maximum.
                    counted = "num_instances" if isinstance(host_filter, NumInstancesFilter) else "num_io_ops"
                    key = type(host_filter).__name__
                    room = host_filter.number("maximum", state, spec) - getattr(state, counted)
                    free[key] = min(free.get(key, room), room)
                    taken.setdefault(key, []).append(x[entry][position])
                    continue
                if not isinstance(host_filter, ResourceFilter):
                    continue
                fit = host_filter.fit(state, host_filter.number("allocation_ratio", state, spec), spec)
                if not fit.applies:
                    continue
                key = type(host_filter).__name__
                free[key] = min(free.get(key, fit.free), fit.free)
                taken.setdefault(key, []).append(int(math.ceil(fit.requested)) * x[entry][position])
        for key, terms in taken.items():
            model.Add(sum(terms) <= int(math.floor(free[key])) * flag)


def _group_constraints(model: Any, states: list[HostState], specs: Sequence[RequestSpec],
                       x: list[dict[int, Any]]) -> None:
    groups: dict[str, list[int]] = {}
    for entry, spec in enumerate(specs):
        if spec.server_group is not None:
            groups.setdefault(spec.server_group.name, []).append(entry)
    for entries in groups.values():
        group = specs[entries[0]].server_group
        hosts = sorted({position for entry in entries for position in x[entry]})
        if group.policy == "anti-affinity":
            for position in hosts:
                members = [x[entry][position] for entry in entries if position in x[entry]]
                # The group's entries together, with the members already there.
                room = group.max_server_per_host - group.member_count(states[position].host)
                model.Add(sum(members) <= room)
        elif group.policy == "affinity":
            chosen = {position: model.NewBoolVar(f"{group.name}@{position}") for position in hosts}
            model.AddExactlyOne(chosen.values())
            for entry in entries:
                for position, var in x[entry].items():
                    model.Add(var <= specs[entry].count * chosen[position])


def _costs(states: list[HostState], specs: Sequence[RequestSpec], used: dict[int, Any],
           objective: str) -> dict[int, int]:
    """What opening each host costs: 1 (hosts) or its free memory in MiB (stranded), and nothing
    for a host that holds instances already (it is in use either way)."""
    costs = {}
    for position in used:
        state = states[position]
        if state.num_instances:
            costs[position] = 0
        elif objective == "hosts":
            costs[position] = 1
        else:
            costs[position] = max(int(state.free_ram_mb), 0)
    return costs


def _break_symmetry(model: Any, states: list[HostState], capacities: list[list[Any]], used: dict[int, Any],
                    costs: dict[int, int]) -> None:
    """Hosts alike in everything the model reads are opened in host order: the solver then proves
    its bound without trying every permutation of identical empty hosts."""
    alike: dict[tuple[Any, ...], list[int]] = {}
    for position in used:
        state = states[position]
        key = (costs[position], state.free_ram_mb, state.free_disk_mb, state.vcpus_total, state.vcpus_used,
               state.cpu_allocation_ratio, state.ram_allocation_ratio, state.disk_allocation_ratio,
               tuple(entry[position].fits for entry in capacities))
        alike.setdefault(key, []).append(position)
    for positions in alike.values():
        for earlier, later in zip(positions, positions[1:]):
            model.Add(used[earlier] >= used[later])


def _replay(states: list[HostState], specs: Sequence[RequestSpec], capacities: list[list[Any]],
            counts: list[dict[int, int]]) -> tuple[list[Decision], str | None]:
    """The solver's counts as placements, each instance checked by the filters on the host as the
    instances before it left it, as the greedy path checks its own. Returns the decisions, or the
    first refusal (host, instance and the filter's reason)."""
    current = [state.copy() for state in states]
    decisions = []
    for entry, spec in enumerate(specs):
        filters = active_filters(spec)
        group = spec.server_group
        placements: list[Placement] = []
        order = [position for position, count in sorted(counts[entry].items()) for _number in range(count)]
        for index, position in enumerate(order):
            state = current[position]
            rejection = first_rejection(filters, state, spec, index)
            if rejection is not None:
                return [], f"instance {index + 1} of entry {entry + 1} on {state.host}: {rejection.message()}"
            placements.append(Placement(index=index, host=state.host, nodename=state.nodename, uuid=state.uuid,
                                        weight=0.0, weights=[], limits=dict(state.limits), alternates=[],
                                        runners_up=[]))
            state.consume(spec.flavor, volume_disk_mb=spec.volume_disk_mb)
            if group is not None:
                group.add(state.host)
        decisions.append(_decision(states, spec, placements, capacities[entry]))
    return decisions, None


def _decision(states: list[HostState], spec: RequestSpec, placements: list[Placement],
              capacities: list[Any]) -> Decision:
    """A packed entry's Decision, with the hosts its filters turned down counted as the greedy
    path counts them."""
    pairs = []
    for position, found in enumerate(capacities):
        if found.fits == 0:
            # No filter's rejection: ignore_hosts dropped it before the filters, as in driver.py.
            pairs.append((position, found.rejection or Rejection(found.host, "ignore_hosts", REASON_IGNORED)))
    return Decision(ok=True, placements=placements, summary=success_summary([p.host for p in placements]),
                    failed_index=None, hosts_total=len(states), rejected_total=len(pairs),
                    reasons=[item.to_dict(spec) for item in count_reasons(pairs)],
                    closest_misses=[rejection for _position, rejection in closest_misses(pairs)],
                    rejections=None, engine=METHOD_PACKING, idle_hints=[str(item) for item in spec.idle_hints()])


def _noted(decision: Decision, note: str) -> Decision:
    decision.summary = f"{decision.summary}; {note}"
    return decision
