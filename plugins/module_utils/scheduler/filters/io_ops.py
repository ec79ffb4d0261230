from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import IO_OPS_FILTER
from ansible_collections.berth.fleet.plugins.module_utils.scheduler import rules
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    HostNumber,
    VectorReject,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_TOO_MANY_IO_OPS,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class IoOpsFilter(BaseHostFilter):
    """Fewer than max_io_ops_per_host instances building or migrating (Nova's default 8)."""

    name = IO_OPS_FILTER
    host_numbers = {"maximum": HostNumber(option="max_io_ops_per_host")}

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        maximum = self.number("maximum", host_state, spec)
        if not rules.at_limit(host_state.num_io_ops, maximum):
            return None
        return self.reject(host_state, REASON_TOO_MANY_IO_OPS, used=host_state.num_io_ops,
                           limit=maximum)

    def vector_rejects(self, columns: Any, spec: RequestSpec) -> list[VectorReject]:
        return [(REASON_TOO_MANY_IO_OPS, None, None,
                 rules.at_limit(columns.num_io_ops, columns.maximum), None)]
