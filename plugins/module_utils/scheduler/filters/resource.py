"""What the resource filters (RAM, vCPUs, disk and their aggregate variants) share: one
verdict from a rules.Fit, for one host or every candidate at once."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    VectorReject,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_LARGER_THAN_HOST,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.rules import Fit


class ResourceFilter(BaseHostFilter):
    """A filter whose whole rule is one rules.*_fit function.

    A subclass names its resource and says which fit applies (``fit``, on a HostState or on
    the vectorised path's columns: both have the same attribute names), with its allocation ratio
    declared in ``host_numbers["allocation_ratio"]``; host_passes and vector_rejects below turn
    the same Fit into a Rejection or into masks.
    """

    resource = ""
    unit = ""
    short_reason = ""  # the "not now" reason: the request does not fit what is left
    limit_name = ""  # the key of host_state.limits the claim reads, as in Nova's limits dict

    def fit(self, values: Any, allocation_ratio: Any, spec: RequestSpec) -> Fit:
        raise NotImplementedError

    def record_limit(self, host_state: HostState, fit: Fit) -> None:
        host_state.limits[self.limit_name] = fit.limit

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        fit = self.fit(host_state, self.number("allocation_ratio", host_state, spec), spec)
        if not fit.applies:
            return None
        numbers = {"requested": fit.requested, "unit": self.unit, "resource": self.resource}
        # An instance may overcommit against other instances, never against itself.
        if fit.larger_than_host:
            return self.reject(host_state, REASON_LARGER_THAN_HOST, limit=fit.total, **numbers)
        if fit.short:
            return self.reject(host_state, self.short_reason, used=fit.used, limit=fit.limit,
                               free=fit.free, **numbers)
        self.record_limit(host_state, fit)
        return None

    def vector_rejects(self, columns: Any, spec: RequestSpec) -> list[VectorReject]:
        fit = self.fit(columns, columns.allocation_ratio, spec)
        return [(REASON_LARGER_THAN_HOST, self.resource, fit.requested, fit.larger_than_host, None),
                (self.short_reason, self.resource, fit.requested, fit.short, fit.free)]
