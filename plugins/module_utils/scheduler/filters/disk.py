from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import DISK_FILTER
from ansible_collections.berth.fleet.plugins.module_utils.scheduler import rules
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import HostNumber
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.resource import (
    ResourceFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_INSUFFICIENT_DISK,
    RESOURCE_DISK,
    UNIT_MB,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class DiskFilter(ResourceFilter):
    """Nova's Newton DiskFilter: disk may be overcommitted by disk_allocation_ratio."""

    name = DISK_FILTER
    resource = RESOURCE_DISK
    unit = UNIT_MB
    short_reason = REASON_INSUFFICIENT_DISK
    limit_name = "disk_gb"
    host_numbers = {"allocation_ratio": HostNumber(field="disk_allocation_ratio")}

    def fit(self, values: Any, allocation_ratio: Any, spec: RequestSpec) -> rules.Fit:
        # Root, ephemeral and swap are asked for, although consuming takes no swap off; and the
        # data volumes the build makes with it there.
        return rules.disk_fit(values.total_usable_disk_gb, values.free_disk_mb, allocation_ratio,
                              spec.flavor.requested_disk_mb + spec.volume_disk_mb)

    def record_limit(self, host_state: HostState, fit: rules.Fit) -> None:
        # Nova hands the claim its disk limit in GB.
        host_state.limits[self.limit_name] = fit.limit / 1024
