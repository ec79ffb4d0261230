from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    SERVER_GROUP_ANTI_AFFINITY_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler import rules
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    VectorReject,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_ANTI_AFFINITY,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class ServerGroupAntiAffinityFilter(BaseHostFilter):
    """Policy "anti-affinity": fewer than max_server_per_host members (default 1) per host."""

    name = SERVER_GROUP_ANTI_AFFINITY_FILTER

    def is_noop(self, spec: RequestSpec) -> bool:
        return spec.server_group is None or spec.server_group.policy != "anti-affinity"

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        group = spec.server_group
        if group is None or group.policy != "anti-affinity":
            return None
        members = group.member_count(host_state.host)
        if not rules.at_limit(members, group.max_server_per_host):
            return None
        return self.reject(host_state, REASON_ANTI_AFFINITY, used=members,
                           limit=group.max_server_per_host, detail=f"group {group.name}")

    def vector_rejects(self, columns: Any, spec: RequestSpec) -> list[VectorReject]:
        group = spec.server_group
        if group is None or group.policy != "anti-affinity":
            return []
        return [(REASON_ANTI_AFFINITY, None, None,
                 rules.at_limit(columns.group_members, group.max_server_per_host), None)]
