from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    SERVER_GROUP_AFFINITY_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    VectorReject,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_AFFINITY,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class ServerGroupAffinityFilter(BaseHostFilter):
    """Policy "affinity": once a member is placed, only its host will do."""

    name = SERVER_GROUP_AFFINITY_FILTER
    depends_on_other_hosts = True

    def is_noop(self, spec: RequestSpec) -> bool:
        return spec.server_group is None or spec.server_group.policy != "affinity"

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        group = spec.server_group
        if group is None or group.policy != "affinity":
            return None
        if not group.hosts or host_state.host in group.members:
            return None
        return self.reject(host_state, REASON_AFFINITY,
                           detail=f"group {group.name} is on {', '.join(group.hosts)}")

    def vector_rejects(self, columns: Any, spec: RequestSpec) -> list[VectorReject]:
        group = spec.server_group
        if group is None or group.policy != "affinity" or not group.hosts:
            return []
        return [(REASON_AFFINITY, None, None, columns.group_members == 0, None)]
