from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_RETRIED,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


class RetryFilter(BaseHostFilter):
    """Not a host this instance was already tried on (the request's retry hosts)."""

    name = "RetryFilter"

    def is_noop(self, spec: RequestSpec) -> bool:
        return not spec.retry_hosts

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        if host_state.host in spec.retry_hosts:
            return self.reject(host_state, REASON_RETRIED)
        return None
