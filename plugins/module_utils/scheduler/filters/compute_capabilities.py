from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    COMPUTE_CAPABILITIES_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler import extra_specs_ops
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import FACT_FIELDS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_CAPABILITIES,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


SCOPE = "capabilities"
# An unscoped key is this filter's only if Nova's HostState has an attribute of that name. These
# facts are Berth's alone (Nova keeps them on the service or in aggregate metadata), so an
# unscoped "availability_zone" is left to AggregateInstanceExtraSpecsFilter, as in Nova.
_NOT_NOVA_ATTRIBUTES = frozenset({"service_up", "disabled", "availability_zone"})
UNSCOPED_KEYS = FACT_FIELDS - _NOT_NOVA_ATTRIBUTES


def capability_specs(extra_specs: dict[str, Any]) -> list[tuple[list[str], str]]:
    """(path of names, wanted) for the extra specs this filter reads, as Nova's does: keys of
    the "capabilities" scope, and unscoped keys that name an attribute of Nova's HostState
    (UNSCOPED_KEYS). An unscoped key that names none ("ssd") is for
    AggregateInstanceExtraSpecsFilter, and a key of another scope
    ("hw:cpu_policy") for other parts of Nova: both are left alone."""
    wanted = []
    for key, requirement in extra_specs.items():
        path = key.split(":")
        if len(path) == 1:
            if key not in UNSCOPED_KEYS:
                continue
        elif path[0] != SCOPE:
            continue
        else:
            path = path[1:]
        wanted.append((path, str(requirement)))
    return wanted


class ComputeCapabilitiesFilter(BaseHostFilter):
    """The flavor's extra specs ("capabilities:" or unscoped naming a host fact) must match the
    host's facts, with Nova's extra_specs_ops operators ("capabilities:cpu_info:arch":
    "x86_64")."""

    name = COMPUTE_CAPABILITIES_FILTER
    # An extra spec may name any fact.
    host_fields = FACT_FIELDS
    run_filter_once_per_request = True

    def is_noop(self, spec: RequestSpec) -> bool:
        return not capability_specs(spec.flavor.extra_specs)

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        for path, requirement in capability_specs(spec.flavor.extra_specs):
            key = ":".join(path)
            value = host_state.fact(path)
            if value is None:
                return self.reject(host_state, REASON_CAPABILITIES, detail=f"no {key}")
            if not extra_specs_ops.match(str(value), requirement):
                return self.reject(host_state, REASON_CAPABILITIES,
                                   detail=f"{key} {value} does not match {requirement!r}")
        return None
