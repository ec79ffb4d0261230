from __future__ import annotations

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    AGGREGATE_RAM_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import HostNumber
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.ram import RamFilter


class AggregateRamFilter(RamFilter):
    """RamFilter with ram_allocation_ratio from the host's aggregates' metadata, the minimum
    where they disagree, else the host's own (Nova's AggregateRamFilter)."""

    name = AGGREGATE_RAM_FILTER
    host_numbers = {
        "allocation_ratio": HostNumber(field="ram_allocation_ratio",
                                       aggregate_key="ram_allocation_ratio"),
    }
