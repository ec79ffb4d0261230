from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    VectorColumn,
    VectorReject,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_INSUFFICIENT_RAM,
    REASON_LARGER_THAN_HOST,
    RESOURCE_RAM,
    UNIT_MB,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


class RamFilter(BaseHostFilter):
    """Nova's Newton RamFilter: RAM may be overcommitted by ram_allocation_ratio."""

    name = "RamFilter"
    vector_columns = {"ram_ratio": VectorColumn(field="ram_allocation_ratio")}

    @staticmethod
    def allocation_ratio(host_state: HostState) -> float:
        return host_state.ram_allocation_ratio

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        requested_ram_mb = spec.flavor.memory_mb
        total_usable_ram_mb = host_state.total_usable_ram_mb
        numbers = {"requested": requested_ram_mb, "unit": UNIT_MB, "resource": RESOURCE_RAM}

        # An instance may overcommit against other instances, never against itself.
        if total_usable_ram_mb < requested_ram_mb:
            return self.reject(host_state, REASON_LARGER_THAN_HOST,
                               limit=total_usable_ram_mb, **numbers)

        memory_mb_limit = total_usable_ram_mb * self.allocation_ratio(host_state)
        # free_ram_mb already has reserved memory taken off, so reserved counts as used here.
        used_ram_mb = total_usable_ram_mb - host_state.free_ram_mb
        usable_ram_mb = memory_mb_limit - used_ram_mb
        if usable_ram_mb < requested_ram_mb:
            return self.reject(host_state, REASON_INSUFFICIENT_RAM, used=used_ram_mb,
                               limit=memory_mb_limit, free=usable_ram_mb, **numbers)

        host_state.limits["memory_mb"] = memory_mb_limit
        return None

    def fits(self, host_state: HostState, spec: RequestSpec) -> Callable[[int], bool] | None:
        """Whether the host still passes after `count` more instances (for capacity)."""
        requested = spec.flavor.memory_mb
        total = host_state.total_usable_ram_mb
        limit = total * self.allocation_ratio(host_state)
        return lambda count: total >= requested and (
            limit - (total - (host_state.free_ram_mb - count * requested)) >= requested)

    def vector_rejects(self, columns: Any, spec: RequestSpec) -> list[VectorReject]:
        requested = spec.flavor.memory_mb
        total = columns.total_usable_ram_mb
        usable = total * columns.ram_ratio - (total - columns.free_ram_mb)
        return [(REASON_LARGER_THAN_HOST, RESOURCE_RAM, requested, total < requested, None),
                (REASON_INSUFFICIENT_RAM, RESOURCE_RAM, requested, usable < requested, usable)]
