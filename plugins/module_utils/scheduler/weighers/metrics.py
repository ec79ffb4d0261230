from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    METRICS_WEIGHER,
    METRICS_WEIGHT_MULTIPLIER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    ComputeHostMetricNotFound,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import (
    BaseWeigher,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


def metric_value(metrics: dict[str, Any], name: str) -> float | None:
    """The host's metric `name` if it has one, else None. A value that is not a number (a
    gathering error left text there) counts as missing: MetricsFilter and MetricsWeigher
    agree on what "has the metric" means."""
    value = metrics.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


class MetricsWeigher(BaseWeigher):
    """The sum of the host's metrics times their ratios (metrics_weight_setting
    "name=ratio"), as Nova's.

    A host missing a weighed metric fails the request with metrics_required (Nova's default;
    MetricsFilter removes such hosts first); without it the host weighs
    metrics_weight_of_unavailable, unless that metric's ratio times the host's multiplier is
    0, when the metric is skipped.
    """

    name = METRICS_WEIGHER
    host_fields = frozenset({"metrics"})
    multiplier_option = METRICS_WEIGHT_MULTIPLIER
    default_multiplier = 1.0

    def host_fields_for(self, spec: RequestSpec) -> frozenset[str]:
        return self.host_fields if spec.metrics_weight_setting else frozenset()

    def raw_value(self, host_state: HostState, spec: RequestSpec) -> float:
        value = 0.0
        for name, ratio in spec.metrics_weight_setting:
            metric = metric_value(host_state.metrics, name)
            if metric is None:
                if spec.metrics_required:
                    raise ComputeHostMetricNotFound(host_state.host, host_state.nodename, name)
                if ratio * self.multiplier(host_state, spec) != 0:
                    return spec.metrics_weight_of_unavailable
                continue
            value += metric * ratio
        return value

    def vector_raw(self, columns: Any, spec: RequestSpec) -> Any:
        if not spec.metrics_weight_setting:
            return columns.zeros
        return None
