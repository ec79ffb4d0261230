from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    VectorColumn,
    VectorReject,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_TOO_MANY_IO_OPS,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


class IoOpsFilter(BaseHostFilter):
    """Fewer than max_io_ops_per_host instances building or migrating (Nova's default 8)."""

    name = "IoOpsFilter"
    vector_columns = {"max_io_ops": VectorColumn(option="max_io_ops_per_host")}

    @staticmethod
    def maximum(host_state: HostState, spec: RequestSpec) -> float:
        return spec.max_io_ops_per_host

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        maximum = self.maximum(host_state, spec)
        if host_state.num_io_ops < maximum:
            return None
        return self.reject(host_state, REASON_TOO_MANY_IO_OPS, used=host_state.num_io_ops,
                           limit=maximum)

    def fits(self, host_state: HostState, spec: RequestSpec) -> Callable[[int], bool] | None:
        maximum = self.maximum(host_state, spec)
        # Every build is an io op while it runs, as consumption counts it.
        return lambda count: host_state.num_io_ops + count < maximum

    def vector_rejects(self, columns: Any, spec: RequestSpec) -> list[VectorReject]:
        return [(REASON_TOO_MANY_IO_OPS, None, None,
                 columns.num_io_ops >= columns.max_io_ops, None)]
