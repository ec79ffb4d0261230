from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    VectorColumn,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.io_ops import (
    IoOpsFilter,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


class AggregateIoOpsFilter(IoOpsFilter):
    """IoOpsFilter with max_io_ops_per_host from aggregate metadata (minimum wins)."""

    name = "AggregateIoOpsFilter"
    vector_columns = {
        "max_io_ops": VectorColumn(option="max_io_ops_per_host",
                                   aggregate_key="max_io_ops_per_host"),
    }

    @staticmethod
    def maximum(host_state: HostState, spec: RequestSpec) -> float:
        return host_state.aggregate_number("max_io_ops_per_host", spec.max_io_ops_per_host)
