from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    VectorColumn,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.num_instances import (
    NumInstancesFilter,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


class AggregateNumInstancesFilter(NumInstancesFilter):
    """NumInstancesFilter with max_instances_per_host from aggregate metadata (minimum wins)."""

    name = "AggregateNumInstancesFilter"
    vector_columns = {
        "max_instances": VectorColumn(option="max_instances_per_host",
                                      aggregate_key="max_instances_per_host"),
    }

    @staticmethod
    def maximum(host_state: HostState, spec: RequestSpec) -> float:
        return host_state.aggregate_number("max_instances_per_host", spec.max_instances_per_host)
