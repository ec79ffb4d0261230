from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)
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


def check_retry_hosts(value: Any) -> list[list[Any]]:
    """The retry_hosts option as [host, nodename] pairs, Nova's form; a bare host name, or a
    null nodename, is Berth's shorthand for every node of that host, kept as [host, None]."""
    field = "retry_hosts"
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise SchedulerInputError(field, f"{field} must be a list of [host, nodename] pairs, "
                                         f"got {value!r}")
    pairs: list[list[Any]] = []
    for item in value:
        if isinstance(item, str) and item:
            pairs.append([item, None])
        elif (isinstance(item, (list, tuple)) and len(item) == 2
              and isinstance(item[0], str) and item[0]
              and (item[1] is None or isinstance(item[1], str) and item[1])):
            pairs.append([item[0], item[1]])
        else:
            raise SchedulerInputError(
                field, f"{field} items must be [host, nodename] pairs (or a host name for all "
                       f"its nodes), got {item!r}")
    return pairs


class RetryFilter(BaseHostFilter):
    """Not a (host, node) this instance was already tried on: the request's retry_hosts, as
    Nova's RetryFilter compares [host, nodename] pairs."""

    name = "RetryFilter"

    def is_noop(self, spec: RequestSpec) -> bool:
        return not spec.retry_hosts

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        for host, nodename in spec.retry_hosts:
            if host == host_state.host and nodename in (None, host_state.nodename):
                return self.reject(host_state, REASON_RETRIED,
                                   detail=f"node {host_state.nodename}")
        return None
