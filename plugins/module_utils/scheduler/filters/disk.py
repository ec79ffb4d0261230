from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    VectorColumn,
    VectorReject,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_INSUFFICIENT_DISK,
    REASON_LARGER_THAN_HOST,
    RESOURCE_DISK,
    UNIT_MB,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


class DiskFilter(BaseHostFilter):
    """Nova's Newton DiskFilter: disk may be overcommitted by disk_allocation_ratio."""

    name = "DiskFilter"
    vector_columns = {"disk_ratio": VectorColumn(field="disk_allocation_ratio")}

    @staticmethod
    def allocation_ratio(host_state: HostState) -> float:
        return host_state.disk_allocation_ratio

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        requested_disk_mb = spec.flavor.requested_disk_mb
        total_usable_disk_mb = host_state.total_usable_disk_gb * 1024
        numbers = {"requested": requested_disk_mb, "unit": UNIT_MB, "resource": RESOURCE_DISK}

        # An instance may overcommit against other instances, never against itself.
        if total_usable_disk_mb < requested_disk_mb:
            return self.reject(host_state, REASON_LARGER_THAN_HOST,
                               limit=total_usable_disk_mb, **numbers)

        disk_mb_limit = total_usable_disk_mb * self.allocation_ratio(host_state)
        used_disk_mb = total_usable_disk_mb - host_state.free_disk_mb
        usable_disk_mb = disk_mb_limit - used_disk_mb
        if usable_disk_mb < requested_disk_mb:
            return self.reject(host_state, REASON_INSUFFICIENT_DISK, used=used_disk_mb,
                               limit=disk_mb_limit, free=usable_disk_mb, **numbers)

        # Nova hands the claim its disk limit in GB.
        host_state.limits["disk_gb"] = disk_mb_limit / 1024
        return None

    def fits(self, host_state: HostState, spec: RequestSpec) -> Callable[[int], bool] | None:
        """Whether the host still passes after `count` more instances (for capacity).
        Consuming takes root and ephemeral disk off, not swap, while the filter asks for all."""
        requested = spec.flavor.requested_disk_mb
        consumed = 1024 * (spec.flavor.root_gb + spec.flavor.ephemeral_gb)
        total = host_state.total_usable_disk_gb * 1024
        limit = total * self.allocation_ratio(host_state)
        return lambda count: total >= requested and (
            limit - (total - (host_state.free_disk_mb - count * consumed)) >= requested)

    def vector_rejects(self, columns: Any, spec: RequestSpec) -> list[VectorReject]:
        requested = spec.flavor.requested_disk_mb
        total = columns.total_usable_disk_gb * 1024
        usable = total * columns.disk_ratio - (total - columns.free_disk_mb)
        return [(REASON_LARGER_THAN_HOST, RESOURCE_DISK, requested, total < requested, None),
                (REASON_INSUFFICIENT_DISK, RESOURCE_DISK, requested, usable < requested, usable)]
