from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    NUM_INSTANCES_WEIGHER,
    NUM_INSTANCES_WEIGHT_MULTIPLIER,
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


class NumInstancesWeigher(BaseWeigher):
    """Instances on the host; Nova's default multiplier 0.0 leaves it out, a negative one
    prefers emptier hosts. No fixed lower bound: normalised min-max over the candidates, as
    Nova's."""

    name = NUM_INSTANCES_WEIGHER
    multiplier_option = NUM_INSTANCES_WEIGHT_MULTIPLIER
    default_multiplier = 0.0

    def raw_value(self, host_state: HostState, spec: RequestSpec) -> int:
        return host_state.num_instances

    def vector_raw(self, columns: Any, spec: RequestSpec) -> Any:
        return columns.num_instances
