from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import COMPUTE_FILTER
from ansible_collections.berth.fleet.plugins.module_utils.scheduler import rules
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    VectorReject,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_HOST_DISABLED,
    REASON_HOST_DOWN,
    REASON_HOST_STALE,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class ComputeFilter(BaseHostFilter):
    """Only hosts that answered, that no operator disabled, and whose last tracker sync is
    younger than service_down_time (Nova's check of a service's last heartbeat)."""

    name = COMPUTE_FILTER
    run_filter_once_per_request = True

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        # Nova looks at the disabled flag before the heartbeat; a host that is both is
        # reported as disabled, the operator's decision.
        if host_state.disabled:
            return self.reject(host_state, REASON_HOST_DISABLED,
                               detail=host_state.disabled_reason)
        if not host_state.service_up:
            return self.reject(host_state, REASON_HOST_DOWN, detail=host_state.down_reason)
        age = host_state.sync_age_s
        if rules.stale(float("nan") if age is None else age, spec.service_down_time):
            return self.reject(host_state, REASON_HOST_STALE, used=round(host_state.sync_age_s),
                               limit=spec.service_down_time)
        return None

    def vector_rejects(self, columns: Any, spec: RequestSpec) -> list[VectorReject]:
        # An unknown age is NaN in the column (live facts), as in host_passes.
        return [(REASON_HOST_DISABLED, None, None, columns.disabled, None),
                (REASON_HOST_DOWN, None, None, ~columns.service_up, None),
                (REASON_HOST_STALE, None, None,
                 rules.stale(columns.sync_age_s, spec.service_down_time), None)]
