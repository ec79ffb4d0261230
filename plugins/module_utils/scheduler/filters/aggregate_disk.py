from __future__ import annotations

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    AGGREGATE_DISK_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import HostNumber
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.disk import DiskFilter


class AggregateDiskFilter(DiskFilter):
    """DiskFilter with disk_allocation_ratio from the host's aggregates' metadata, the minimum
    where they disagree, else the host's own (Nova's AggregateDiskFilter)."""

    name = AGGREGATE_DISK_FILTER
    host_numbers = {
        "allocation_ratio": HostNumber(field="disk_allocation_ratio",
                                       aggregate_key="disk_allocation_ratio"),
    }
