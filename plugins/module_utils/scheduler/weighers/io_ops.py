from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    IO_OPS_WEIGHER,
    IO_OPS_WEIGHT_MULTIPLIER,
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


class IoOpsWeigher(BaseWeigher):
    """Busy hosts (builds, migrations) weigh less with Nova's default multiplier -1.0."""

    name = IO_OPS_WEIGHER
    multiplier_option = IO_OPS_WEIGHT_MULTIPLIER
    default_multiplier = -1.0
    minval = 0

    def raw_value(self, host_state: HostState, spec: RequestSpec) -> int:
        return host_state.num_io_ops

    def vector_raw(self, columns: Any, spec: RequestSpec) -> Any:
        return columns.num_io_ops
