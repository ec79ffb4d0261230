from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    VectorColumn,
    VectorReject,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_TOO_MANY_INSTANCES,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


class NumInstancesFilter(BaseHostFilter):
    """Fewer than max_instances_per_host instances (Nova's default 50)."""

    name = "NumInstancesFilter"
    vector_columns = {"max_instances": VectorColumn(option="max_instances_per_host")}

    @staticmethod
    def maximum(host_state: HostState, spec: RequestSpec) -> float:
        return spec.max_instances_per_host

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        maximum = self.maximum(host_state, spec)
        if host_state.num_instances < maximum:
            return None
        return self.reject(host_state, REASON_TOO_MANY_INSTANCES, used=host_state.num_instances,
                           limit=maximum)

    def fits(self, host_state: HostState, spec: RequestSpec) -> Callable[[int], bool] | None:
        maximum = self.maximum(host_state, spec)
        return lambda count: host_state.num_instances + count < maximum

    def vector_rejects(self, columns: Any, spec: RequestSpec) -> list[VectorReject]:
        return [(REASON_TOO_MANY_INSTANCES, None, None,
                 columns.num_instances >= columns.max_instances, None)]
