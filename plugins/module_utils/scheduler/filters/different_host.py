from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    DIFFERENT_HOST_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_DIFFERENT_HOST,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class DifferentHostFilter(BaseHostFilter):
    """Scheduler hint different_host: only hosts running none of these instance uuids."""

    name = DIFFERENT_HOST_FILTER
    host_fields = frozenset({"instances"})
    run_filter_once_per_request = True

    def is_noop(self, spec: RequestSpec) -> bool:
        return not spec.scheduler_hints.get("different_host")

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        avoided = set(spec.scheduler_hints.get("different_host") or ()) & set(host_state.instances)
        if not avoided:
            return None
        return self.reject(host_state, REASON_DIFFERENT_HOST, detail=", ".join(sorted(avoided)))
