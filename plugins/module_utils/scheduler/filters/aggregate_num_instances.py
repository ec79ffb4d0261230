from __future__ import annotations

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    AGGREGATE_NUM_INSTANCES_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import HostNumber
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.num_instances import (
    NumInstancesFilter,
)


class AggregateNumInstancesFilter(NumInstancesFilter):
    """NumInstancesFilter with max_instances_per_host from aggregate metadata, the minimum
    where they disagree; a value that is not an integer ("2.5") leaves the option's value, as Nova's cast
    to int fails."""

    name = AGGREGATE_NUM_INSTANCES_FILTER
    host_numbers = {
        "maximum": HostNumber(option="max_instances_per_host",
                              aggregate_key="max_instances_per_host", integer=True),
    }
