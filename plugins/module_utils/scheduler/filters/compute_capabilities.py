from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    VectorReject,
)
import json

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
# What "capabilities:<name>" may read: the host state's facts, never its methods or limits.
CAPABILITY_FIELDS = frozenset({
    "host", "nodename", "uuid", "vcpus_total", "vcpus_used", "total_usable_ram_mb",
    "free_ram_mb", "total_usable_disk_gb", "free_disk_mb", "num_instances", "num_io_ops",
    "cpu_allocation_ratio", "ram_allocation_ratio", "disk_allocation_ratio", "hypervisor_type",
    "hypervisor_version", "supported_instances", "cpu_info", "availability_zone", "metrics",
})


def capability(host_state: HostState, path: list[str]) -> Any:
    """Nova's _get_capabilities: the first name is a host attribute, the rest walk mappings
    (a JSON string such as Nova's cpu_info is parsed first); None when anything is missing."""
    if path[0] not in CAPABILITY_FIELDS:
        return None
    value: Any = getattr(host_state, path[0])
    for name in path[1:]:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return None
        if not isinstance(value, dict):
            return None
        value = value.get(name)
        if value is None:
            return None
    return value


class ComputeCapabilitiesFilter(BaseHostFilter):
    """The flavor's extra specs (unscoped or "capabilities:") must match the host's facts,
    with Nova's extra_specs_ops operators ("capabilities:cpu_info:arch": "x86_64")."""

    name = "ComputeCapabilitiesFilter"
    run_filter_once_per_request = True

    def is_noop(self, spec: RequestSpec) -> bool:
        return not scoped_specs(spec.flavor.extra_specs, SCOPE)

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        for key, requirement in scoped_specs(spec.flavor.extra_specs, SCOPE):
            value = capability(host_state, key.split(":"))
            if value is None:
                return self.reject(host_state, REASON_CAPABILITIES, detail=f"no {key}")
            if not extra_specs_ops.match(str(value), requirement):
                return self.reject(host_state, REASON_CAPABILITIES,
                                   detail=f"{key} {value} does not match {requirement!r}")
        return None
