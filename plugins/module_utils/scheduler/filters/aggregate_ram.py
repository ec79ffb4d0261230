from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    VectorColumn,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.ram import RamFilter

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


class AggregateRamFilter(RamFilter):
    """RamFilter with ram_allocation_ratio from the host's aggregates' metadata, the minimum where they
    disagree, else the host's own (Nova's AggregateRamFilter)."""

    name = "AggregateRamFilter"
    vector_columns = {
        "ram_ratio": VectorColumn(field="ram_allocation_ratio",
                                  aggregate_key="ram_allocation_ratio"),
    }

    @staticmethod
    def allocation_ratio(host_state: HostState) -> float:
        return host_state.aggregate_number("ram_allocation_ratio", host_state.ram_allocation_ratio)
