"""The image properties a request gives, in Nova's language: the architecture, hypervisor
type and vm mode triple with Nova's canonical spellings, and the hypervisor version requirement.

Pure parsing, shared by the request (which refuses what Nova does not know) and the filters and
weighers that compare the properties with a host.
"""
from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)

# Image property names, today's and the older ones Nova still reads.
ARCH_KEYS = ("hw_architecture", "architecture")
HV_TYPE_KEYS = ("img_hv_type", "hypervisor_type")
VM_MODE_KEYS = ("hw_vm_mode", "vm_mode")
VERSION_KEY = "img_hv_requested_version"
VERSION_OPERATORS = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b, ">=": lambda a, b: a >= b, ">": lambda a, b: a > b,
}

# Nova's canonical values (nova/objects/fields.py Architecture, HVType, VMMode) and the legacy
# spellings its canonicalize() methods turn into them, after lower-casing.
ARCHITECTURES = (
    "alpha", "armv6", "armv7l", "armv7b", "aarch64", "cris", "i686", "ia64", "lm32", "m68k",
    "microblaze", "microblazeel", "mips", "mipsel", "mips64", "mips64el", "openrisc", "parisc",
    "parisc64", "ppc", "ppcle", "ppc64", "ppc64le", "ppcemb", "s390", "s390x", "sh4", "sh4eb",
    "sparc", "sparc64", "unicore32", "x86_64", "xtensa", "xtensaeb",
)
HYPERVISOR_TYPES = (
    "baremetal", "bhyve", "docker", "fake", "hyperv", "ironic", "kqemu", "kvm", "lxc", "lxd",
    "openvz", "parallels", "phyp", "qemu", "test", "uml", "vbox", "vz", "vmware", "xen", "zvm",
    "prsm",
)
VM_MODES = ("hvm", "xen", "uml", "exe")
TRIPLE_SPELLINGS = (
    # (property names, legacy spelling -> canonical, canonical values), in supported_instances'
    # order: architecture, hypervisor type, vm mode.
    (ARCH_KEYS, {"i386": "i686", "i486": "i686", "i586": "i686", "x86_32": "i686",
                 "x86_32p": "i686", "amd64": "x86_64"}, ARCHITECTURES),
    (HV_TYPE_KEYS, {"xapi": "xen"}, HYPERVISOR_TYPES),
    (VM_MODE_KEYS, {"pv": "xen", "hv": "hvm", "baremetal": "hvm"}, VM_MODES),
)


def _canonical(value: Any, legacy: dict[str, str]) -> str:
    text = str(value).strip().lower()
    return legacy.get(text, text)


def canonical_image_properties(properties: dict[str, Any]) -> dict[str, Any]:
    """The request's image properties with architecture, hypervisor type and vm mode in
    Nova's canonical spelling ("x86_32" -> "i686", "xapi" -> "xen", "hv" -> "hvm"), as Nova's
    image metadata object coerces them before any filter reads them. A value Nova does not
    know is refused, naming the property and the values allowed."""
    canonical = dict(properties)
    for keys, legacy, allowed in TRIPLE_SPELLINGS:
        for key in keys:
            if not canonical.get(key):
                continue
            value = _canonical(canonical[key], legacy)
            if value not in allowed:
                raise SchedulerInputError(
                    f"image_properties.{key}",
                    f"image_properties.{key} {canonical[key]!r} is not one of Nova's values: "
                    f"{', '.join(allowed)}")
            canonical[key] = value
    return canonical


def offered(supported: list[str]) -> list[str]:
    """A host's [arch, hypervisor type, vm mode] in canonical spelling. Unknown values are kept
    as they are (a newer libvirt may offer an architecture Nova does not list)."""
    return [_canonical(value, legacy) for value, (_keys, legacy, _allowed) in zip(supported, TRIPLE_SPELLINGS)]


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


def pad_version(version: tuple[int, ...]) -> tuple[int, ...]:
    return version + (0,) * (3 - len(version))
