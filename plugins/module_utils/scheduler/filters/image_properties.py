from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    IMAGE_PROPERTIES_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.image_meta import (
    TRIPLE_SPELLINGS,
    VERSION_KEY,
    VERSION_OPERATORS,
    offered,
    pad_version,
    parse_version_requirement,
    version_tuple,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_IMAGE_PROPERTIES,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class ImagePropertiesFilter(BaseHostFilter):
    """The image's architecture, hypervisor type and vm mode must be among the host's
    supported_instances, and its img_hv_requested_version satisfied by hypervisor_version."""

    name = IMAGE_PROPERTIES_FILTER
    host_fields = frozenset({"supported_instances"})
    run_filter_once_per_request = True

    @staticmethod
    def wanted(spec: RequestSpec) -> list[str | None]:
        """(arch, hypervisor type, vm mode) asked for: RequestSpec made them canonical."""
        properties = spec.image_properties
        return [next((properties[key] for key in keys if properties.get(key)), None)
                for keys, _legacy, _allowed in TRIPLE_SPELLINGS]

    def is_noop(self, spec: RequestSpec) -> bool:
        return not any(self.wanted(spec))

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        wanted = self.wanted(spec)
        if not any(wanted):
            return None
        described = "/".join(value or "any" for value in wanted)
        if not host_state.supported_instances:
            return self.reject(host_state, REASON_IMAGE_PROPERTIES,
                               detail=f"host lists no supported instances for {described}")
        for supported in host_state.supported_instances:
            # Nova looks for each wanted value anywhere in the triple, not at its position.
            host_values = offered(supported)
            if all(value is None or value in host_values for value in wanted):
                if self._version_ok(host_state, spec):
                    return None
        return self.reject(host_state, REASON_IMAGE_PROPERTIES,
                           detail=f"{described} not supported")

    @staticmethod
    def _version_ok(host_state: HostState, spec: RequestSpec) -> bool:
        requirement = spec.image_properties.get(VERSION_KEY)
        if not (host_state.hypervisor_version and requirement):
            return True
        have = pad_version(version_tuple(host_state.hypervisor_version))
        return all(VERSION_OPERATORS[op](have, pad_version(version))
                   for op, version in parse_version_requirement(requirement))
