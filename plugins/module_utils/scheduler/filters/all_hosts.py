from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import ALL_HOSTS_FILTER
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import Rejection

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class AllHostsFilter(BaseHostFilter):
    """Passes every host."""

    name = ALL_HOSTS_FILTER
    run_filter_once_per_request = True

    def is_noop(self, spec: RequestSpec) -> bool:
        return True

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        return None
