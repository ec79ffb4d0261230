from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    SIMPLE_CIDR_AFFINITY_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
    RequestSpec,
    affinity_network,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_NOT_NEAR,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


class SimpleCIDRAffinityFilter(BaseHostFilter):
    """Scheduler hints build_near_host_ip and cidr (default "/24"): only hosts whose host_ip is
    in that network, as Nova's. A host whose address is unknown is passed over (Nova would
    fail the request on it)."""

    name = SIMPLE_CIDR_AFFINITY_FILTER
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
