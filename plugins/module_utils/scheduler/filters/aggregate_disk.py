from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    VectorColumn,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.disk import DiskFilter

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


class AggregateDiskFilter(DiskFilter):
    """DiskFilter with disk_allocation_ratio from the host's aggregates' metadata, the minimum where they
    disagree, else the host's own (Nova's AggregateDiskFilter)."""

    name = "AggregateDiskFilter"
    vector_columns = {
        "disk_ratio": VectorColumn(field="disk_allocation_ratio",
                                   aggregate_key="disk_allocation_ratio"),
    }

    @staticmethod
    def allocation_ratio(host_state: HostState) -> float:
        return host_state.aggregate_number("disk_allocation_ratio", host_state.disk_allocation_ratio)
