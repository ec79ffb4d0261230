from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    NUM_INSTANCES_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler import rules
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    HostNumber,
    VectorReject,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_TOO_MANY_INSTANCES,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class NumInstancesFilter(BaseHostFilter):
    """Fewer than max_instances_per_host instances (Nova's default 50)."""

    name = NUM_INSTANCES_FILTER
    host_numbers = {"maximum": HostNumber(option="max_instances_per_host")}

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        maximum = self.number("maximum", host_state, spec)
        if not rules.at_limit(host_state.num_instances, maximum):
            return None
        return self.reject(host_state, REASON_TOO_MANY_INSTANCES, used=host_state.num_instances,
                           limit=maximum)

    def vector_rejects(self, columns: Any, spec: RequestSpec) -> list[VectorReject]:
        return [(REASON_TOO_MANY_INSTANCES, None, None,
                 rules.at_limit(columns.num_instances, columns.maximum), None)]
