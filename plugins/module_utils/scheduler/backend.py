"""The two ways the driver runs a request's filters and weighers over the candidates: what it
asks of either (Backend) and the reference one, PlainBackend, which calls every filter and
weigher per host as Nova does. vector.py holds the other, VectorBackend (NumPy).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import of_spec, take
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.explain import (
    ReasonCount,
    closest_misses,
    count_reasons,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    Rejection,
    WeightDetail,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import (
    BaseWeigher,
    WeighedHost,
    weigh_hosts,
)


@dataclass
class Ranked:
    """A candidate in weighed order: `slot` is the backend's handle for it."""

    slot: int
    weight: float


class Backend:
    """What the driver asks of an implementation; PlainBackend and vector.VectorBackend."""

    name = ""

    def __init__(self, hosts: Sequence[HostState], spec: RequestSpec,
                 filters: Sequence[BaseHostFilter], weighers: Sequence[BaseWeigher]) -> None:
        self.hosts = hosts
        self.spec = spec
        self.filters = filters
        self.weighers = weighers
        # The CPUs, cells, pages and devices each instance takes, or None (most requests).
        self.exact = of_spec(spec)
        # Whether to keep every rejected host's Rejection (explain "full"); set by schedule().
        self.full_explain = False


class PlainBackend(Backend):
    """The reference implementation: every filter and weigher called per host, as Nova does."""

    name = "plain"

    def __init__(self, hosts: Sequence[HostState], spec: RequestSpec,
                 filters: Sequence[BaseHostFilter], weighers: Sequence[BaseWeigher]) -> None:
        super().__init__(hosts, spec, filters, weighers)
        self.candidates: list[tuple[int, HostState]] = []
        self.rejections: dict[int, Rejection] = {}
        self._weighed: list[WeighedHost] = []

    def start(self, positions: Sequence[int]) -> None:
        self.candidates = [(position, self.hosts[position].copy()) for position in positions]

    def reject(self, position: int, rejection: Rejection) -> None:
        self.rejections[position] = rejection

    def filter_pass(self, index: int, run_filters: bool) -> None:
        survivors = []
        for position, host_state in self.candidates:
            rejection = (first_rejection(self.filters, host_state, self.spec, index)
                         if run_filters else None)
            if rejection is None:
                survivors.append((position, host_state))
            else:
                self.rejections[position] = rejection
        self.candidates = survivors

    def candidate_count(self) -> int:
        return len(self.candidates)

    def rank(self, wanted: int | None) -> list[Ranked]:
        self._weighed = weigh_hosts([state for _position, state in self.candidates], self.weighers,
                                    self.spec)
        return [Ranked(item.position, item.weight) for item in self._weighed[:wanted]]

    def details(self, slot: int) -> list[WeightDetail]:
        for item in self._weighed:
            if item.position == slot:
                return item.weights
        return []

    def state(self, slot: int) -> HostState:
        return self.candidates[slot][1]

    def position(self, slot: int) -> int:
        return self.candidates[slot][0]

    def consume(self, slot: int) -> dict | None:
        host_state = self.candidates[slot][1]
        host_state.consume(self.spec.flavor, volume_disk_mb=self.spec.volume_disk_mb)
        assignment, _reason = take(host_state, self.exact)
        return assignment

    def explanation(self) -> tuple[int, list[ReasonCount], list[Rejection], list[Rejection] | None]:
        pairs = sorted(self.rejections.items())
        misses = [rejection for _position, rejection in closest_misses(pairs)]
        return (len(pairs), count_reasons(pairs), misses,
                [rejection for _position, rejection in pairs] if self.full_explain else None)


def first_rejection(
    filters: Sequence[BaseHostFilter], host_state: HostState, spec: RequestSpec, index: int
) -> Rejection | None:
    """The first filter that turns the host down for instance `index`, or None."""
    for host_filter in filters:
        if not host_filter.run_filter_for_index(index):
            continue
        rejection = host_filter.host_passes(host_state, spec)
        if rejection is not None:
            return rejection
    return None
