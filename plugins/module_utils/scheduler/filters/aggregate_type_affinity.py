from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    AGGREGATE_TYPE_AFFINITY_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_AGGREGATE_TYPE,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class AggregateTypeAffinityFilter(BaseHostFilter):
    """A host whose aggregates set instance_type ("m1.small,m1.large") takes only flavors that
    one of them lists, as Nova's; a host in no such aggregate takes any flavor."""

    name = AGGREGATE_TYPE_AFFINITY_FILTER
    run_filter_once_per_request = True

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        values = host_state.aggregate_values("instance_type")
        for value in values:
            if spec.flavor.name in [name.strip() for name in value.split(",")]:
                return None
        if not values:
            return None
        return self.reject(host_state, REASON_AGGREGATE_TYPE,
                           detail=f"its aggregates take only {'; '.join(values)}")
