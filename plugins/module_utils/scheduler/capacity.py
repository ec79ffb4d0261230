"""How many more instances of a flavor fit, per host and in total, under the enabled filters.

Each host is counted on its own, as if it took every instance: the count is the largest n
such that the filters still admit the host after n − 1 instances were consumed from it
(what `schedule` would do placing n instances there). Filters whose answer consumption cannot
change (zone, capabilities, host up...) either admit the host or make its count 0. With an
affinity group all instances must share one host, so the total is the best host's count;
otherwise it is the sum.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import (
    RequestSpec,
    active_filters,
    first_rejection,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import Rejection


@dataclass
class HostCapacity:
    host: str
    fits: int | None  # None: no enabled filter limits this host's count
    limited_by: str | None  # the filter that stops the next instance
    rejection: Rejection | None  # why not one more, with the numbers

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "fits": self.fits, "limited_by": self.limited_by,
                "reason": self.rejection.message() if self.rejection else None,
                "rejection": self.rejection.to_dict() if self.rejection else None}


def capacity(hosts: Sequence[HostState], spec: RequestSpec) -> dict[str, Any]:
    """{"total": n or None (unlimited), "hosts": [HostCapacity.to_dict()...]}."""
    filters = active_filters(spec)
    ignored = {name.lower() for name in spec.ignore_hosts}
    results = []
    for host_state in hosts:
        if host_state.host.lower() in ignored:
            results.append(HostCapacity(host_state.host, 0, "ignore_hosts", None))
            continue
        results.append(_host_capacity(host_state, filters, spec))
    counts = [result.fits for result in results]
    if any(count is None for count in counts):
        total = None
    elif spec.server_group is not None and spec.server_group.policy == "affinity":
        total = max(counts, default=0)  # type: ignore[type-var]
    else:
        total = sum(counts)  # type: ignore[arg-type]
    return {"total": total, "hosts": [result.to_dict() for result in results]}


def _host_capacity(host_state: HostState, filters: Sequence[Any],
                   spec: RequestSpec) -> HostCapacity:
    rejection = first_rejection(filters, host_state.copy(), spec, 0)
    if rejection is not None:
        return HostCapacity(host_state.host, 0, rejection.filter, rejection)
    best: int | None = None
    limiting = None
    for host_filter in filters:
        passes_after = host_filter.fits(host_state, spec)
        if passes_after is None:
            continue
        count = _largest_count(passes_after)
        if best is None or count < best:
            best, limiting = count, host_filter
    if best is None or limiting is None:
        return HostCapacity(host_state.host, None, None, None)
    # Why the next one does not fit: the limiting filter on the host after `best` instances.
    after = host_state.copy()
    for _attempt in range(min(best, 100000)):
        after.consume(spec.flavor)
    return HostCapacity(host_state.host, best, limiting.name, limiting.host_passes(after, spec))


def _largest_count(passes_after: Callable[[int], bool]) -> int:
    """How many instances fit: the first n for which passes_after(n) is False.

    passes_after only ever turns from True to False as n grows; an exponential then binary
    search finds the edge with the filter's own arithmetic, so no rounding of a division can
    make the count disagree with the filter.
    """
    if not passes_after(0):
        return 0
    low, high = 0, 1  # passes_after(low) holds
    while passes_after(high):
        low, high = high, high * 2
        if high > 2 ** 40:
            return high  # practically unbounded (a zero-size flavor)
    while high - low > 1:
        middle = (low + high) // 2
        if passes_after(middle):
            low = middle
        else:
            high = middle
    return high


__all__ = ["capacity", "HostCapacity"]
