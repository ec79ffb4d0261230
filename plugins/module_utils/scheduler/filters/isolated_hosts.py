from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    ISOLATED_HOSTS_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_ISOLATED,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class IsolatedHostsFilter(BaseHostFilter):
    """isolated_images run only on isolated_hosts; with
    restrict_isolated_hosts_to_isolated_images, isolated hosts run only isolated images."""

    name = ISOLATED_HOSTS_FILTER
    run_filter_once_per_request = True

    def is_noop(self, spec: RequestSpec) -> bool:
        return not (spec.isolated_hosts or spec.isolated_images)

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        if not (spec.isolated_hosts or spec.isolated_images):
            return None
        image_isolated = spec.image_id in spec.isolated_images
        host_isolated = host_state.host in spec.isolated_hosts
        if spec.restrict_isolated_hosts_to_isolated_images:
            passes = image_isolated == host_isolated
        else:
            passes = not image_isolated or host_isolated
        if passes:
            return None
        detail = ("isolated host, image not isolated" if host_isolated
                  else "isolated image, host not isolated")
        return self.reject(host_state, REASON_ISOLATED, detail=detail)
