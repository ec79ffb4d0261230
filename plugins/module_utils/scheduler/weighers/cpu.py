from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    CPU_WEIGHER,
    CPU_WEIGHT_MULTIPLIER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler import rules
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


class CPUWeigher(BaseWeigher):
    """More free vCPUs (after overcommit) weigh more."""

    name = CPU_WEIGHER
    multiplier_option = CPU_WEIGHT_MULTIPLIER
    default_multiplier = 1.0
    minval = 0

    def raw_value(self, host_state: HostState, spec: RequestSpec) -> float:
        return rules.vcpus_free(host_state.vcpus_total, host_state.vcpus_used,
                                host_state.cpu_allocation_ratio)

    def vector_raw(self, columns: Any, spec: RequestSpec) -> Any:
        return rules.vcpus_free(columns.vcpus_total, columns.vcpus_used,
                                columns.cpu_allocation_ratio)
