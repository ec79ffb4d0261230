from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import SAME_HOST_FILTER
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_SAME_HOST,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class SameHostFilter(BaseHostFilter):
    """Scheduler hint same_host: only hosts running one of these instance uuids."""

    name = SAME_HOST_FILTER
    host_fields = frozenset({"instances"})
    run_filter_once_per_request = True

    def is_noop(self, spec: RequestSpec) -> bool:
        return not spec.scheduler_hints.get("same_host")

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        wanted = spec.scheduler_hints.get("same_host")
        if not wanted or set(wanted) & set(host_state.instances):
            return None
        return self.reject(host_state, REASON_SAME_HOST)
