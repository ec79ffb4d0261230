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

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import of_spec, take
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.backend import first_rejection
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import active_filters
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.resource import ResourceFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    RESOURCE_DISK,
    RESOURCE_RAM,
    RESOURCE_VCPUS,
    Rejection,
)

# A host that still passes after this many instances is not limited by any filter (a flavor
# of zero size, or only filters that consumption cannot change).
UNLIMITED = 2 ** 40
# Each resource filter's resource as the answer names its used and limit (the ledger's names).
USAGE_KEYS = {RESOURCE_VCPUS: "vcpus", RESOURCE_RAM: "memory_mb", RESOURCE_DISK: "disk_mb"}


@dataclass
class HostCapacity:
    host: str
    fits: int | None  # None: no enabled filter limits this host's count
    limited_by: str | None  # the filter that stops the next instance
    rejection: Rejection | None  # why not one more, with the numbers
    usage: dict[str, Any] = dataclasses.field(default_factory=dict)  # <resource>_used, _limit now

    def to_dict(self) -> dict[str, Any]:
        reason = self.rejection.message() if self.rejection else None
        if reason and self.fits:
            # The rejection is of the host with those instances on it: said so, "fits 7" beside
            # "insufficient vCPUs, free 0" reads as a contradiction.
            reason = f"once {self.fits} more are placed: {reason}"
        return {"host": self.host, "fits": self.fits, "limited_by": self.limited_by, "reason": reason,
                "rejection": self.rejection.to_dict() if self.rejection else None, **self.usage}


def capacity(hosts: Sequence[HostState], spec: RequestSpec) -> dict[str, Any]:
    """{"total": n or None (unlimited), "hosts": [HostCapacity.to_dict()...]}."""
    results = host_capacities(hosts, spec)
    counts = [result.fits for result in results]
    if any(count is None for count in counts):
        total = None
    elif spec.server_group is not None and spec.server_group.policy == "affinity":
        total = max(counts, default=0)  # type: ignore[type-var]
    else:
        total = sum(counts)  # type: ignore[arg-type]
    return {"total": total, "hosts": [result.to_dict() for result in results]}


def host_capacities(hosts: Sequence[HostState], spec: RequestSpec) -> list[HostCapacity]:
    """Each host's count of instances of the request that fit it, with its usage, in host order
    (batch packing reads them as the solver's per-host bounds)."""
    filters = active_filters(spec)
    ignored = {name.lower() for name in spec.ignore_hosts}
    results = []
    for host_state in hosts:
        if host_state.host.lower() in ignored:
            result = HostCapacity(host_state.host, 0, "ignore_hosts", None)
        else:
            result = _host_capacity(host_state, filters, spec)
        result.usage = usage(host_state, filters, spec)
        results.append(result)
    return results


def usage(host_state: HostState, filters: Sequence[Any], spec: RequestSpec) -> dict[str, Any]:
    """The host's used and limit of each resource an enabled resource filter checks, as that
    filter computes them (its allocation ratio, an aggregate's where it takes one), before any
    instance of the request: ``vcpus_used``, ``vcpus_limit``, ``memory_mb_used``..."""
    found: dict[str, Any] = {}
    for host_filter in filters:
        key = USAGE_KEYS.get(getattr(host_filter, "resource", None))
        if not isinstance(host_filter, ResourceFilter) or key is None or f"{key}_used" in found:
            continue
        fit = host_filter.fit(host_state, host_filter.number("allocation_ratio", host_state, spec), spec)
        found[f"{key}_used"], found[f"{key}_limit"] = fit.used, fit.limit
    return found


def _host_capacity(host_state: HostState, filters: Sequence[Any],
                   spec: RequestSpec) -> HostCapacity:
    exact = of_spec(spec)

    def rejection_after(count: int) -> Rejection | None:
        """The first filter's rejection of the next instance once `count` are on the host."""
        after = host_state.copy()
        after.consume(spec.flavor, count, spec.volume_disk_mb)
        # Pinned CPUs, pages and devices are taken one instance at a time, as the scheduler
        # takes them: where one does not fit, the next cannot either, and its filter says why.
        for _number in range(count if exact is not None else 0):
            if take(after, exact)[0] is None:
                break
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


__all__ = ["capacity", "host_capacities", "usage", "HostCapacity"]
