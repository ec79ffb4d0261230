from __future__ import annotations

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    AGGREGATE_IO_OPS_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import HostNumber
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.io_ops import (
    IoOpsFilter,
)


class AggregateIoOpsFilter(IoOpsFilter):
    """IoOpsFilter with max_io_ops_per_host from aggregate metadata, the minimum
    where they disagree; a value that is not an integer ("2.5") leaves the option's value, as Nova's cast
    to int fails."""

    name = AGGREGATE_IO_OPS_FILTER
    host_numbers = {
        "maximum": HostNumber(option="max_io_ops_per_host",
                              aggregate_key="max_io_ops_per_host", integer=True),
    }
