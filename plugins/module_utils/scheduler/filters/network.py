from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import NETWORK_FILTER
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    VectorReject,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_NETWORK_MISSING,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class NetworkFilter(BaseHostFilter):
    """Only hosts that define every libvirt network the launch attaches to.

    Berth's own (Nova's networks come from Neutron, reachable from every host): a host without
    the network would fail at build time; here it is passed over with the reason.
    """

    name = NETWORK_FILTER
    run_filter_once_per_request = True
    host_fields = frozenset({"networks"})

    def is_noop(self, spec: RequestSpec) -> bool:
        return not spec.requested_networks

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        missing = [name for name in spec.requested_networks if name not in host_state.networks]
        if not missing:
            return None
        return self.reject(host_state, REASON_NETWORK_MISSING, detail=", ".join(missing))

    def vector_rejects(self, columns: Any, spec: RequestSpec) -> list[VectorReject]:
        import numpy as np  # the vectorised path only, which has NumPy

        wanted = set(spec.requested_networks)
        has = [wanted.issubset(names) for names in columns.networks]
        return [(REASON_NETWORK_MISSING, None, None, ~np.array(has, dtype=bool), None)]
