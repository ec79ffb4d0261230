from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    AGGREGATE_MULTITENANCY_ISOLATION,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_AGGREGATE_TENANT,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )

# Nova reads every aggregate metadata key that starts with this ("filter_tenant_id",
# "filter_tenant_id_2"...), so one aggregate can list many projects.
TENANT_KEY_PREFIX = "filter_tenant_id"


class AggregateMultiTenancyIsolation(BaseHostFilter):
    """A host whose aggregates name projects (metadata filter_tenant_id*, comma-separated)
    takes only instances of those projects (the request's project_id); a host in no such
    aggregate takes any project, as Nova's."""

    name = AGGREGATE_MULTITENANCY_ISOLATION
    run_filter_once_per_request = True

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        projects: list[str] = []
        for key, values in host_state.aggregate_metadata().items():
            if key.startswith(TENANT_KEY_PREFIX):
                projects.extend(value for value in values if value not in projects)
        if not projects or spec.project_id in projects:
            return None
        return self.reject(host_state, REASON_AGGREGATE_TENANT,
                           detail=f"reserved for {', '.join(projects)}")
