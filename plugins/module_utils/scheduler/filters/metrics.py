from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import METRICS_FILTER
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_METRICS_MISSING,
    Rejection,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.metrics import (
    metric_value,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class MetricsFilter(BaseHostFilter):
    """Only hosts that have every metric metrics_weight_setting weighs, so that MetricsWeigher
    (with metrics_required) never meets a host without one, as Nova's."""

    name = METRICS_FILTER
    host_fields = frozenset({"metrics"})

    def is_noop(self, spec: RequestSpec) -> bool:
        return not spec.metrics_weight_setting

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        missing = []
        for name, _ratio in spec.metrics_weight_setting:
            if metric_value(host_state.metrics, name) is None and name not in missing:
                missing.append(name)
        if not missing:
            return None
        return self.reject(host_state, REASON_METRICS_MISSING, detail=", ".join(missing))
