from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import FACT_FIELDS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler import extra_specs_ops
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.aggregate_instance_extra_specs import (
    scoped_specs,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_CAPABILITIES,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


SCOPE = "capabilities"


class ComputeCapabilitiesFilter(BaseHostFilter):
    """The flavor's extra specs (unscoped or "capabilities:") must match the host's facts,
    with Nova's extra_specs_ops operators ("capabilities:cpu_info:arch": "x86_64")."""

    name = "ComputeCapabilitiesFilter"
    # An extra spec may name any fact.
    host_fields = FACT_FIELDS
    run_filter_once_per_request = True

    def is_noop(self, spec: RequestSpec) -> bool:
        return not scoped_specs(spec.flavor.extra_specs, SCOPE)

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        for key, requirement in scoped_specs(spec.flavor.extra_specs, SCOPE):
            value = host_state.fact(key.split(":"))
            if value is None:
                return self.reject(host_state, REASON_CAPABILITIES, detail=f"no {key}")
            if not extra_specs_ops.match(str(value), requirement):
                return self.reject(host_state, REASON_CAPABILITIES,
                                   detail=f"{key} {value} does not match {requirement!r}")
        return None
