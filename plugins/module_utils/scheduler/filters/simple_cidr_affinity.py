from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_NOT_NEAR,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )

# Nova's default prefix when the request gives build_near_host_ip without cidr.
DEFAULT_CIDR = "/24"


def affinity_network(hints: dict[str, Any]) -> Any:
    """The network the build_near_host_ip and cidr hints describe ("10.0.0.7" and "/24" is
    10.0.0.0/24, host bits ignored as Nova's netaddr does), or None without build_near_host_ip;
    a bad address or prefix is refused, naming the hint."""
    address = hints.get("build_near_host_ip")
    if not address:
        return None
    cidr = hints.get("cidr") or DEFAULT_CIDR
    if not isinstance(address, str):
        raise SchedulerInputError("scheduler_hints.build_near_host_ip",
                                  f"scheduler_hints.build_near_host_ip must be an IP address, "
                                  f"got {address!r}")
    if not isinstance(cidr, str) or not cidr.startswith("/"):
        raise SchedulerInputError("scheduler_hints.cidr",
                                  f"scheduler_hints.cidr must be a prefix length such as '/24', "
                                  f"got {cidr!r}")
    try:
        ipaddress.ip_address(address)
    except ValueError:
        raise SchedulerInputError("scheduler_hints.build_near_host_ip",
                                  f"scheduler_hints.build_near_host_ip must be an IP address, "
                                  f"got {address!r}") from None
    try:
        return ipaddress.ip_network(address + cidr, strict=False)
    except ValueError:
        raise SchedulerInputError("scheduler_hints.cidr",
                                  f"scheduler_hints.cidr {cidr!r} is no prefix length for "
                                  f"{address}") from None


class SimpleCIDRAffinityFilter(BaseHostFilter):
    """Scheduler hints build_near_host_ip and cidr (default "/24"): only hosts whose host_ip is
    in that network, as Nova's. A host whose address is unknown is passed over (Nova would
    fail the request on it)."""

    name = "SimpleCIDRAffinityFilter"
    host_fields = frozenset({"host_ip"})
    run_filter_once_per_request = True

    def is_noop(self, spec: RequestSpec) -> bool:
        return not spec.scheduler_hints.get("build_near_host_ip")

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        network = affinity_network(spec.scheduler_hints)
        if network is None:
            return None
        if host_state.host_ip is None:
            return self.reject(host_state, REASON_NOT_NEAR, detail="its address is unknown")
        if ipaddress.ip_address(host_state.host_ip) in network:
            return None
        return self.reject(host_state, REASON_NOT_NEAR,
                           detail=f"{host_state.host_ip} is not in {network}")
