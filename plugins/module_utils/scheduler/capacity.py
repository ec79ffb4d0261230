"""How many more instances of a flavor fit, per host and in total, under the enabled filters.

Each host is counted on its own, as if it took every instance: the count is the largest n
such that the filters still admit the host after n − 1 instances were consumed from it
(what `schedule` would do placing n instances there). The question "does the host still pass
after n instances?" is asked of the filters themselves (host_passes on a copy of the host with
n instances consumed, and the request's server group with n members there), so a count can
never disagree with a decision: there is no second copy of any rule here. With an affinity
group all instances must share one host, so the total is the best host's count; otherwise it
is the sum.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.backend import first_rejection
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import active_filters
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import Rejection

# A host that still passes after this many instances is not limited by any filter (a flavor
# of zero size, or only filters that consumption cannot change).
UNLIMITED = 2 ** 40


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
    def rejection_after(count: int) -> Rejection | None:
        """The first filter's rejection of the next instance once `count` are on the host."""
        after = host_state.copy()
        after.consume(spec.flavor, count)
        after_spec = spec
        if spec.server_group is not None and count:
            after_spec = dataclasses.replace(spec, server_group=spec.server_group.copy())
            after_spec.server_group.add(host_state.host, count)  # type: ignore[union-attr]
        # Filters Nova runs once per request judged the first instance; the others again.
        return first_rejection(filters, after, after_spec, 0 if count == 0 else 1)

    rejection = rejection_after(0)
    if rejection is not None:
        return HostCapacity(host_state.host, 0, rejection.filter, rejection)
    if rejection_after(UNLIMITED) is None:
        return HostCapacity(host_state.host, None, None, None)
    fits = _largest_count(lambda count: rejection_after(count) is None)
    rejection = rejection_after(fits)
    return HostCapacity(host_state.host, fits, rejection.filter if rejection else None, rejection)


def _largest_count(passes_after: Any) -> int:
    """How many instances fit: the first n for which passes_after(n) is False (passes_after(0)
    holds and passes_after(UNLIMITED) does not).

    Every filter's answer only ever turns from pass to reject as instances are consumed, so an
    exponential then binary search finds the edge with the filters' own arithmetic.
    """
    low, high = 0, 1  # passes_after(low) holds
    while passes_after(high):
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if passes_after(middle):
            low = middle
        else:
            high = middle
    return high


__all__ = ["capacity", "HostCapacity"]
