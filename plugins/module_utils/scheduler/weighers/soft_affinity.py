from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    SOFT_AFFINITY_WEIGHER,
    SOFT_AFFINITY_WEIGHT_MULTIPLIER,
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


class ServerGroupSoftAffinityWeigher(BaseWeigher):
    """Policy "soft-affinity": hosts with more members of the group weigh more."""

    name = SOFT_AFFINITY_WEIGHER
    multiplier_option = SOFT_AFFINITY_WEIGHT_MULTIPLIER
    default_multiplier = 1.0
    policy = "soft-affinity"
    sign = 1

    def raw_value(self, host_state: HostState, spec: RequestSpec) -> int:
        group = spec.server_group
        if group is None or group.policy != self.policy:
            return 0
        return self.sign * group.member_count(host_state.host)

    def vector_raw(self, columns: Any, spec: RequestSpec) -> Any:
        group = spec.server_group
        if group is None or group.policy != self.policy:
            return columns.zeros
        return self.sign * columns.group_members
