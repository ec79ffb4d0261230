"""The scheduling pass (Nova's FilterScheduler._schedule): filter, weigh and pick a host for each
instance of a request, consuming it so the next instance sees it gone, and say why when none fits.

PlainBackend runs every filter and weigher host by host; vector.VectorBackend (NumPy) gives
the same decisions on large fleets.
"""
from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.backend import (
    PlainBackend,
    Ranked,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.explain import (
    failure_summary,
    success_summary,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import (
    FILTERS,
    WEIGHERS,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_IGNORED,
    REASON_NOT_FORCED,
    Rejection,
    WeightDetail,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import BaseWeigher

RUNNERS_UP_SHOWN = 3
# With explain "auto", fleets up to this size get every rejected host in the answer; larger
# ones get the counts per reason and the closest misses, which stay small at 100,000 hosts.
AUTO_FULL_EXPLAIN_HOSTS = 100
# With engine "auto", the vectorised path takes over from this many hosts (when NumPy is
# there); below it, setting up arrays costs more than it saves.
AUTO_VECTORIZED_HOSTS = 200


@dataclass
class Placement:
    """Where one instance goes, and why there."""

    index: int
    host: str
    nodename: str
    uuid: str | None
    weight: float
    weights: list[WeightDetail]
    limits: dict[str, float]
    alternates: list[str]  # next best hosts to retry on, best first
    # [{"host", "weight", "weights"}]: how close the choice was, and which weigher decided it
    runners_up: list[dict[str, Any]]
    # What it takes of the host's NUMA cells, CPUs, pages and devices (assignment.take), None
    # when it asks for none: the claim fits it again under the host's lock and records its own.
    assignment: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["weights"] = [detail.to_dict() for detail in self.weights]
        return data


@dataclass
class Decision:
    """The answer to one request: all placements, or none and why.

    `reasons` counts the hosts that were not candidates at the end by reason; `closest_misses`
    are the rejected hosts that came nearest to fitting. `rejections` holds every rejected
    host, each with the rejection from the pass that dropped it, in the order the hosts were
    given, when the request asked for the full explanation (explain "full", or "auto" on a
    small fleet); otherwise it is None.
    """

    ok: bool
    placements: list[Placement]
    summary: str
    failed_index: int | None
    hosts_total: int
    rejected_total: int
    reasons: list[dict[str, Any]]
    closest_misses: list[Rejection]
    rejections: list[Rejection] | None
    engine: str = "plain"  # which implementation decided; both decide the same
    # The request's hints that no filter read (RequestSpec.idle_hints), each as a sentence: a
    # move decides with them (a launch refuses them first), and its explanation says so.
    idle_hints: list[str] = dataclasses.field(default_factory=list)
    # How a batch was placed (packing.place_batch's explanation: method, reason, gap to the
    # solver's bound), None for the greedy engine's own decisions.
    packing: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {
            "ok": self.ok,
            "placements": [placement.to_dict() for placement in self.placements],
            "summary": self.summary,
            "failed_index": self.failed_index,
            "hosts_total": self.hosts_total,
            "rejected_total": self.rejected_total,
            "reasons": self.reasons,
            "closest_misses": [rejection.to_dict() for rejection in self.closest_misses],
            "rejections": (None if self.rejections is None
                           else [rejection.to_dict() for rejection in self.rejections]),
            "engine": self.engine,
            "idle_hints": list(self.idle_hints),
        }
        if self.packing is not None:
            data["packing"] = dict(self.packing)
        return data


def active_filters(spec: RequestSpec) -> list[Any]:
    """The request's enabled filters, without those that have nothing to do for it."""
    filters = [FILTERS[name]() for name in spec.enabled_filters]
    return [host_filter for host_filter in filters if not host_filter.is_noop(spec)]


def needed_host_fields(spec: RequestSpec) -> set[str]:
    """The HostState fields this request's filters and weighers read beyond the ones every
    host-state source gives (what the ledger must read besides its one table scan)."""
    fields: set[str] = set()
    for host_filter in active_filters(spec):
        fields.update(host_filter.host_fields)
    for name in spec.weighers:
        fields.update(WEIGHERS[name]().host_fields_for(spec))
    return fields


def schedule(hosts: Sequence[HostState] | HostTable, spec: RequestSpec) -> Decision:
    """Place spec.count instances on hosts, as Nova's FilterScheduler._schedule does.

    ``hosts`` is a list of HostStates or a HostTable (a fleet read as columns). Works on
    copies: the caller's host states and server group are left as they were, so the same
    snapshot can be scheduled again (check mode, then the real run).
    """
    hosts = HostTable.of(hosts)
    # The request's server group gains a member per placement; that is this run's business.
    if spec.server_group is not None:
        spec = dataclasses.replace(spec, server_group=spec.server_group.copy())
    weighers = [WEIGHERS[name]() for name in spec.weighers]
    backend = _backend(hosts, spec, active_filters(spec), weighers)
    rng = random.Random(spec.seed)
    backend.full_explain = spec.explain == "full" or (spec.explain == "auto"
                                                      and len(hosts) <= AUTO_FULL_EXPLAIN_HOSTS)
    backend.start(_select_candidates(hosts, spec, backend))
    # As in Nova, forcing a host or node skips the filters (the claim still checks capacity).
    run_filters = not (spec.force_hosts or spec.force_nodes)
    # The alternates and runners-up come from the best few; nothing below them is sorted.
    wanted = spec.host_subset_size + max(spec.max_attempts - 1, RUNNERS_UP_SHOWN)
    placements: list[Placement] = []
    idle_hints = [str(item) for item in spec.idle_hints()]

    def decision(failed_index: int | None) -> Decision:
        rejected, counts, misses, rejections = backend.explanation()
        if failed_index is None:
            summary = success_summary([placement.host for placement in placements])
        else:
            summary = failure_summary(counts, len(hosts), failed_index, spec.count, spec)
        if idle_hints:
            # Said where the decision is read, not only in a field: "none removed" beside a
            # different_host hint would read as "no host runs those instances".
            summary += "; hints not held: " + "; ".join(idle_hints)
        return Decision(
            ok=failed_index is None, placements=placements if failed_index is None else [],
            summary=summary, failed_index=failed_index, hosts_total=len(hosts), rejected_total=rejected,
            reasons=[item.to_dict(spec) for item in counts], closest_misses=misses,
            rejections=rejections, engine=backend.name, idle_hints=idle_hints,
        )

    for index in range(spec.count):
        backend.filter_pass(index, run_filters)
        if not backend.candidate_count():
            return decision(index)

        if spec.driver == "chance":
            ranked = _chance_order(backend.candidate_count(), wanted, rng)
            chosen = ranked[0]
        else:
            ranked = backend.rank(wanted)
            best = ranked[:spec.host_subset_size]
            chosen = best[0] if len(best) == 1 else rng.choice(best)
        others = [candidate for candidate in ranked if candidate is not chosen]
        chosen_state = backend.state(chosen.slot)
        placements.append(Placement(
            index=index,
            host=chosen_state.host,
            nodename=chosen_state.nodename,
            uuid=chosen_state.uuid,
            weight=chosen.weight,
            weights=backend.details(chosen.slot) if spec.driver != "chance" else [],
            limits=dict(chosen_state.limits),
            alternates=[backend.state(other.slot).host for other in others[:spec.max_attempts - 1]],
            runners_up=[{"host": backend.state(other.slot).host, "weight": other.weight,
                         "weights": ([detail.to_dict() for detail in backend.details(other.slot)]
                                     if spec.driver != "chance" else [])}
                        for other in others[:RUNNERS_UP_SHOWN]],
        ))
        # The next instance must see this one's resources gone, and its group member placed.
        placements[-1].assignment = backend.consume(chosen.slot)
        if spec.server_group is not None:
            spec.server_group.add(chosen_state.host)
        # Nova filters the next instance from this one's survivors, not from all hosts: the
        # backend keeps them as its candidates.

    return decision(None)


def _chance_order(candidates: int, wanted: int, rng: random.Random) -> list[Ranked]:
    """Nova's ChanceScheduler: a random host among those that passed; random alternates."""
    picked = rng.sample(range(candidates), min(wanted, candidates))
    return [Ranked(slot, 0.0) for slot in picked]


def _backend(hosts: Sequence[HostState], spec: RequestSpec,
             filters: Sequence[BaseHostFilter], weighers: Sequence[BaseWeigher]) -> Any:
    use_vectorized = spec.engine == "vectorized" or (
        spec.engine == "auto" and len(hosts) >= AUTO_VECTORIZED_HOSTS)
    if use_vectorized:
        try:
            from ansible_collections.berth.fleet.plugins.module_utils.scheduler import vector
            if vector.np is None:
                raise ImportError("numpy")
        except ImportError:
            # NumPy is a controller dependency; without it the plain path decides the same.
            if spec.engine == "vectorized":
                raise SchedulerInputError(
                    "engine", "engine 'vectorized' needs the Python package numpy, which the controller's "
                              "Python cannot import: pip install 'numpy', or choose engine 'auto' or 'plain'") from None
        else:
            return vector.VectorBackend(hosts, spec, filters, weighers)
    return PlainBackend(hosts, spec, filters, weighers)


def _select_candidates(hosts: HostTable, spec: RequestSpec, backend: Any) -> list[int]:
    """Apply ignore_hosts, then force_hosts and force_nodes, recording whom they drop.

    Host names match case-insensitively and node names exactly, as in Nova.
    """
    ignored = {name.lower() for name in spec.ignore_hosts}
    forced_hosts = {name.lower() for name in spec.force_hosts}
    forced_nodes = set(spec.force_nodes)
    if not (ignored or forced_hosts or forced_nodes):
        return list(range(len(hosts)))
    candidates = []
    for position, (host, nodename) in enumerate(zip(hosts.column("host"), hosts.column("nodename"))):
        # A table's nodename may be empty where a HostState would say its host name.
        nodename = nodename or host
        if host.lower() in ignored:
            backend.reject(position, Rejection(host, "ignore_hosts", REASON_IGNORED))
        elif forced_hosts and host.lower() not in forced_hosts:
            backend.reject(position, Rejection(host, "force_hosts", REASON_NOT_FORCED))
        elif forced_nodes and nodename not in forced_nodes:
            backend.reject(position, Rejection(host, "force_nodes", REASON_NOT_FORCED))
        else:
            candidates.append(position)
    return candidates
