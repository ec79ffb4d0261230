"""The rebalancer's planner: a list of moves that makes the fleet more even (goal ``spread``),
empties the fewest hosts it can (``pack``), or empties one host over several others (``drain``),
each move checked by the scheduler's own filters from the instance's recorded request, on host
states that already carry the moves planned before it. Pure: it is given the host states and
instances as the scheduler reads them from the ledger, and it decides nothing else. Private to the
collection.

The imbalance figure (``spread`` and ``drain``): over the hosts that can take instances (up and
enabled), each host's used fraction of RAM, (total - free) / (total x ram_allocation_ratio), and of
vCPUs, vcpus_used / (vcpus_total x cpu_allocation_ratio) - the limits RamFilter and CoreFilter
hold them to, so reserved memory counts as used - and the figure is the larger of the two
population standard deviations. 0 is a perfectly even fleet; 0.1 means a host typically sits 10
points of its capacity away from the mean.

The packing figure (``pack``): the hosts in use (holding instances) beyond the fewest that could
hold what they use, as a fraction of the hosts that can take instances. The fewest is the larger
over RAM and vCPUs of the count of largest hosts whose limits add up to what is used: a lower
bound, never a promise.

Anti-churn (the operator's berth_rebalance_* settings): with the figure at or below
``threshold`` nothing moves; a move (for ``pack``, the moves that empty one host together) that
lowers the figure by less than ``min_gain`` is not proposed; at most ``max_moves`` moves; an
instance that moved less than ``cooldown_seconds`` ago stays. A drain ignores all four: it must
empty its host.

How each destination is checked: the scheduler (driver.schedule) runs with the move's request
(_placement_spec.move_request: the recorded request, the operator's filters and weighers of this
run, the source ignored, the server group without the moving member, as the move's claim checks
it) on the planned host states. It runs first on a shortlist (for spread and drain the least
used hosts, for pack the most used that still hold instances), and on the whole fleet when none
of those passes: filters judge each host alone, so a host passing on the shortlist passes on the
whole fleet; the planner then picks among the passing hosts the one that lowers the figure most
(for pack: that leaves the least room). NUMA cells, pinned CPUs and devices are taken on the
destination (assignment.take) and not given back on the source, so a later move onto the source
sees less room than there is, never more.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import heapq
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import of_spec, take
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import (
    Decision,
    needed_host_fields,
    schedule,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_rules import HostRule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor, HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.server_group import server_group_from_dict
from ansible_collections.berth.fleet.plugins.plugin_utils._decision_text import recorded_constraints
from ansible_collections.berth.fleet.plugins.plugin_utils._headroom import HaInstance, failover_headroom, instance_key
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import move_request
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ACTIVE, STOPPED, instance_flavor
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

GOALS = ("spread", "pack", "drain")
# The states a move takes (move.MOVABLE_STATES); a paused instance is named, never moved.
MOVABLE = (ACTIVE, STOPPED)
# How many hosts the scheduler is first run on for one move (the shortlist), and how many of the
# most used hosts a spread tries to take an instance from per move.
SHORTLIST_HOSTS = 16
SOURCES_TRIED = 3


@dataclass(frozen=True)
class PlannedMove:
    """One move of the plan: ``name`` from ``from_host`` to ``to_host``, with the figure after it
    (``imbalance_after``) and why that host (the scheduler's word on the request)."""

    name: str
    uuid: str
    from_host: str
    to_host: str
    imbalance_after: float
    gain: float
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "imbalance_after": round(self.imbalance_after, 4),
                "gain": round(self.gain, 4)}


@dataclass
class Plan:
    """The planner's answer: the moves in the order to make them, the figure before and after
    them, why it stopped (``stopped``), and the instances it left where they are with why
    (``held``: name -> reason; for a drain, those it found no host for)."""

    goal: str
    imbalance_before: float
    imbalance_after: float
    moves: list[PlannedMove] = field(default_factory=list)
    stopped: str = ""
    held: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"goal": self.goal, "imbalance_before": round(self.imbalance_before, 4),
                "imbalance_after": round(self.imbalance_after, 4), "moves": [move.to_dict() for move in self.moves],
                "stopped": self.stopped,
                "held": [{"name": name, "reason": reason} for name, reason in sorted(self.held.items())]}


@dataclass(frozen=True)
class Controls:
    """The anti-churn settings of one plan (module documentation: berth_rebalance_*)."""

    threshold: float = 0.1
    min_gain: float = 0.005
    max_moves: int = 10
    cooldown_seconds: int = 3600

    @classmethod
    def from_settings(cls, settings: Settings) -> Controls:
        controls = cls(settings.rebalance_threshold, settings.rebalance_min_gain, settings.rebalance_max_moves,
                       settings.rebalance_cooldown_seconds)
        for name, value in (("rebalance_threshold", controls.threshold), ("rebalance_min_gain", controls.min_gain)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise InputError(name, f"{name} (berth_{name}) must be a number from 0 to 1, got {value!r}")
        for name, value in (("rebalance_max_moves", controls.max_moves),
                            ("rebalance_cooldown_seconds", controls.cooldown_seconds)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError(name, f"{name} (berth_{name}) must be an integer of 0 or more, got {value!r}")
        return controls


@dataclass
class Movable:
    """An instance the planner may move: its ledger row, flavor and group name, and the attached
    volumes its move carries (MB)."""

    row: Mapping[str, Any]
    flavor: Flavor
    group: str | None
    carried_mb: int = 0

    @property
    def name(self) -> str:
        return str(self.row["name"])


def load_fractions(state: HostState) -> tuple[float, float]:
    """The host's used fraction of its RAM and vCPU limits (this module's docstring)."""
    ram_limit = state.total_usable_ram_mb * state.ram_allocation_ratio
    cpu_limit = state.vcpus_total * state.cpu_allocation_ratio
    ram = (state.total_usable_ram_mb - state.free_ram_mb) / ram_limit if ram_limit > 0 else 0.0
    cpu = state.vcpus_used / cpu_limit if cpu_limit > 0 else 0.0
    return ram, cpu


def counted(state: HostState) -> bool:
    """Whether a host is one of those the figures count: up, enabled, with RAM and CPUs."""
    return bool(state.service_up and not state.disabled and state.total_usable_ram_mb > 0 and state.vcpus_total > 0)


def imbalance(hosts: HostTable | Sequence[HostState]) -> float:
    """The imbalance figure of ``hosts`` (this module's docstring), over those counted; read
    column by column, so that a sync's report of a large fleet builds no host state."""
    table = HostTable.of(hosts)
    columns = [table.column(name) for name in (
        "service_up", "disabled", "total_usable_ram_mb", "free_ram_mb", "ram_allocation_ratio", "vcpus_total",
        "vcpus_used", "cpu_allocation_ratio")]
    fractions = []
    for up, disabled, ram_mb, free_mb, ram_ratio, vcpus, vcpus_used, cpu_ratio in zip(*columns):
        if up and not disabled and ram_mb > 0 and vcpus > 0:
            fractions.append(((ram_mb - free_mb) / (ram_mb * ram_ratio), vcpus_used / (vcpus * cpu_ratio)))
    return _Spread.of(fractions).figure()


def packing_slack(states: Sequence[HostState]) -> float:
    """The packing figure of ``states`` (this module's docstring), over those counted."""
    hosts = [state for state in states if counted(state)]
    if not hosts:
        return 0.0
    in_use = sum(1 for state in hosts if state.num_instances > 0)
    return (in_use - _fewest_hosts(hosts)) / len(hosts)


def _fewest_hosts(hosts: Sequence[HostState]) -> int:
    ram_limits = sorted((state.total_usable_ram_mb * state.ram_allocation_ratio for state in hosts), reverse=True)
    cpu_limits = sorted((state.vcpus_total * state.cpu_allocation_ratio for state in hosts), reverse=True)
    ram_used = sum(state.total_usable_ram_mb - state.free_ram_mb for state in hosts if state.num_instances > 0)
    cpu_used = sum(state.vcpus_used for state in hosts if state.num_instances > 0)
    return max(_prefix_count(ram_limits, ram_used), _prefix_count(cpu_limits, cpu_used))


def _prefix_count(limits: Sequence[float], used: float) -> int:
    total, count = 0.0, 0
    for limit in limits:
        if total >= used:
            break
        total += limit
        count += 1
    return count


class _Spread:
    """Sums of the counted hosts' fractions and their squares, so that a move's figure after it is
    worked out from the two hosts it changes."""

    def __init__(self, count: int, sums: list[float]) -> None:
        self.count, self.sums = count, sums  # [ram, ram squared, cpu, cpu squared]

    @classmethod
    def of(cls, fractions: Sequence[tuple[float, float]]) -> _Spread:
        sums = [0.0, 0.0, 0.0, 0.0]
        for ram, cpu in fractions:
            sums[0] += ram
            sums[1] += ram * ram
            sums[2] += cpu
            sums[3] += cpu * cpu
        return cls(len(fractions), sums)

    def figure(self, change: Sequence[tuple[tuple[float, float], tuple[float, float]]] = ()) -> float:
        """The figure, with each (before, after) pair of fractions of ``change`` swapped in."""
        if not self.count:
            return 0.0
        sums = list(self.sums)
        for (ram_before, cpu_before), (ram_after, cpu_after) in change:
            sums[0] += ram_after - ram_before
            sums[1] += ram_after * ram_after - ram_before * ram_before
            sums[2] += cpu_after - cpu_before
            sums[3] += cpu_after * cpu_after - cpu_before * cpu_before
        return max(_deviation(sums[0], sums[1], self.count), _deviation(sums[2], sums[3], self.count))


def _deviation(total: float, squares: float, count: int) -> float:
    mean = total / count
    return math.sqrt(max(squares / count - mean * mean, 0.0))


class Planner:
    """Plans moves for the instances ``rows`` (ledger rows of placed instances, each with its
    server group's name as ``server_group``), with their ``groups`` ({name: the group in the
    scheduler's form, Ledger.scheduler_group}) and the operator's ``settings`` of this run.
    ``ha_rows``: the ledger's HA instances, for the failover headroom a pack keeps; ``rules``: the
    operator's host rules; ``carried``: what each instance's move carries of its attached volumes
    (carried_volumes_mb: {uuid: MB}), which its destination needs room for."""

    def __init__(self, rows: Sequence[Mapping[str, Any]], groups: Mapping[str, Mapping[str, Any]], settings: Settings,
                 ha_rows: Sequence[Mapping[str, Any]] = (), rules: Sequence[HostRule] = (),
                 carried: Mapping[str, int] | None = None) -> None:
        self.settings = settings
        self.instances = [Movable(row, instance_flavor(row), row.get("server_group"), (carried or {}).get(row["uuid"], 0))
                          for row in rows if row.get("host")]
        self.groups = {name: server_group_from_dict(dict(group)) for name, group in groups.items() if group}
        self.ha_names = {row["name"] for row in ha_rows}
        # The request each instance moves with, without its group (added per move, as planned).
        # The operator's host rules (Ledger.scheduler_rules) hold each move, as its claim will.
        self.specs = {item.name: move_request(item.row, item.flavor, settings, rules=rules,
                                              volume_disk_mb=item.carried_mb)[0] for item in self.instances}

    def host_fields(self) -> set[str]:
        """The host state fields the instances' filters and weighers read (Ledger.host_table's)."""
        return set().union(*(needed_host_fields(spec) for spec in self.specs.values())) if self.specs else set()

    def plan(self, table: HostTable | Sequence[HostState], goal: str, controls: Controls = Controls(),
             now: dt.datetime | None = None, drain_host: str | None = None) -> Plan:
        """The plan for ``goal`` on the host states ``table`` (the ledger's, claims as usage);
        ``now`` (UTC, naive as the ledger keeps times) is when the cooldown counts from;
        ``drain_host`` the host a drain empties."""
        if goal not in GOALS:
            raise InputError("goal", f"goal must be one of {', '.join(GOALS)}, got {goal!r}")
        table = HostTable.of(table)
        state = _PlanState(self, [table[position].copy() for position in range(len(table))])
        if goal == "drain":
            if drain_host not in state.positions:
                raise InputError("host", f"unknown host {drain_host} (hypervisors: {', '.join(sorted(state.positions))})")
            return state.drain(drain_host)
        now = now or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
        held: dict[str, str] = {}
        for item in self.instances:
            reason = _not_movable(item.row, now, controls.cooldown_seconds)
            if reason:
                held[item.name] = reason
        return state.pack(controls, held) if goal == "pack" else state.spread(controls, held)


def _not_movable(row: Mapping[str, Any], now: dt.datetime, cooldown_seconds: int) -> str | None:
    if row["state"] not in MOVABLE:
        return f"{row['state']}: only ACTIVE and STOPPED instances move"
    moved_at = row.get("moved_at")
    if moved_at:
        moved = dt.datetime.fromisoformat(moved_at) if isinstance(moved_at, str) else moved_at
        if moved.tzinfo is not None:
            moved = moved.astimezone(dt.timezone.utc).replace(tzinfo=None)
        since_s = (now - moved).total_seconds()
        if since_s < cooldown_seconds:
            return (f"moved {int(since_s)} s ago, within the cooldown of {cooldown_seconds} s "
                    f"(berth_rebalance_cooldown_seconds)")
    return None


class _PlanState:
    """The host states as the moves planned so far leave them, and where each instance is."""

    def __init__(self, planner: Planner, states: list[HostState]) -> None:
        self.planner, self.states = planner, states
        self.positions = {state.host: position for position, state in enumerate(states)}
        self.counted = [counted(state) for state in states]
        self.fractions = [load_fractions(state) for state in states]
        self.spread_sums = _Spread.of([self.fractions[i] for i in range(len(states)) if self.counted[i]])
        self.groups = {name: group.copy() for name, group in planner.groups.items()}
        self.on_host: dict[str, list[Movable]] = {}
        for item in planner.instances:
            self.on_host.setdefault(item.row["host"], []).append(item)
        self.moved: set[str] = set()

    # ---- figures -------------------------------------------------------------------------------

    def figure(self, goal: str) -> float:
        return packing_slack(self.states) if goal == "pack" else self.spread_sums.figure()

    def figure_after(self, source: int, destination: int, flavor: Flavor) -> float:
        """The imbalance figure were ``flavor`` moved from ``source`` to ``destination``."""
        change = []
        for position, sign in ((source, -1), (destination, 1)):
            if self.counted[position]:
                change.append((self.fractions[position], self._shifted(position, flavor, sign)))
        return self.spread_sums.figure(change)

    def _shifted(self, position: int, flavor: Flavor, sign: int) -> tuple[float, float]:
        state = self.states[position]
        ram_limit = state.total_usable_ram_mb * state.ram_allocation_ratio
        cpu_limit = state.vcpus_total * state.cpu_allocation_ratio
        ram, cpu = self.fractions[position]
        return (ram + sign * flavor.memory_mb / ram_limit if ram_limit > 0 else ram,
                cpu + sign * flavor.vcpus / cpu_limit if cpu_limit > 0 else cpu)

    def load(self, position: int) -> float:
        return max(self.fractions[position])

    # ---- one move ------------------------------------------------------------------------------

    def request(self, item: Movable, source: str, ignored: Sequence[str] = ()) -> RequestSpec:
        """The move's request: the instance's, with the source (and ``ignored``) ignored and its
        group as planned so far without it."""
        spec = self.planner.specs[item.name]
        group = None
        if item.group is not None and item.group in self.groups:
            group = self.groups[item.group].copy()
            if group.members.get(source, 0) > 0:
                group.members[source] -= 1
                if not group.members[source]:
                    del group.members[source]
                    group.hosts.remove(source)
        return dataclasses.replace(spec, ignore_hosts=[source, *ignored], server_group=group, count=1,
                                   max_attempts=SHORTLIST_HOSTS, explain="compact")

    def passing(self, spec: RequestSpec, shortlist: Sequence[int]) -> tuple[list[int], Decision]:
        """The hosts that pass the request's filters: among ``shortlist`` first, else the fleet's
        best (by the request's weighers)."""
        decision = None
        if shortlist:
            decision = schedule(HostTable.from_states([self.states[i] for i in shortlist]), spec)
        if decision is None or not decision.ok:
            decision = schedule(HostTable.from_states(self.states), spec)
        if not decision.ok:
            return [], decision
        chosen = decision.placements[0]
        return [self.positions[host] for host in [chosen.host, *chosen.alternates]], decision

    def apply(self, item: Movable, source: int, destination: int) -> None:
        """Plan ``item`` from ``source`` to ``destination``: the two host states and its group follow."""
        flavor = item.flavor
        source_state, target = self.states[source].copy(), self.states[destination].copy()
        # Its attached volumes of a local pool go with it.
        source_state.release(flavor.vcpus, flavor.memory_mb, 1024 * (flavor.root_gb + flavor.ephemeral_gb) + item.carried_mb)
        target.consume(flavor, volume_disk_mb=item.carried_mb)
        take(target, of_spec(self.planner.specs[item.name]))
        self.states[source], self.states[destination] = source_state, target
        for position in (source, destination):
            before = self.fractions[position]
            self.fractions[position] = load_fractions(self.states[position])
            if self.counted[position]:
                self.spread_sums = _Spread(self.spread_sums.count, list(self.spread_sums.sums))
                self.spread_sums.sums[0] += self.fractions[position][0] - before[0]
                self.spread_sums.sums[1] += self.fractions[position][0] ** 2 - before[0] ** 2
                self.spread_sums.sums[2] += self.fractions[position][1] - before[1]
                self.spread_sums.sums[3] += self.fractions[position][1] ** 2 - before[1] ** 2
        from_host, to_host = self.states[source].host, self.states[destination].host
        if item.group is not None and item.group in self.groups:
            group = self.groups[item.group]
            if group.members.get(from_host, 0) > 0:
                group.members[from_host] -= 1
                if not group.members[from_host]:
                    del group.members[from_host]
                    group.hosts.remove(from_host)
            group.add(to_host)
        self.on_host[from_host].remove(item)
        self.on_host.setdefault(to_host, []).append(item)
        self.moved.add(item.name)

    def snapshot(self) -> tuple[Any, ...]:
        return (list(self.states), list(self.fractions), _Spread(self.spread_sums.count, list(self.spread_sums.sums)),
                {name: group.copy() for name, group in self.groups.items()},
                {host: list(items) for host, items in self.on_host.items()}, set(self.moved))

    def restore(self, saved: tuple[Any, ...]) -> None:
        self.states, self.fractions, self.spread_sums, self.groups, self.on_host, self.moved = saved

    @staticmethod
    def why(decision: Decision) -> str:
        said = f"passes every filter ({decision.summary})"
        constrained = recorded_constraints(decision)
        if constrained:
            said += f"; its launch's request turned down {constrained}"
        return said

    # ---- goals ---------------------------------------------------------------------------------

    def coolest(self, excluded: set[int]) -> list[int]:
        """The least used counted hosts, ``excluded`` left out: a spread's shortlist."""
        return heapq.nsmallest(SHORTLIST_HOSTS, (i for i in range(len(self.states))
                                                 if self.counted[i] and i not in excluded), key=self.load)

    def spread(self, controls: Controls, held: dict[str, str]) -> Plan:
        before = figure = self.figure("spread")
        plan = Plan("spread", before, before, held=held)
        while True:
            if figure <= controls.threshold:
                plan.stopped = (f"the imbalance {figure:.4f} is at or under the threshold {controls.threshold} "
                                f"(berth_rebalance_threshold)")
                break
            if len(plan.moves) >= controls.max_moves:
                plan.stopped = f"{controls.max_moves} moves planned (berth_rebalance_max_moves)"
                break
            best = self._best_spread_move(figure, held)
            if best is None:
                plan.stopped = "no instance of the most used hosts can go anywhere that lowers the imbalance"
                break
            gain, item, source, destination, why = best
            # A move that gains nothing is churn, whatever the minimum gain says.
            if gain <= 0:
                plan.stopped = "no move of an instance of the most used hosts lowers the imbalance"
                break
            if gain < controls.min_gain:
                plan.stopped = (f"the best move left ({item.name} to {self.states[destination].host}) lowers the "
                                f"imbalance by {gain:.4f}, under the minimum gain {controls.min_gain} "
                                f"(berth_rebalance_min_gain)")
                break
            self.apply(item, source, destination)
            figure = self.figure("spread")
            plan.moves.append(PlannedMove(item.name, item.row["uuid"], self.states[source].host,
                                          self.states[destination].host, figure, gain, why))
        plan.imbalance_after = figure
        return plan

    def _best_spread_move(self, figure: float, held: Mapping[str, str]) -> tuple[Any, ...] | None:
        hottest = heapq.nlargest(SOURCES_TRIED, (i for i in range(len(self.states)) if self.counted[i] and any(
            item.name not in held and item.name not in self.moved
            for item in self.on_host.get(self.states[i].host, []))), key=self.load)
        best = None
        for source in hottest:
            host = self.states[source].host
            tried: set[tuple[str, str | None]] = set()
            for item in self.on_host.get(host, []):
                if item.name in held or item.name in self.moved:
                    continue
                key = (instance_key(self.planner.specs[item.name]), item.group)
                if key in tried:
                    continue
                tried.add(key)
                spec = self.request(item, host)
                passing, decision = self.passing(spec, self.coolest({source}))
                for destination in passing:
                    gain = figure - self.figure_after(source, destination, item.flavor)
                    if best is None or gain > best[0] + 1e-12:
                        best = (gain, item, source, destination, self.why(decision))
        return best

    def pack(self, controls: Controls, held: dict[str, str]) -> Plan:
        before = figure = self.figure("pack")
        plan = Plan("pack", before, before, held=held)
        emptied: set[int] = set()
        failover = self.planner.settings.failover_hosts
        headroom_before = self.headroom(failover) if failover else True
        while True:
            if figure <= controls.threshold:
                plan.stopped = (f"the packing figure {figure:.4f} is at or under the threshold "
                                f"{controls.threshold} (berth_rebalance_threshold)")
                break
            in_use = [i for i in range(len(self.states)) if self.counted[i] and self.states[i].num_instances > 0
                      and i not in emptied]
            progress = False
            # The least used host first: the fewest moves free a host.
            for source in sorted(in_use, key=lambda i: (self.load(i), self.states[i].host)):
                host = self.states[source].host
                items = sorted(self.on_host.get(host, []), key=lambda item: (-item.flavor.memory_mb, item.name))
                if not items or self.states[source].num_instances != len(items):
                    continue  # it holds what Berth does not manage, or nothing to move
                if any(item.name in held or item.name in self.moved for item in items):
                    continue
                if len(plan.moves) + len(items) > controls.max_moves:
                    continue
                saved = self.snapshot()
                planned = self._empty(source, items, emptied)
                after = self.figure("pack")
                if planned is None or figure - after < controls.min_gain or figure <= after or (
                        failover and headroom_before and not self.headroom(failover)):
                    self.restore(saved)
                    continue
                emptied.add(source)
                gain = figure - after
                for item, destination, why in planned:
                    plan.moves.append(PlannedMove(item.name, item.row["uuid"], host, self.states[destination].host,
                                                  after, gain / len(planned), why))
                figure = after
                progress = True
                break
            if not progress:
                plan.stopped = ("no further host can be emptied onto the others within the move budget, the "
                                "minimum gain and the filters (and the failover headroom)")
                break
        plan.imbalance_after = figure
        return plan

    def _empty(self, source: int, items: Sequence[Movable], emptied: set[int]) -> list[tuple[Any, ...]] | None:
        """Plan every one of ``items`` off ``source`` onto hosts in use (best fit: the most used
        that passes); None if one finds no host."""
        host = self.states[source].host
        planned = []
        for item in items:
            # Neither empty hosts (that would undo the pack) nor those emptied already.
            ignored = [self.states[i].host for i in range(len(self.states))
                       if i != source and (i in emptied or self.states[i].num_instances == 0)]
            spec = self.request(item, host, ignored)
            shortlist = heapq.nlargest(SHORTLIST_HOSTS, (i for i in range(len(self.states)) if self.counted[i]
                                                         and i != source and i not in emptied
                                                         and self.states[i].num_instances > 0), key=self.load)
            passing, decision = self.passing(spec, shortlist)
            if not passing:
                return None
            destination = max(passing, key=lambda i: (max(self._shifted(i, item.flavor, 1)), -i))
            self.apply(item, source, destination)
            planned.append((item, destination, self.why(decision)))
        return planned

    def headroom(self, failover_hosts: int) -> bool:
        """Whether the failover headroom holds with the moves planned so far: each HA instance
        restarted from its request, with its group as planned (as _headroom.ha_instances)."""
        instances = []
        for host, items in self.on_host.items():
            for item in items:
                if item.name in self.planner.ha_names:
                    spec = self.planner.specs[item.name]
                    if item.group is not None and item.group in self.groups:
                        spec = dataclasses.replace(spec, server_group=self.groups[item.group].copy())
                    instances.append(HaInstance(item.name, host, int(item.row.get("ha_priority") or 0), spec,
                                                instance_key(spec)))
        if not instances:
            return True
        return failover_headroom(HostTable.from_states(self.states), instances, failover_hosts).held

    def drain(self, host: str) -> Plan:
        source = self.positions[host]
        # The drained host does not count: the figure is the rest's evenness.
        self.counted[source] = False
        self.spread_sums = _Spread.of([self.fractions[i] for i in range(len(self.states)) if self.counted[i]])
        before = self.figure("spread")
        plan = Plan("drain", before, before)
        items = sorted(self.on_host.get(host, []), key=lambda item: (-item.flavor.memory_mb, -item.flavor.vcpus,
                                                                     item.name))
        for item in items:
            if item.row["state"] not in MOVABLE:
                plan.held[item.name] = f"{item.row['state']}: only ACTIVE and STOPPED instances move"
                continue
            figure = self.figure("spread")
            passing, decision = self.passing(self.request(item, host), self.coolest({source}))
            if not passing:
                plan.held[item.name] = f"no host can take it: {decision.summary}"
                continue
            destination = min(passing, key=lambda i: (self.figure_after(source, i, item.flavor),
                                                      max(self._shifted(i, item.flavor, 1)), i))
            after = self.figure_after(source, destination, item.flavor)
            self.apply(item, source, destination)
            plan.moves.append(PlannedMove(item.name, item.row["uuid"], host, self.states[destination].host, after,
                                          figure - after, self.why(decision)))
        plan.imbalance_after = self.figure("spread")
        plan.stopped = f"every instance of {host} planned" if not plan.held else f"{len(plan.held)} left on {host}"
        return plan
