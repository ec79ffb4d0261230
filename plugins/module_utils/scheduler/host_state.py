from __future__ import annotations

import copy
import dataclasses
import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.validation import (
    check_bool,
    check_integer,
    check_number,
    check_optional_string,
    check_positive_number,
    check_string_list,
)

# The facts a flavor extra spec ("capabilities:cpu_info:vendor") or a JSON query hint
# ("$free_ram_mb") may read: never methods, limits or private attributes.
FACT_FIELDS = frozenset({
    "host", "nodename", "uuid", "service_up", "disabled", "vcpus_total", "vcpus_used",
    "total_usable_ram_mb", "free_ram_mb", "total_usable_disk_gb", "free_disk_mb",
    "num_instances", "num_io_ops", "cpu_allocation_ratio", "ram_allocation_ratio",
    "disk_allocation_ratio", "hypervisor_type", "hypervisor_version", "supported_instances",
    "cpu_info", "availability_zone", "metrics", "instances", "failed_builds", "host_ip",
})

# Today's Nova defaults.
DEFAULT_RATIOS = {
    "cpu_allocation_ratio": 4.0,
    "ram_allocation_ratio": 1.0,
    "disk_allocation_ratio": 1.0,
}
DEFAULT_RESERVED = {
    "reserved_host_memory_mb": 512,
    "reserved_host_disk_mb": 0,
}


@dataclass
class Flavor:
    name: str
    vcpus: int
    memory_mb: int
    root_gb: int
    ephemeral_gb: int = 0
    swap: int = 0  # MB, as in Nova
    # Kept, not yet read: the filters that match extra specs come with a later change,
    # and dropping what the user wrote would hide it from them.
    extra_specs: dict[str, Any] = field(default_factory=dict)

    # description is accepted so that Nova-style flavor files load; it plays no part in placement.
    _ALLOWED_KEYS = ("name", "vcpus", "memory_mb", "root_gb", "ephemeral_gb", "swap",
                     "extra_specs", "description")
    _REQUIRED_KEYS = ("vcpus", "memory_mb", "root_gb")

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise SchedulerInputError(
                "flavor.name", f"flavor.name must be a non-empty string, got {self.name!r}"
            )
        limits.FLAVOR_NAME.check(self.name)
        # Each size within its bounds (limits.py says why each stops where it does).
        for name, limit in limits.FLAVOR_SIZES.items():
            limit.check(getattr(self, name))
        if not isinstance(self.extra_specs, Mapping) or not all(
            isinstance(key, str) for key in self.extra_specs
        ):
            raise SchedulerInputError(
                "flavor.extra_specs",
                f"flavor.extra_specs must be a mapping with string keys, got {self.extra_specs!r}",
            )
        for key, value in self.extra_specs.items():
            limits.EXTRA_SPEC_TEXT.check(key, "flavor.extra_specs")
            limits.EXTRA_SPEC_TEXT.check(str(value), f"flavor.extra_specs.{key}")
        self.extra_specs = dict(self.extra_specs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], name: str | None = None) -> Flavor:
        """Build a flavor from a flavors-file entry or an inline dict.

        `name` is for entries keyed by name in the flavors file; it wins over a `name` key.
        """
        if not isinstance(data, Mapping):
            raise SchedulerInputError("flavor", f"flavor must be a mapping, got {data!r}")
        for key in data:
            if key not in cls._ALLOWED_KEYS:
                raise SchedulerInputError(
                    f"flavor.{key}",
                    f"flavor has an unknown key {key!r}; allowed: {', '.join(cls._ALLOWED_KEYS)}",
                )
        for key in cls._REQUIRED_KEYS:
            if key not in data:
                raise SchedulerInputError(f"flavor.{key}", f"flavor.{key} is required")
        return cls(
            name=name if name is not None else data.get("name"),  # type: ignore[arg-type]
            vcpus=data["vcpus"],
            memory_mb=data["memory_mb"],
            root_gb=data["root_gb"],
            ephemeral_gb=data.get("ephemeral_gb", 0),
            swap=data.get("swap", 0),
            extra_specs=data.get("extra_specs", {}),
        )

    @property
    def requested_disk_mb(self) -> int:
        # Nova's DiskFilter asks for swap too, although consuming a host does not take it off.
        return 1024 * (self.root_gb + self.ephemeral_gb) + self.swap

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class HostState:
    """One hypervisor as the scheduler sees it; field names are Nova's HostState's.

    Built directly, unset numbers are 0 as in Nova's HostState before its first update;
    `from_dict`, which takes outside data, requires the resource numbers instead.
    """

    host: str
    nodename: str = ""  # libvirt's hostname; the inventory name when not given
    uuid: str | None = None
    service_up: bool = True
    disabled: bool = False
    disabled_reason: str | None = None
    vcpus_total: int = 0
    vcpus_used: int = 0
    total_usable_ram_mb: int = 0
    free_ram_mb: int = 0
    total_usable_disk_gb: int = 0
    free_disk_mb: int = 0
    num_instances: int = 0
    num_io_ops: int = 0
    cpu_allocation_ratio: float = DEFAULT_RATIOS["cpu_allocation_ratio"]
    ram_allocation_ratio: float = DEFAULT_RATIOS["ram_allocation_ratio"]
    disk_allocation_ratio: float = DEFAULT_RATIOS["disk_allocation_ratio"]
    # Informational here: the tracker already took them off free_ram_mb / free_disk_mb, which
    # is how reserved memory comes to count as used in the filters.
    reserved_host_memory_mb: int = DEFAULT_RESERVED["reserved_host_memory_mb"]
    reserved_host_disk_mb: int = DEFAULT_RESERVED["reserved_host_disk_mb"]
    down_reason: str | None = None
    hypervisor_type: str | None = None
    hypervisor_version: int | None = None  # libvirt style: major * 1,000,000 + minor * 1,000 + micro
    # [arch, hypervisor type, vm mode] triples, as Nova's supported_instances.
    supported_instances: list[list[str]] = field(default_factory=list)
    cpu_info: dict[str, Any] = field(default_factory=dict)
    # [{name, metadata}]: each aggregate keeps its own metadata (group vars would flatten it).
    aggregates: list[dict[str, Any]] = field(default_factory=list)
    availability_zone: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    instances: list[str] = field(default_factory=list)  # instance uuids on the host
    failed_builds: int = 0  # recent failed builds, for BuildFailureWeigher
    # Seconds since the tracker sync last recorded the host (ComputeFilter compares it with
    # service_down_time, as Nova's with a service's last heartbeat); None for live facts.
    sync_age_s: float | None = None
    # Volumes of the instance storage pool a launch can use as its image, and the libvirt
    # networks the host defines (PoolImageFilter, NetworkFilter). Read from the ledger, they
    # hold only the names the request asks for.
    images: list[str] = field(default_factory=list)
    # Volumes of the pool that would be refused as images ({name: why}: a link, a backing file
    # outside the pool...), so that the filter can say why.
    refused_images: dict[str, str] = field(default_factory=dict)
    networks: list[str] = field(default_factory=list)
    # The hypervisor's address, as Nova's host_ip (SimpleCIDRAffinityFilter); None when unknown.
    host_ip: str | None = None
    # One mapping per instance on the host: the properties of the image it was built from
    # (ImagePropertiesWeigher, as Nova reads each instance's image_meta).
    instance_image_properties: list[dict[str, Any]] = field(default_factory=list)
    # NUMA cells, CPU sets and pages as the tracker sync recorded them (host_capabilities.
    # numa_topology with cpu_dedicated_set / cpu_shared_set), and PCI devices with their mdev
    # types (host_devices.pci_device); read from the ledger only for requests that ask for them.
    numa_topology: dict[str, Any] = field(default_factory=dict)
    pci_devices: list[dict[str, Any]] = field(default_factory=list)
    # The exact host resources each instance (or foreign domain) holds here: one assignment per
    # claim (docs/docsite/rst/numa.rst, "Assignments"). Never mutated in place: consuming an
    # instance replaces the list, since copies of a host state share it.
    assignments: list[dict[str, Any]] = field(default_factory=list)
    # Filled by the filters of one scheduling pass, handed to the claim as Nova's `limits`.
    limits: dict[str, float] = field(default_factory=dict)

    # Usage may exceed capacity (orphans, overcommit), so free amounts may be negative.
    _ANY_INTEGER = ("free_ram_mb", "free_disk_mb")
    _NON_NEGATIVE = ("vcpus_total", "vcpus_used", "total_usable_ram_mb", "total_usable_disk_gb",
                     "num_instances", "num_io_ops", "reserved_host_memory_mb",
                     "reserved_host_disk_mb", "failed_builds")
    _RATIOS = tuple(DEFAULT_RATIOS)
    _REQUIRED_KEYS = ("vcpus_total", "vcpus_used", "total_usable_ram_mb", "free_ram_mb",
                      "total_usable_disk_gb", "free_disk_mb")

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not self.host:
            raise SchedulerInputError(
                "hosts[?].host", f"hosts[?].host must be a non-empty string, got {self.host!r}"
            )
        prefix = f"hosts[{self.host}]"
        if not isinstance(self.nodename, str):
            raise SchedulerInputError(
                f"{prefix}.nodename",
                f"{prefix}.nodename must be a string, got {self.nodename!r}",
            )
        if not self.nodename:
            self.nodename = self.host
        check_optional_string(f"{prefix}.uuid", self.uuid)
        check_bool(f"{prefix}.service_up", self.service_up)
        check_bool(f"{prefix}.disabled", self.disabled)
        check_optional_string(f"{prefix}.disabled_reason", self.disabled_reason)
        check_optional_string(f"{prefix}.down_reason", self.down_reason)
        for name in self._ANY_INTEGER:
            check_integer(f"{prefix}.{name}", getattr(self, name))
        for name in self._NON_NEGATIVE:
            check_integer(f"{prefix}.{name}", getattr(self, name), minimum=0)
        for name in self._RATIOS:
            check_positive_number(f"{prefix}.{name}", getattr(self, name))
            # A ratio written as 2 is 2.0: limits are then always floats, whoever computes them.
            setattr(self, name, float(getattr(self, name)))
        check_optional_string(f"{prefix}.hypervisor_type", self.hypervisor_type)
        check_optional_string(f"{prefix}.availability_zone", self.availability_zone)
        if self.hypervisor_version is not None:
            check_integer(f"{prefix}.hypervisor_version", self.hypervisor_version, minimum=0)
        _check_supported_instances(f"{prefix}.supported_instances", self.supported_instances)
        _check_mapping(f"{prefix}.cpu_info", self.cpu_info)
        _check_mapping(f"{prefix}.metrics", self.metrics)
        _check_mapping(f"{prefix}.numa_topology", self.numa_topology)
        self.pci_devices = _check_mappings(f"{prefix}.pci_devices", self.pci_devices)
        self.assignments = _check_mappings(f"{prefix}.assignments", self.assignments)
        self.instances = check_string_list(f"{prefix}.instances", self.instances)
        self.images = check_string_list(f"{prefix}.images", self.images)
        self.networks = check_string_list(f"{prefix}.networks", self.networks)
        _check_mapping(f"{prefix}.refused_images", self.refused_images)
        _check_ip(f"{prefix}.host_ip", self.host_ip)
        self.instance_image_properties = _check_mappings(f"{prefix}.instance_image_properties",
                                                         self.instance_image_properties)
        if self.sync_age_s is not None:
            check_number(f"{prefix}.sync_age_s", self.sync_age_s)
            self.sync_age_s = float(self.sync_age_s)
        self.aggregates = _check_aggregates(f"{prefix}.aggregates", self.aggregates)
        if not isinstance(self.limits, dict):
            raise SchedulerInputError(
                f"{prefix}.limits", f"{prefix}.limits must be a mapping, got {self.limits!r}"
            )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostState:
        """Build from the inventory plugin's `berth_host_state`.

        Keys this engine does not use yet (aggregates, metrics, domains...) are ignored, and so
        is `limits`, which belongs to one scheduling pass, not to the facts.
        """
        if not isinstance(data, Mapping):
            raise SchedulerInputError("hosts[?]", f"a host state must be a mapping, got {data!r}")
        host = data.get("host")
        if not isinstance(host, str) or not host:
            raise SchedulerInputError(
                "hosts[?].host", f"hosts[?].host must be a non-empty string, got {host!r}"
            )
        for key in cls._REQUIRED_KEYS:
            if key not in data:
                raise SchedulerInputError(
                    f"hosts[{host}].{key}", f"hosts[{host}].{key} is required"
                )
        known = {f.name for f in dataclasses.fields(cls)} - {"limits"}
        return cls(**{key: value for key, value in data.items() if key in known})

    def fact(self, path: list[str]) -> Any:
        """The value at a path of names, as Nova's ComputeCapabilitiesFilter and JsonFilter
        walk it: the first name is a host fact, the rest walk mappings (a JSON string, such as
        Nova's cpu_info, is parsed first); None when anything is missing."""
        if path[0] not in FACT_FIELDS:
            return None
        value: Any = getattr(self, path[0])
        for name in path[1:]:
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except (ValueError, RecursionError):  # a hypervisor's text: nested past Python's stack
                    return None
            if not isinstance(value, dict):
                return None
            value = value.get(name)
            if value is None:
                return None
        return value

    def aggregate_values(self, key: str) -> list[str]:
        """The values of metadata `key` across the host's aggregates, as strings, whole, in order.

        Nova's utils.aggregate_values_from_key returns a set; a list in aggregate order keeps
        explanations stable and the minimum is the same. Nova reads whole values this way for
        numbers (ratios, limits, multipliers) and for instance_type.
        """
        values = []
        for aggregate in self.aggregates:
            if key in aggregate["metadata"]:
                value = str(aggregate["metadata"][key])
                if value not in values:
                    values.append(value)
        return values

    def aggregate_metadata(self) -> dict[str, list[str]]:
        """Every metadata key of the host's aggregates with its values split at commas and
        stripped ("az1, az2" is two values), in order, as Nova's
        utils.aggregate_metadata_get_by_host reads them for zones, extra specs, image
        properties and tenants."""
        metadata: dict[str, list[str]] = {}
        for aggregate in self.aggregates:
            for key, value in aggregate["metadata"].items():
                values = metadata.setdefault(key, [])
                values.extend(part for part in split_metadata(value) if part not in values)
        return metadata

    def aggregate_number(self, key: str, default: Any, integer: bool = False) -> Any:
        """The smallest value of `key` across the host's aggregates as a number (an int with
        `integer`), else `default`.

        As Nova's utils.validate_num_values: the minimum wins where aggregates disagree, and
        one value that is not a number makes the whole lookup fall back to `default` (Nova
        logs a warning and uses the configured value).
        """
        values = self.aggregate_values(key)
        if not values:
            return default
        try:
            return min(int(value) if integer else float(value) for value in values)
        except ValueError:
            return default

    def zones(self, default_zone: str) -> list[str]:
        """The host's availability zones: its own field, else its aggregates', else the default.

        The inventory copies its aggregates' zone into the host's own field, so that one is
        split at commas too.
        """
        if self.availability_zone:
            return split_metadata(self.availability_zone)
        return self.aggregate_metadata().get("availability_zone") or [default_zone]

    def consume(self, flavor: Flavor, count: int = 1, volume_disk_mb: int = 0) -> None:
        """Take `count` instances of `flavor` off this host, as Nova's consume_from_request
        does one at a time (capacity.py asks for many at once: the same integers), each with the
        data volumes its build makes here (`volume_disk_mb`, RequestSpec's).

        Swap is not taken off disk, although DiskFilter asks for it: that is Nova's behaviour.
        Every placement is an IO operation (a build), hence num_io_ops.
        """
        self.free_ram_mb -= count * flavor.memory_mb
        self.free_disk_mb -= count * (1024 * (flavor.root_gb + flavor.ephemeral_gb) + volume_disk_mb)
        self.vcpus_used += count * flavor.vcpus
        self.num_instances += count
        self.num_io_ops += count

    def release(self, vcpus: int, memory_mb: int, disk_mb: int) -> None:
        """Give back what one instance holds here (its claim's amounts, as the ledger counts
        them): the host as it would be without that instance. A resize decides and re-checks
        its own host this way, since its claim changes size instead of being added to."""
        self.free_ram_mb += memory_mb
        self.free_disk_mb += disk_mb
        self.vcpus_used -= vcpus
        self.num_instances -= 1

    def copy(self) -> HostState:
        # Only the numbers and limits change while scheduling; the lists and mappings
        # (aggregates, instances, metrics) are read only, so they are shared.
        duplicate = copy.copy(self)
        duplicate.limits = dict(self.limits)
        return duplicate

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def split_metadata(value: Any) -> list[str]:
    """An aggregate metadata value as Nova reads it for a host: "az1, az2" is az1 and az2."""
    parts: list[str] = []
    for part in str(value).split(","):
        part = part.strip()
        if part not in parts:
            parts.append(part)
    return parts


def _check_mapping(field: str, value: Any) -> None:
    if not isinstance(value, Mapping):
        raise SchedulerInputError(field, f"{field} must be a mapping, got {value!r}")


def _check_ip(field: str, value: Any) -> None:
    if value is None:
        return
    try:
        if not isinstance(value, str):
            raise ValueError(value)  # ip_address would take an int
        ipaddress.ip_address(value)
    except ValueError:
        raise SchedulerInputError(
            field, f"{field} must be an IPv4 or IPv6 address or null, got {value!r}") from None


def _check_mappings(field: str, value: Any) -> list[dict[str, Any]]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise SchedulerInputError(field, f"{field} must be a list of mappings, got {value!r}")
    checked = []
    for item in value:
        if not isinstance(item, Mapping) or not all(isinstance(key, str) for key in item):
            raise SchedulerInputError(
                field, f"{field} must be a list of mappings with string keys, got item {item!r}")
        checked.append(dict(item))
    return checked


def _check_supported_instances(field: str, value: Any) -> None:
    if not isinstance(value, (list, tuple)):
        raise SchedulerInputError(
            field, f"{field} must be a list of [arch, hypervisor_type, vm_mode], got {value!r}"
        )
    for item in value:
        if not isinstance(item, (list, tuple)) or not all(isinstance(part, str) for part in item):
            raise SchedulerInputError(
                field, f"{field} must be a list of [arch, hypervisor_type, vm_mode], got {item!r}"
            )


def _check_aggregates(field: str, value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, (list, tuple)):
        raise SchedulerInputError(
            field, f"{field} must be a list of {{name, metadata}}, got {value!r}"
        )
    checked = []
    for item in value:
        if (not isinstance(item, Mapping) or not isinstance(item.get("name"), str)
                or not isinstance(item.get("metadata", {}), Mapping)):
            raise SchedulerInputError(
                field, f"{field} must be a list of {{name, metadata}}, got {item!r}"
            )
        checked.append({"name": item["name"], "metadata": dict(item.get("metadata") or {})})
    return checked
