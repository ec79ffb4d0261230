from __future__ import annotations

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    AGGREGATE_CORE_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import HostNumber
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.core import CoreFilter


class AggregateCoreFilter(CoreFilter):
    """CoreFilter with cpu_allocation_ratio from the host's aggregates' metadata, the minimum
    where they disagree, else the host's own (Nova's AggregateCoreFilter)."""

    name = AGGREGATE_CORE_FILTER
    host_numbers = {
        "allocation_ratio": HostNumber(field="cpu_allocation_ratio",
                                       aggregate_key="cpu_allocation_ratio"),
    }
