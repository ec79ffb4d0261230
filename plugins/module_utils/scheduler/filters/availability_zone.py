from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    AVAILABILITY_ZONE_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_WRONG_ZONE,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class AvailabilityZoneFilter(BaseHostFilter):
    """Only hosts in the requested availability zone.

    A host's zone is its `availability_zone`, else the `availability_zone` metadata of its
    aggregates, else default_availability_zone (Nova's "nova").
    """

    name = AVAILABILITY_ZONE_FILTER
    run_filter_once_per_request = True

    def is_noop(self, spec: RequestSpec) -> bool:
        return not spec.availability_zone

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        if not spec.availability_zone:
            return None
        zones = host_state.zones(spec.default_availability_zone)
        if spec.availability_zone in zones:
            return None
        return self.reject(host_state, REASON_WRONG_ZONE, detail=", ".join(zones))
