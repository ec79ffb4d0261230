from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    HYPERVISOR_VERSION_WEIGHER,
    HYPERVISOR_VERSION_WEIGHT_MULTIPLIER,
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


class HypervisorVersionWeigher(BaseWeigher):
    """Newer hypervisors weigh more (an unknown version counts as 0)."""

    name = HYPERVISOR_VERSION_WEIGHER
    multiplier_option = HYPERVISOR_VERSION_WEIGHT_MULTIPLIER
    default_multiplier = 1.0

    def raw_value(self, host_state: HostState, spec: RequestSpec) -> int:
        return host_state.hypervisor_version or 0

    def vector_raw(self, columns: Any, spec: RequestSpec) -> Any:
        return columns.hypervisor_version
