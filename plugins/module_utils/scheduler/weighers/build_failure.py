from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    BUILD_FAILURE_WEIGHER,
    BUILD_FAILURE_WEIGHT_MULTIPLIER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import (
    BaseWeigher,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class BuildFailureWeigher(BaseWeigher):
    """Hosts whose recent builds failed weigh less, strongly (Nova's multiplier 1000000.0).

    As in Nova, the raw value is the count and the multiplier is negated: with a multiplier
    per aggregate, weighing minus the count would rank hosts otherwise. The ledger counts them
    as Nova's compute manager does: each build that fails on a host (retried elsewhere or not)
    adds one there, and a build that succeeds there sets it back to zero.
    """

    name = BUILD_FAILURE_WEIGHER
    multiplier_option = BUILD_FAILURE_WEIGHT_MULTIPLIER
    default_multiplier = 1000000.0
    multiplier_sign = -1.0

    def raw_value(self, host_state: HostState, spec: RequestSpec) -> int:
        return host_state.failed_builds

    def vector_raw(self, columns: Any, spec: RequestSpec) -> Any:
        return columns.failed_builds
