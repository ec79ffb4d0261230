from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_IMAGE_PROPERTIES,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


# Image property names, today's and the older ones Nova still reads.
ARCH_KEYS = ("hw_architecture", "architecture")
HV_TYPE_KEYS = ("img_hv_type", "hypervisor_type")
VM_MODE_KEYS = ("hw_vm_mode", "vm_mode")
VERSION_KEY = "img_hv_requested_version"
_VERSION_OPS = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b, ">=": lambda a, b: a >= b, ">": lambda a, b: a > b,
}


def _first(properties: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        if properties.get(key):
            return _canonical(properties[key])
    return None


def _canonical(value: Any) -> str:
    # Nova canonicalises case and the usual aliases (x86_64 for amd64, hvm for "HVM").
    text = str(value).strip().lower()
    return {"amd64": "x86_64", "x64": "x86_64", "i386": "i686", "arm64": "aarch64"}.get(text, text)


def parse_version_requirement(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """">= 2.0, < 3" as [(op, version)], as distutils' VersionPredicate reads it."""
    requirements = []
    for part in str(text).split(","):
        part = part.strip()
        for op in ("<=", ">=", "==", "!=", "<", ">"):
            if part.startswith(op):
                version = part[len(op):].strip()
                try:
                    requirements.append((op, tuple(int(x) for x in version.split("."))))
                except ValueError:
                    raise ValueError(f"{text!r} is not a version requirement") from None
                break
        else:
            raise ValueError(f"{text!r} is not a version requirement such as '>=2.0'")
    return requirements


def version_tuple(hypervisor_version: int) -> tuple[int, ...]:
    """libvirt's integer version (2012000) as (2, 12, 0), Nova's convert_version_to_str."""
    return (hypervisor_version // 1000000, hypervisor_version // 1000 % 1000,
            hypervisor_version % 1000)


def _pad(version: tuple[int, ...]) -> tuple[int, ...]:
    return version + (0,) * (3 - len(version))


class ImagePropertiesFilter(BaseHostFilter):
    """The image's architecture, hypervisor type and vm mode must be among the host's
    supported_instances, and its img_hv_requested_version satisfied by hypervisor_version."""

    name = "ImagePropertiesFilter"
    host_fields = frozenset({"supported_instances"})
    run_filter_once_per_request = True

    @staticmethod
    def wanted(spec: RequestSpec) -> tuple[str | None, str | None, str | None]:
        properties = spec.image_properties
        return (_first(properties, ARCH_KEYS), _first(properties, HV_TYPE_KEYS),
                _first(properties, VM_MODE_KEYS))

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
            offered = [_canonical(value) for value in supported]
            if all(value is None or value in offered for value in wanted):
                if self._version_ok(host_state, spec):
                    return None
        return self.reject(host_state, REASON_IMAGE_PROPERTIES,
                           detail=f"{described} not supported")

    @staticmethod
    def _version_ok(host_state: HostState, spec: RequestSpec) -> bool:
        requirement = spec.image_properties.get(VERSION_KEY)
        if not (host_state.hypervisor_version and requirement):
            return True
        have = _pad(version_tuple(host_state.hypervisor_version))
        return all(_VERSION_OPS[op](have, _pad(version))
                   for op, version in parse_version_requirement(requirement))
