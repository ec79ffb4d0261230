from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    DISK_WEIGHER,
    DISK_WEIGHT_MULTIPLIER,
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


class DiskWeigher(BaseWeigher):
    """More free disk weighs more."""

    name = DISK_WEIGHER
    multiplier_option = DISK_WEIGHT_MULTIPLIER
    default_multiplier = 1.0
    minval = 0

    def raw_value(self, host_state: HostState, spec: RequestSpec) -> int:
        return host_state.free_disk_mb

    def vector_raw(self, columns: Any, spec: RequestSpec) -> Any:
        return columns.free_disk_mb
