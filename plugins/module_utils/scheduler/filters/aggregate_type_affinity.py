from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_AGGREGATE_TYPE,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


class AggregateTypeAffinityFilter(BaseHostFilter):
    """Aggregates with metadata instance_type ("m1.small,m1.large") take only those flavors."""

    name = "AggregateTypeAffinityFilter"
    run_filter_once_per_request = True

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        for value in host_state.aggregate_values("instance_type"):
            if spec.flavor.name not in [name.strip() for name in value.split(",")]:
                return self.reject(host_state, REASON_AGGREGATE_TYPE,
                                   detail=f"aggregate takes only {value}")
        return None
