from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import RETRY_FILTER
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_RETRIED,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class RetryFilter(BaseHostFilter):
    """Not a (host, node) this instance was already tried on: the request's retry_hosts, as
    Nova's RetryFilter compares [host, nodename] pairs."""

    name = RETRY_FILTER

    def is_noop(self, spec: RequestSpec) -> bool:
        return not spec.retry_hosts

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        for host, nodename in spec.retry_hosts:
            if host == host_state.host and nodename in (None, host_state.nodename):
                return self.reject(host_state, REASON_RETRIED,
                                   detail=f"node {host_state.nodename}")
        return None
