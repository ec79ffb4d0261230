from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    AGGREGATE_INSTANCE_EXTRA_SPECS_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler import extra_specs_ops
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_AGGREGATE_EXTRA_SPECS,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


SCOPE = "aggregate_instance_extra_specs"


def scoped_specs(extra_specs: dict[str, Any], scope: str) -> list[tuple[str, str]]:
    """(key without scope, wanted) for the extra specs this scope reads, as Nova splits them:
    unscoped keys count, keys of another scope ("hw:cpu_policy") do not."""
    wanted = []
    for key, requirement in extra_specs.items():
        parts = key.split(":", 1)
        if len(parts) > 1:
            if parts[0] != scope:
                continue
            key = parts[1]
        wanted.append((key, str(requirement)))
    return wanted


class AggregateInstanceExtraSpecsFilter(BaseHostFilter):
    """The flavor's extra specs (unscoped or "aggregate_instance_extra_specs:") must each match
    a metadata value of one of the host's aggregates; values are split at commas, as Nova's."""

    name = AGGREGATE_INSTANCE_EXTRA_SPECS_FILTER
    run_filter_once_per_request = True

    def is_noop(self, spec: RequestSpec) -> bool:
        return not scoped_specs(spec.flavor.extra_specs, SCOPE)

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        metadata = host_state.aggregate_metadata()
        for key, requirement in scoped_specs(spec.flavor.extra_specs, SCOPE):
            values = metadata.get(key)
            if not values:
                return self.reject(host_state, REASON_AGGREGATE_EXTRA_SPECS,
                                   detail=f"no aggregate sets {key}")
            if not any(extra_specs_ops.match(value, requirement) for value in values):
                return self.reject(host_state, REASON_AGGREGATE_EXTRA_SPECS,
                                   detail=f"{key}: {', '.join(values)} does not match "
                                          f"{requirement!r}")
        return None
