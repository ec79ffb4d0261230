from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import RAM_FILTER
from ansible_collections.berth.fleet.plugins.module_utils.scheduler import rules
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import HostNumber
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.resource import (
    ResourceFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_INSUFFICIENT_RAM,
    RESOURCE_RAM,
    UNIT_MB,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class RamFilter(ResourceFilter):
    """Nova's Newton RamFilter: RAM may be overcommitted by ram_allocation_ratio."""

    name = RAM_FILTER
    resource = RESOURCE_RAM
    unit = UNIT_MB
    short_reason = REASON_INSUFFICIENT_RAM
    limit_name = "memory_mb"
    host_numbers = {"allocation_ratio": HostNumber(field="ram_allocation_ratio")}

    def fit(self, values: Any, allocation_ratio: Any, spec: RequestSpec) -> rules.Fit:
        # free_ram_mb already has reserved memory taken off, so reserved counts as used here.
        return rules.ram_fit(values.total_usable_ram_mb, values.free_ram_mb, allocation_ratio,
                             spec.flavor.memory_mb)
