"""Failover headroom (N+k): could the HA instances of failed hypervisors be restarted on the
rest of the fleet? Worked out as an evacuation would place them: each HA instance scheduled
from its recorded request (zone, group, hints, image properties, NUMA and devices) and the host
rules that select it, with the operator's filters and weighers of this run, highest ha_priority
first, each placement consumed before the next is decided. Private to the collection.

Which losses are checked (all k-subsets of a fleet are far too many):

- every hypervisor that holds an HA instance, alone (a host without one needs nothing
  restarted); this is the "single host" answer capacity.yml shows;
- with k > 1 failover hosts, each of those hypervisors together with the k - 1 others that hold
  the most HA memory (the heaviest losses), so that the k heaviest are checked together too.
  A loss of hosts that hold no HA instance but whose free room the others would need is not
  checked: the answer can say "held" where such a combination could not be absorbed.

k is the fleet's (``berth_failover_hosts: 1``) or each aggregate's (``berth_failover_hosts:
{prod: 2, batch: 0}``): a hypervisor's k is the largest of its aggregates' (0 in none named), its
single loss is checked where that is 1 or more, and the k - 1 heaviest others it is lost with are
of the same aggregate. Restarts go wherever the filters let them, inside the aggregate or not.

How it stays fast on a large fleet: for each distinct request (the HA instances of one flavor,
request and group share one), the real scheduler is run once on the whole fleet for its best
hosts (its placement and alternates: the shortlist). A loss is then decided on the shortlists
of the instances it restarts, with the same filters and weighers, and an instance that finds no
host there is decided again on the rest of the fleet (the hosts outside the shortlists, whose
state the loss has not changed), so "no host" is the whole fleet's answer. A loss whose
instances have the same requests as one decided already, on the same shortlisted hosts (none of
them lost), has its answer. Weighers normalise over the candidates they see, so the host a
restart is given may differ from the one a real evacuation picks on the whole fleet; whether a
host is found does not, for filters judge each host alone.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence, Union

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import of_spec, take
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import needed_host_fields, schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_rules import HostRule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor, HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.server_group import (
    ServerGroup,
    server_group_from_dict,
)
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import (
    move_request,
    request_rules,
    request_spec,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import instance_flavor
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

ENFORCE_MODES = ("refuse", "warn")
# The shortlist of one request: its best hosts on the whole fleet, this many beyond those its
# own instances of one loss could fill.
SHORTLIST_SPARE_HOSTS = 8


@dataclass(frozen=True)
class HaInstance:
    """One HA instance as a restart would schedule it: ``spec`` is its recorded request with the
    operator's settings of this run (a move's request, _placement_spec.move_request), ``key``
    what instances scheduled alike share."""

    name: str
    host: str
    priority: int
    spec: RequestSpec
    key: str


@dataclass
class Loss:
    """One loss checked: the ``failed`` hosts, where their HA instances would restart
    (``placed``: name -> host), and those that could not, each with the scheduler's reason."""

    failed: tuple[str, ...]
    placed: dict[str, str] = field(default_factory=dict)
    unplaced: dict[str, str] = field(default_factory=dict)

    @property
    def absorbed(self) -> bool:
        return not self.unplaced

    def to_dict(self) -> dict[str, Any]:
        return {"failed": list(self.failed), "absorbed": self.absorbed, "placed": dict(self.placed),
                "unplaced": [{"name": name, "reason": why} for name, why in self.unplaced.items()]}

    def sentence(self) -> str:
        """'the loss of hv2 could not be absorbed: web-1 (0/3 hosts are available: ...)'."""
        lost = " and ".join(self.failed)
        return f"the loss of {lost} could not be absorbed: " + "; ".join(
            f"{name} ({why})" for name, why in self.unplaced.items())


FailoverHosts = Union[int, Mapping[str, int]]


def failover_text(failover_hosts: FailoverHosts) -> str:
    """'1 host', '2 hosts', or per aggregate 'prod: 2 hosts, batch: 1 host'."""
    if isinstance(failover_hosts, Mapping):
        return ", ".join(f"{name}: {failover_text(k)}" for name, k in sorted(failover_hosts.items()))
    return f"{failover_hosts} host{'' if failover_hosts == 1 else 's'}"


def host_failover(table: HostTable, failover_hosts: FailoverHosts) -> dict[str, int]:
    """Each host's k: the fleet's, or the largest of its aggregates' (0 in none named)."""
    hosts = table.column("host")
    if not isinstance(failover_hosts, Mapping):
        return dict.fromkeys(hosts, failover_hosts)
    return {host: max([failover_hosts.get(aggregate["name"], 0) for aggregate in aggregates or []] or [0])
            for host, aggregates in zip(hosts, table.column("aggregates"))}


def loss_groups(table: HostTable, failover_hosts: FailoverHosts) -> list[tuple[int, set[str]]]:
    """The hosts lost together, each set with its k: the whole fleet, or each aggregate."""
    hosts = table.column("host")
    if not isinstance(failover_hosts, Mapping):
        return [(failover_hosts, set(hosts))]
    members: dict[str, set[str]] = {}
    for host, aggregates in zip(hosts, table.column("aggregates")):
        for aggregate in aggregates or []:
            members.setdefault(aggregate["name"], set()).add(host)
    return [(k, members.get(name, set())) for name, k in sorted(failover_hosts.items())]


@dataclass
class Headroom:
    """The answer: whether every checked loss of up to ``failover_hosts`` hosts (the fleet's,
    or each aggregate's) is absorbed."""

    failover_hosts: FailoverHosts
    ha_instances: int
    single: list[Loss]
    combined: list[Loss]

    @property
    def held(self) -> bool:
        return all(loss.absorbed for loss in [*self.single, *self.combined])

    @property
    def unabsorbed(self) -> list[Loss]:
        return [loss for loss in [*self.single, *self.combined] if not loss.absorbed]

    @property
    def single_hosts_unabsorbed(self) -> list[str]:
        return [loss.failed[0] for loss in self.single if not loss.absorbed]

    def summary(self) -> str:
        if not keeps_headroom(self.failover_hosts):
            return "no failover headroom is kept (berth_failover_hosts is 0)"
        said = (f"failover headroom for {failover_text(self.failover_hosts)} "
                f"({self.ha_instances} HA instances, {len(self.single) + len(self.combined)} losses checked)")
        if self.held:
            return f"{said}: held"
        return f"{said}: NOT held; " + "; ".join(loss.sentence() for loss in self.unabsorbed)

    def to_dict(self) -> dict[str, Any]:
        return {"failover_hosts": self.failover_hosts, "held": self.held, "ha_instances": self.ha_instances,
                "single_hosts_unabsorbed": self.single_hosts_unabsorbed,
                "unabsorbed": [loss.to_dict() for loss in self.unabsorbed],
                "losses_checked": len(self.single) + len(self.combined), "summary": self.summary()}


def instance_key(spec: RequestSpec) -> str:
    """What instances scheduled alike share: their engine request (without count or ignore_hosts)."""
    parts = {item.name: getattr(spec, item.name) for item in dataclasses.fields(spec)
             if item.name not in ("count", "ignore_hosts", "server_group")}
    group = spec.server_group.name if spec.server_group is not None else None
    return json.dumps([parts, group], sort_keys=True, default=repr)


def ha_instances(rows: Iterable[Mapping[str, Any]], settings: Settings,
                 groups: Mapping[str, Mapping[str, Any]], rules: Sequence[HostRule] = ()) -> list[HaInstance]:
    """The ledger's HA instances (Ledger.ha_instances) as restarts would schedule them: each from
    its recorded request, with the group its ledger row names as ``groups`` has it and the host
    ``rules`` (the ledger's) that select it."""
    found = []
    for row in rows:
        group = groups.get(row["server_group"]) if row.get("server_group") else None
        spec, _why_not = move_request(row, instance_flavor(row), settings, current_group=group, rules=rules)
        found.append(HaInstance(row["name"], row["host"], row["ha_priority"], spec, instance_key(spec)))
    return found


def planned_instances(placements: Sequence[Mapping[str, Any]], request: Request, settings: Settings,
                      group: Mapping[str, Any] | None, rules: Sequence[HostRule] = ()) -> list[HaInstance]:
    """A launch's placements as HA instances (for a launch with ``ha``), as a restart would
    schedule them (no image volume: as a move), held to the host ``rules`` that select them."""
    selected = request_rules(rules, [placement["name"] for placement in placements], request, group)
    spec = request_spec(request, settings, 1, server_group_from_dict(dict(group)) if group else None,
                        image_volume=None, host_rules=selected)
    key = instance_key(spec)
    return [HaInstance(placement["name"], placement["host"], request.ha_priority, spec, key)
            for placement in placements]


class Evacuations:
    """Decide losses on one fleet: ``table`` (every host, as the scheduler reads them) with
    ``overrides`` (host -> its state with a launch's planned instances consumed)."""

    def __init__(self, table: HostTable, overrides: Mapping[str, HostState] | None = None) -> None:
        self.table, self.overrides = table, dict(overrides or {})
        self.positions = {host: position for position, host in enumerate(table.column("host"))}
        self.shortlists: dict[str, list[str]] = {}
        self.decided: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[list[str | None], dict[int, str]]] = {}

    def state(self, host: str) -> HostState:
        return self.overrides.get(host) or self.table[self.positions[host]]

    def shortlist(self, instance: HaInstance, wanted: int) -> list[str]:
        """The request's best hosts on the whole fleet (its placement and alternates)."""
        if instance.key not in self.shortlists:
            spec = dataclasses.replace(instance.spec, count=1, max_attempts=wanted, explain="compact")
            decision = schedule(self.table, spec)
            self.shortlists[instance.key] = ([decision.placements[0].host, *decision.placements[0].alternates]
                                             if decision.ok else [])
        return self.shortlists[instance.key]

    def lose(self, failed: Sequence[str], instances: Sequence[HaInstance], wanted: int) -> Loss:
        """The HA instances of the ``failed`` hosts (``instances``, in restart order) placed on
        the rest, one after another."""
        loss = Loss(tuple(failed))
        lost = set(failed)
        pool: list[str] = []
        for host in [*self.overrides, *(host for instance in instances for host in self.shortlist(instance, wanted))]:
            if host not in lost and host not in pool:
                pool.append(host)
        # The same requests on the same hosts, decided on them alone: the same answer.
        memo = (tuple(instance.key for instance in instances), tuple(pool))
        earlier = self.decided.get(memo)
        if earlier is not None:
            hosts, reasons = earlier
            for index, instance in enumerate(instances):
                if hosts[index] is not None:
                    loss.placed[instance.name] = hosts[index]  # type: ignore[assignment]
                else:
                    loss.unplaced[instance.name] = reasons[index]
            return loss
        pool = list(pool)
        states: dict[str, HostState] = {}
        groups: dict[str, ServerGroup] = {}
        hosts: list[str | None] = []
        reasons: dict[int, str] = {}
        whole_fleet = False
        for index, instance in enumerate(instances):
            spec = instance.spec
            group = None
            if spec.server_group is not None:
                group = groups.setdefault(spec.server_group.name, spec.server_group.copy())
            spec = dataclasses.replace(spec, count=1, ignore_hosts=list(failed), server_group=group,
                                       explain="compact")
            candidates = [states.get(host) or self.state(host).copy() for host in pool]
            decision = schedule(HostTable.from_states(candidates), spec) if candidates else None
            said = [] if decision is None else [f"on {', '.join(pool)}: {decision.summary}"]
            if decision is None or not decision.ok:
                # The rest of the fleet: every host not in the pool is as the table has it.
                whole_fleet = True
                decision = schedule(self.table, dataclasses.replace(spec, ignore_hosts=[*failed, *pool]))
                said.append(f"on the rest of the fleet ({len(failed)} lost, {len(pool)} above): {decision.summary}"
                            if said else decision.summary)
            if not decision.ok:
                hosts.append(None)
                reasons[index] = loss.unplaced[instance.name] = "; ".join(said)
                continue
            chosen = decision.placements[0].host
            state = states.get(chosen) or self.state(chosen).copy()
            state.consume(spec.flavor)
            take(state, of_spec(spec))
            states[chosen] = state
            if chosen not in pool:
                pool.append(chosen)
            if group is not None:
                group.add(chosen)
            hosts.append(chosen)
            loss.placed[instance.name] = chosen
        if not whole_fleet:
            # Decided on the pool alone, so nothing outside it (the lost hosts among them) mattered.
            self.decided[memo] = (hosts, reasons)
        return loss


def failover_headroom(table: HostTable, instances: Sequence[HaInstance], failover_hosts: int,
                      overrides: Mapping[str, HostState] | None = None) -> Headroom:
    """Whether the HA ``instances`` of any ``failover_hosts`` failed hosts of ``table`` (the
    fleet's k, or each aggregate's) could be restarted on the others (the losses checked: this
    module's docstring)."""
    by_host: dict[str, list[HaInstance]] = {}
    for instance in sorted(instances, key=lambda item: (-item.priority, item.name)):
        by_host.setdefault(instance.host, []).append(instance)
    evacuations = Evacuations(table, overrides)
    known = set(evacuations.positions)
    by_host = {host: listed for host, listed in by_host.items() if host in known}
    most_per_host: dict[str, int] = {}
    for listed in by_host.values():
        for key in {instance.key for instance in listed}:
            most_per_host[key] = max(most_per_host.get(key, 0), sum(item.key == key for item in listed))
    ks = host_failover(table, failover_hosts)
    wanted = SHORTLIST_SPARE_HOSTS + max([*ks.values(), 1]) * max(most_per_host.values() or [1])
    single = [evacuations.lose([host], listed, wanted) for host, listed in sorted(by_host.items()) if ks[host] >= 1]
    combined = []
    load = {host: sum(instance.spec.flavor.memory_mb for instance in listed) for host, listed in by_host.items()}
    heaviest = sorted(load, key=lambda host: (-load[host], host))
    seen = set()
    for k, members in loss_groups(table, failover_hosts):
        if k < 2:
            continue
        for host in sorted(set(by_host) & members):
            others = [other for other in heaviest if other != host and other in members]
            failed = tuple(sorted({host, *others[:k - 1]}))
            if len(failed) < 2 or failed in seen:
                continue
            seen.add(failed)
            restarted = sorted((instance for lost in failed for instance in by_host.get(lost, [])),
                               key=lambda item: (-item.priority, item.name))
            combined.append(evacuations.lose(list(failed), restarted, wanted))
    counted = sum(len(listed) for host, listed in by_host.items() if ks[host] >= 1)
    return Headroom(failover_hosts, counted, single, combined)


def with_planned(table: HostTable, placements: Sequence[Mapping[str, Any]], flavor: Flavor,
                 request: Request, settings: Settings) -> dict[str, HostState]:
    """The hosts a launch's ``placements`` go to, each with its instances consumed."""
    positions = {host: position for position, host in enumerate(table.column("host"))}
    exact = of_spec(request_spec(request, settings))
    states: dict[str, HostState] = {}
    for placement in placements:
        host = placement["host"]
        if host not in positions:
            continue
        state = states.get(host) or table[positions[host]].copy()
        state.consume(flavor)
        take(state, exact)
        states[host] = state
    return states


def ledger_headroom(ledger: Any, settings: Settings, planned: Sequence[Mapping[str, Any]] = (),
                    request: Request | None = None, group: Mapping[str, Any] | None = None) -> Headroom:
    """The fleet's failover headroom for the operator's ``settings.failover_hosts``, from the
    ledger's hosts and HA instances; with ``planned`` (a launch's placements of ``request``,
    joining ``group``) as if they were claimed: what the launch would leave."""
    rows = ledger.ha_instances()
    names = sorted({row["server_group"] for row in rows if row.get("server_group")}
                   | ({group["name"]} if group is not None else set()))
    groups = {name: ledger.scheduler_group(name) for name in names}
    if group is not None and planned:
        with_new = server_group_from_dict(dict(groups.get(group["name"]) or group))
        for placement in planned:
            with_new.add(placement["host"])
        groups[group["name"]] = with_new.to_dict()
    rules = ledger.scheduler_rules()
    instances = ha_instances(rows, settings, groups, rules)
    if request is not None and request.ha and planned:
        instances += planned_instances(planned, request, settings, groups.get(group["name"]) if group else None,
                                       rules)
    specs = [instance.spec for instance in instances]
    if request is not None:
        specs.append(request_spec(request, settings))
    fields = set().union(*(needed_host_fields(spec) for spec in specs)) if specs else set()
    if isinstance(settings.failover_hosts, Mapping):
        fields.add("aggregates")
    networks = sorted({network for spec in specs for network in spec.requested_networks})
    table, _generations = ledger.host_table(fields, (), networks)
    overrides = (with_planned(table, planned, request.flavor, request, settings)
                 if request is not None and planned else None)
    return failover_headroom(table, instances, settings.failover_hosts, overrides)


def keeps_headroom(failover_hosts: FailoverHosts) -> bool:
    """Whether the setting keeps any room (a launch does the work only then)."""
    if isinstance(failover_hosts, Mapping):
        return any(failover_hosts.values())
    return bool(failover_hosts)


def check_failover_settings(settings: Settings) -> None:
    """berth_failover_hosts: 0 or more, or a mapping of aggregate names to 0 or more;
    berth_failover_enforce: refuse or warn."""
    value = settings.failover_hosts
    counts = value.items() if isinstance(value, Mapping) else [(None, value)]
    for aggregate, k in counts:
        if isinstance(k, bool) or not isinstance(k, int) or k < 0 \
                or (aggregate is not None and (not isinstance(aggregate, str) or not aggregate)):
            raise InputError("failover_hosts", f"failover_hosts (berth_failover_hosts) must be an integer of 0 or "
                                               f"more, or a mapping of aggregate names to such integers, got {value!r}")
    if settings.failover_enforce not in ENFORCE_MODES:
        raise InputError("failover_enforce", f"failover_enforce (berth_failover_enforce) must be one of "
                                             f"{', '.join(ENFORCE_MODES)}, got {settings.failover_enforce!r}")


def launch_check(ledger: Any, settings: Settings, placements: Sequence[Mapping[str, Any]], request: Request,
                 group: Mapping[str, Any] | None) -> tuple[str | None, list[str], Headroom]:
    """A launch's placements against the failover headroom, before they are claimed: the refusal
    (None: go on), the warnings, and the headroom the launch would leave. A launch is refused
    (berth_failover_enforce=refuse) only for a loss it makes unabsorbable that was absorbed
    before it; a headroom broken already is warned, and what it would be after named."""
    check_failover_settings(settings)
    after = ledger_headroom(ledger, settings, placements, request, group)
    if after.held:
        return None, [], after
    broken_before = {loss.failed for loss in ledger_headroom(ledger, settings).unabsorbed}
    new = [loss for loss in after.unabsorbed if loss.failed not in broken_before]
    placed = ", ".join(f"{placement['name']} on {placement['host']}" for placement in placements)
    setting = f"berth_failover_hosts={settings.failover_hosts}"
    if new:
        said = (f"the failover headroom ({setting}) would be broken: with {placed}, "
                + "; ".join(loss.sentence() for loss in new))
        if settings.failover_enforce == "refuse":
            return (f"{said}. Nothing was claimed (berth_failover_enforce=refuse): free room, add hosts, or "
                    f"launch where the HA instances do not need it (playbooks/capacity.yml shows the headroom)"), [], after
        return None, [f"{said} (berth_failover_enforce=warn: launched anyway)"], after
    old = "; ".join(loss.sentence() for loss in after.unabsorbed)
    return None, [f"the failover headroom ({setting}) is broken already, and this launch breaks it no further: "
                  f"{old}"], after
