from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    RAM_WEIGHER,
    RAM_WEIGHT_MULTIPLIER,
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


class RAMWeigher(BaseWeigher):
    """More free RAM weighs more: a positive multiplier spreads, a negative one stacks."""

    name = RAM_WEIGHER
    multiplier_option = RAM_WEIGHT_MULTIPLIER
    default_multiplier = 1.0
    minval = 0

    def raw_value(self, host_state: HostState, spec: RequestSpec) -> int:
        return host_state.free_ram_mb

    def vector_raw(self, columns: Any, spec: RequestSpec) -> Any:
        return columns.free_ram_mb
