from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    VectorColumn,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.core import CoreFilter

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


class AggregateCoreFilter(CoreFilter):
    """CoreFilter with cpu_allocation_ratio from the host's aggregates' metadata, the minimum where they
    disagree, else the host's own (Nova's AggregateCoreFilter)."""

    name = "AggregateCoreFilter"
    vector_columns = {
        "cpu_ratio": VectorColumn(field="cpu_allocation_ratio",
                                  aggregate_key="cpu_allocation_ratio"),
    }

    @staticmethod
    def allocation_ratio(host_state: HostState) -> float:
        return host_state.aggregate_number("cpu_allocation_ratio", host_state.cpu_allocation_ratio)
