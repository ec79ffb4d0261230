from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import (
    BaseWeigher,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


class MetricsWeigher(BaseWeigher):
    """The sum of the host's metrics times their ratios (metrics_weight_setting
    "name=ratio"); a host missing a weighed metric gets metrics_weight_of_unavailable.

    Nova raises when metrics_required is set and a metric is missing (its MetricsFilter is
    meant to have removed such hosts); here the host is weighed last instead, which is what
    Nova does with metrics_required off.
    """

    name = "MetricsWeigher"
    host_fields = frozenset({"metrics"})
    multiplier_option = "metrics_weight_multiplier"
    default_multiplier = 1.0

    def host_fields_for(self, spec: RequestSpec) -> frozenset[str]:
        return self.host_fields if spec.metrics_weight_setting else frozenset()

    def raw_value(self, host_state: HostState, spec: RequestSpec) -> float:
        value = 0.0
        for name, ratio in spec.metrics_weight_setting:
            metric = host_state.metrics.get(name)
            if not isinstance(metric, (int, float)) or isinstance(metric, bool):
                if ratio * self.multiplier(host_state, spec) != 0:
                    return spec.metrics_weight_of_unavailable
                continue
            value += metric * ratio
        return value

    def vector_raw(self, columns: Any, spec: RequestSpec) -> Any:
        if not spec.metrics_weight_setting:
            return columns.zeros
        return None
