from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    VectorReject,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_HOST_DISABLED,
    REASON_HOST_DOWN,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


class ComputeFilter(BaseHostFilter):
    """Only hosts that answered and that no operator disabled."""

    name = "ComputeFilter"
    run_filter_once_per_request = True

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        # Nova looks at the disabled flag before the heartbeat; a host that is both is
        # reported as disabled, the operator's decision.
        if host_state.disabled:
            return self.reject(host_state, REASON_HOST_DISABLED,
                               detail=host_state.disabled_reason)
        if not host_state.service_up:
            return self.reject(host_state, REASON_HOST_DOWN, detail=host_state.down_reason)
        return None

    def vector_rejects(self, columns: Any, spec: RequestSpec) -> list[VectorReject]:
        return [(REASON_HOST_DISABLED, None, None, columns.disabled, None),
                (REASON_HOST_DOWN, None, None, ~columns.service_up, None)]
