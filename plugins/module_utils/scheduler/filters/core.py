from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    VectorColumn,
    VectorReject,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_INSUFFICIENT_VCPUS,
    REASON_LARGER_THAN_HOST,
    RESOURCE_VCPUS,
    UNIT_VCPUS,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


class CoreFilter(BaseHostFilter):
    """Nova's Newton CoreFilter: vCPUs may be overcommitted by cpu_allocation_ratio."""

    name = "CoreFilter"
    vector_columns = {"cpu_ratio": VectorColumn(field="cpu_allocation_ratio")}

    @staticmethod
    def allocation_ratio(host_state: HostState) -> float:
        return host_state.cpu_allocation_ratio

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        # Nova fails open here: a host that reports no CPUs has broken CPU collection, and
        # refusing it would empty the fleet on a fact-gathering bug.
        if not host_state.vcpus_total:
            return None

        requested_vcpus = spec.flavor.vcpus
        numbers = {"requested": requested_vcpus, "unit": UNIT_VCPUS, "resource": RESOURCE_VCPUS}

        # An instance may overcommit against other instances, never against itself.
        if requested_vcpus > host_state.vcpus_total:
            return self.reject(host_state, REASON_LARGER_THAN_HOST,
                               limit=host_state.vcpus_total, **numbers)

        vcpus_limit = host_state.vcpus_total * self.allocation_ratio(host_state)
        free_vcpus = vcpus_limit - host_state.vcpus_used
        if free_vcpus < requested_vcpus:
            return self.reject(host_state, REASON_INSUFFICIENT_VCPUS, used=host_state.vcpus_used,
                               limit=vcpus_limit, free=free_vcpus, **numbers)

        host_state.limits["vcpu"] = vcpus_limit
        return None

    def fits(self, host_state: HostState, spec: RequestSpec) -> Callable[[int], bool] | None:
        """Whether the host still passes after `count` more instances (for capacity)."""
        if not host_state.vcpus_total:
            return None
        requested = spec.flavor.vcpus
        limit = host_state.vcpus_total * self.allocation_ratio(host_state)
        return lambda count: requested <= host_state.vcpus_total and (
            limit - (host_state.vcpus_used + count * requested) >= requested)

    def vector_rejects(self, columns: Any, spec: RequestSpec) -> list[VectorReject]:
        requested = spec.flavor.vcpus
        total = columns.vcpus_total
        known = total != 0
        free = total * columns.cpu_ratio - columns.vcpus_used
        return [
            (REASON_LARGER_THAN_HOST, RESOURCE_VCPUS, requested, known & (requested > total), None),
            (REASON_INSUFFICIENT_VCPUS, RESOURCE_VCPUS, requested, known & (free < requested),
             free),
        ]
