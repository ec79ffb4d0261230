"""The placement request (Nova's RequestSpec): what to place and how, checked once.

The filters and weighers read it, so it sits below them and knows them by name only: the
names a request may use are those of names.py, from which each class and registry.py take
theirs too.
Beside it, what a filter parses as the request's checks do: retry_hosts as [host, nodename]
pairs, and the network the build_near_host_ip and cidr hints describe.
"""
from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.image_meta import (
    VERSION_KEY,
    canonical_image_properties,
    parse_version_requirement,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_rules import HostRule, host_rule_from_dict
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.json_query import parse_query
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    AVAILABILITY_ZONE_FILTER,
    COMPUTE_CAPABILITIES_FILTER,
    COMPUTE_FILTER,
    CORE_FILTER,
    DIFFERENT_HOST_FILTER,
    DISK_FILTER,
    FILTER_NAMES,
    HOST_RULE_FILTER,
    IMAGE_PROPERTIES_FILTER,
    JSON_FILTER,
    NETWORK_FILTER,
    POOL_IMAGE_FILTER,
    RAM_FILTER,
    SAME_HOST_FILTER,
    SERVER_GROUP_AFFINITY_FILTER,
    SERVER_GROUP_ANTI_AFFINITY_FILTER,
    SIMPLE_CIDR_AFFINITY_FILTER,
    WEIGHER_MULTIPLIER_OPTIONS,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.pci import (
    PCIRequest,
    pci_request,
    request_aliases,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.numa import NUMARequest, numa_request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.server_group import (
    ServerGroup,
    server_group_from_dict,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.validation import (
    check_bool,
    check_integer,
    check_names,
    check_number,
    check_optional_string,
    check_string_list,
    is_integer,
    is_number,
)

# Newton's default list with CoreFilter added (retries use alternates, so no
# RetryFilter), Berth's two for what a libvirt build needs on the host (its image volume,
# its networks), which do nothing unless the launch names them, and HostRuleFilter, which does
# nothing until the operator writes a hard host rule (so that one written takes effect); every
# weigher, with Nova's default multipliers.
DEFAULT_FILTERS = [
    COMPUTE_FILTER, AVAILABILITY_ZONE_FILTER, RAM_FILTER, CORE_FILTER, DISK_FILTER,
    COMPUTE_CAPABILITIES_FILTER, IMAGE_PROPERTIES_FILTER, SERVER_GROUP_ANTI_AFFINITY_FILTER,
    SERVER_GROUP_AFFINITY_FILTER, POOL_IMAGE_FILTER, NETWORK_FILTER, HOST_RULE_FILTER,
]
DEFAULT_WEIGHERS = list(WEIGHER_MULTIPLIER_OPTIONS)

DRIVERS = ("filter_scheduler", "chance")
EXPLAIN_MODES = ("auto", "full", "compact")
ENGINES = ("auto", "plain", "vectorized")
# Each scheduler hint and the filter that reads it: without that filter in enabled_filters the
# hint cannot act (RequestSpec.idle_hints). `group` has none: it only names the request's
# server group (it must match server_group), whose policy the group's own filters, weighers
# and the claim hold.
HINT_FILTERS = {
    "same_host": SAME_HOST_FILTER,
    "different_host": DIFFERENT_HOST_FILTER,
    "query": JSON_FILTER,
    "group": None,
    "build_near_host_ip": SIMPLE_CIDR_AFFINITY_FILTER,
    "cidr": SIMPLE_CIDR_AFFINITY_FILTER,
}
HINT_KEYS = tuple(HINT_FILTERS)
# The project a launch belongs to when it names none: one team, one project. Recorded on the
# instance; AggregateMultiTenancyIsolation compares it with its aggregates' filter_tenant_id.
DEFAULT_PROJECT_ID = "default"


@dataclass(frozen=True)
class IdleHint:
    """A scheduler hint a request gives that nothing will read: ``filter`` is the filter that
    would read it and that enabled_filters lacks, or None for cidr given without
    build_near_host_ip (a prefix of no address)."""

    hint: str
    filter: str | None

    @property
    def field(self) -> str:
        return f"scheduler_hints.{self.hint}"

    def __str__(self) -> str:
        if self.filter is None:
            return f"{self.field} needs scheduler_hints.build_near_host_ip, the address it is a prefix of"
        return f"{self.field} needs {self.filter}, which enabled_filters lacks"


@dataclass
class RequestSpec:
    """One placement request: `count` instances of `flavor`, with Nova's option names."""

    flavor: Flavor
    count: int = 1
    enabled_filters: list[str] = field(default_factory=lambda: list(DEFAULT_FILTERS))
    weighers: list[str] = field(default_factory=lambda: list(DEFAULT_WEIGHERS))
    # Option name (ram_weight_multiplier...) → value; a weigher not named here uses its default.
    weight_multipliers: dict[str, float] = field(default_factory=dict)
    host_subset_size: int = 1
    seed: int | None = None
    max_attempts: int = 3
    ignore_hosts: list[str] = field(default_factory=list)
    force_hosts: list[str] = field(default_factory=list)
    force_nodes: list[str] = field(default_factory=list)
    driver: str = "filter_scheduler"
    availability_zone: str | None = None
    default_availability_zone: str = "nova"
    image_id: str | None = None
    image_properties: dict[str, Any] = field(default_factory=dict)
    scheduler_hints: dict[str, Any] = field(default_factory=dict)
    server_group: ServerGroup | None = None
    # The operator's host rules that select this request's instances (host_rules.rules_for):
    # HostRuleFilter reads the hard ones, HostRuleWeigher the soft ones.
    host_rules: list[HostRule] = field(default_factory=list)
    # Nova's project_id (AggregateMultiTenancyIsolation).
    project_id: str = DEFAULT_PROJECT_ID
    # [host, nodename] pairs this instance was already tried on (a host name alone: all its
    # nodes), for RetryFilter.
    retry_hosts: list[Any] = field(default_factory=list)
    max_instances_per_host: int = 50
    max_io_ops_per_host: int = 8
    isolated_hosts: list[str] = field(default_factory=list)
    isolated_images: list[str] = field(default_factory=list)
    restrict_isolated_hosts_to_isolated_images: bool = True
    # ["name=ratio", ...] as Nova's [metrics] weight_setting, or (name, ratio) pairs.
    metrics_weight_setting: list[Any] = field(default_factory=list)
    metrics_weight_of_unavailable: float = -10000.0
    # Nova's [metrics] required: a candidate without a weighed metric fails the request.
    metrics_required: bool = True
    # ["name=ratio", ...] as Nova's image_props_weight_setting (ImagePropertiesWeigher).
    image_props_weight_setting: list[Any] = field(default_factory=list)
    # Nova's options of AggregateImagePropertiesIsolation.
    aggregate_image_properties_isolation_namespace: str | None = None
    aggregate_image_properties_isolation_separator: str = "."
    explain: str = "auto"
    engine: str = "auto"
    # Nova's service_down_time: a host whose last tracker sync is older counts as down.
    service_down_time: int = 600
    # What the build needs on the host (Berth's PoolImageFilter and NetworkFilter): the image
    # volume its storage pool must hold (None when the launch uploads it where missing), and
    # the libvirt networks it must define.
    image_volume: str | None = None
    requested_networks: list[str] = field(default_factory=list)
    # The data volumes each instance's build makes on its host's storage pool with it (a launch's
    # volumes), in MB: DiskFilter asks for them beside the flavor's disks, and consuming takes them.
    volume_disk_mb: int = 0
    # The operator's PCI aliases (Nova's [pci] alias, pci.check_aliases) and mediated device
    # types (Nova's [devices] enabled_mdev_types; empty: any type a host offers). Operator
    # configuration, never a requester's.
    pci_alias: list[Any] = field(default_factory=list)
    enabled_mdev_types: list[str] = field(default_factory=list)
    # The devices the flavor and image ask for with those (None: none), computed from them.
    pci: PCIRequest | None = field(init=False)
    # What the flavor's hw:* extra specs and the image's hw_* properties ask of NUMA cells, CPUs
    # and pages (numa.py), None when nothing; derived, never given, and checked here so that a bad
    # combination is refused before anything is claimed.
    numa: NUMARequest | None = field(init=False, default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.flavor, Flavor):
            raise SchedulerInputError(
                "flavor", f"flavor must be a Flavor or a mapping, got {self.flavor!r}"
            )
        check_integer("count", self.count, minimum=1)
        check_integer("host_subset_size", self.host_subset_size, minimum=1)
        check_integer("max_attempts", self.max_attempts, minimum=1)
        if self.seed is not None and not is_integer(self.seed):
            raise SchedulerInputError("seed", f"seed must be an integer or null, got {self.seed!r}")
        self.enabled_filters = check_names("enabled_filters", self.enabled_filters, list(FILTER_NAMES),
                                           "filter")
        self.weighers = check_names("weighers", self.weighers, list(WEIGHER_MULTIPLIER_OPTIONS), "weigher")
        self.weight_multipliers = _check_multipliers(self.weight_multipliers)
        self.ignore_hosts = check_string_list("ignore_hosts", self.ignore_hosts)
        self.force_hosts = check_string_list("force_hosts", self.force_hosts)
        self.force_nodes = check_string_list("force_nodes", self.force_nodes)
        for name, allowed in (("driver", DRIVERS), ("explain", EXPLAIN_MODES),
                              ("engine", ENGINES)):
            if getattr(self, name) not in allowed:
                raise SchedulerInputError(
                    name, f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}"
                )
        for name in ("availability_zone", "image_id", "image_volume"):
            check_optional_string(name, getattr(self, name))
        check_integer("service_down_time", self.service_down_time, minimum=1)
        check_integer("volume_disk_mb", self.volume_disk_mb, minimum=0)
        self.requested_networks = check_string_list("requested_networks", self.requested_networks)
        if not isinstance(self.default_availability_zone, str) or not self.default_availability_zone:
            raise SchedulerInputError("default_availability_zone",
                                      "default_availability_zone must be a non-empty string")
        if not isinstance(self.image_properties, Mapping):
            raise SchedulerInputError(
                "image_properties",
                f"image_properties must be a mapping, got {self.image_properties!r}")
        self.image_properties = canonical_image_properties(dict(self.image_properties))
        self.numa = numa_request(self.flavor, self.image_properties)
        requirement = self.image_properties.get(VERSION_KEY)
        if requirement:
            try:
                parse_version_requirement(requirement)
            except ValueError as exc:
                raise SchedulerInputError(f"image_properties.{VERSION_KEY}", str(exc)) from None
        self.scheduler_hints = self._check_hints(self.scheduler_hints)
        if self.server_group is not None and not isinstance(self.server_group, ServerGroup):
            self.server_group = server_group_from_dict(self.server_group)
        group_hint = self.scheduler_hints.get("group")
        if group_hint is not None and (self.server_group is None
                                       or group_hint != self.server_group.name):
            raise SchedulerInputError(
                "scheduler_hints.group",
                f"scheduler_hints.group names server group {group_hint!r}, but server_group "
                f"describes {self.server_group.name if self.server_group else 'no group'}",
            )
        if not isinstance(self.host_rules, (list, tuple)):
            raise SchedulerInputError("host_rules", f"host_rules must be a list, got {self.host_rules!r}")
        self.host_rules = [host_rule_from_dict(rule, f"host_rules[{index}]")
                           for index, rule in enumerate(self.host_rules)]
        self.retry_hosts = check_retry_hosts(self.retry_hosts)
        if not isinstance(self.project_id, str) or not self.project_id:
            raise SchedulerInputError("project_id", f"project_id must be a non-empty string, "
                                                    f"got {self.project_id!r}")
        check_integer("max_instances_per_host", self.max_instances_per_host, minimum=0)
        check_integer("max_io_ops_per_host", self.max_io_ops_per_host, minimum=0)
        self.isolated_hosts = check_string_list("isolated_hosts", self.isolated_hosts)
        self.isolated_images = check_string_list("isolated_images", self.isolated_images)
        check_bool("restrict_isolated_hosts_to_isolated_images",
                   self.restrict_isolated_hosts_to_isolated_images)
        self.metrics_weight_setting = _check_ratio_setting("metrics_weight_setting",
                                                           self.metrics_weight_setting)
        check_number("metrics_weight_of_unavailable", self.metrics_weight_of_unavailable)
        check_bool("metrics_required", self.metrics_required)
        self.image_props_weight_setting = _check_ratio_setting("image_props_weight_setting",
                                                               self.image_props_weight_setting)
        check_optional_string("aggregate_image_properties_isolation_namespace",
                              self.aggregate_image_properties_isolation_namespace)
        if not isinstance(self.aggregate_image_properties_isolation_separator, str):
            raise SchedulerInputError(
                "aggregate_image_properties_isolation_separator",
                f"aggregate_image_properties_isolation_separator must be a string, got "
                f"{self.aggregate_image_properties_isolation_separator!r}")
        self.pci_alias = request_aliases(self.pci_alias, self.flavor.extra_specs)
        self.enabled_mdev_types = check_string_list("enabled_mdev_types", self.enabled_mdev_types)
        self.pci = pci_request(self.flavor, self.image_properties, self.pci_alias, self.enabled_mdev_types)

    @staticmethod
    def _check_hints(hints: Any) -> dict[str, Any]:
        if not isinstance(hints, Mapping):
            raise SchedulerInputError("scheduler_hints",
                                      f"scheduler_hints must be a mapping, got {hints!r}")
        checked: dict[str, Any] = {}
        for key, value in hints.items():
            if key not in HINT_KEYS:
                raise SchedulerInputError(
                    f"scheduler_hints.{key}",
                    f"scheduler_hints has an unknown hint {key!r}; allowed: {', '.join(HINT_KEYS)}",
                )
            if value is None:
                continue
            if key in ("same_host", "different_host"):
                # Nova takes one uuid or a list of them.
                value = [value] if isinstance(value, str) else value
                checked[key] = check_string_list(f"scheduler_hints.{key}", value)
            elif key == "query":
                checked[key] = parse_query(value)
            elif key in ("build_near_host_ip", "cidr"):
                checked[key] = value
            else:
                check_optional_string("scheduler_hints.group", value)
                checked[key] = value
        # Checked together: the address and the prefix make one network.
        affinity_network(checked)
        return checked

    def idle_hints(self) -> list[IdleHint]:
        """The hints this request gives that cannot act, in HINT_KEYS order: each whose filter
        enabled_filters lacks, and cidr without build_near_host_ip. Nova ignores such hints
        without a word; a launch refuses them (a requester who asks for different_host expects
        it to hold) and a move warns (an instance that exists must stay movable). A hint given
        empty asks for nothing and is not idle."""
        idle = []
        for hint, reader in HINT_FILTERS.items():
            if reader is None or not self.scheduler_hints.get(hint):
                continue
            if hint == "cidr" and not self.scheduler_hints.get("build_near_host_ip"):
                idle.append(IdleHint(hint, None))
            elif reader not in self.enabled_filters:
                idle.append(IdleHint(hint, reader))
        return idle

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RequestSpec:
        """Build from plain data (module arguments); `flavor` may be a mapping."""
        if not isinstance(data, Mapping):
            raise SchedulerInputError("request", f"a request must be a mapping, got {data!r}")
        # Not the computed fields (numa, pci): a request's to_dict carries them, its options remake them.
        allowed = [f.name for f in dataclasses.fields(cls) if f.init]
        data = {key: value for key, value in data.items()
                if key in allowed or key not in _COMPUTED_FIELDS}
        for key in data:
            if key not in allowed:
                raise SchedulerInputError(
                    key, f"unknown request option {key!r}; allowed: {', '.join(allowed)}"
                )
        if data.get("flavor") is None:
            raise SchedulerInputError("flavor", "flavor is required")
        values = dict(data)
        if isinstance(values["flavor"], Mapping):
            values["flavor"] = Flavor.from_dict(values["flavor"])
        # An explicit null means "not given", as Ansible passes unset options.
        return cls(**{key: value for key, value in values.items() if value is not None})


_COMPUTED_FIELDS = ("pci", "numa")


def _check_ratio_setting(field_name: str, value: Any) -> list[tuple[str, float]]:
    """Nova's "name=ratio" list options (metrics and image properties weight settings)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise SchedulerInputError(field_name, f"{field_name} must be a list of 'name=ratio', "
                                              f"got {value!r}")
    pairs = []
    for item in value:
        if isinstance(item, str):
            name, sep, ratio_text = item.partition("=")
            try:
                ratio = float(ratio_text) if sep else None
            except ValueError:
                ratio = None
        elif isinstance(item, (list, tuple)) and len(item) == 2:
            name, ratio = item
        else:
            name, ratio = "", None
        if not isinstance(name, str) or not name.strip() or not is_number(ratio):
            raise SchedulerInputError(
                field_name, f"{field_name} items must look like 'name=1.0', got {item!r}")
        pairs.append((name.strip(), float(ratio)))  # type: ignore[arg-type]
    return pairs


def _check_multipliers(value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise SchedulerInputError(
            "weight_multipliers", f"weight_multipliers must be a mapping, got {value!r}"
        )
    allowed = sorted(WEIGHER_MULTIPLIER_OPTIONS.values())
    for option, multiplier in value.items():
        if option not in allowed:
            raise SchedulerInputError(
                "weight_multipliers",
                f"weight_multipliers names an unknown option {option!r}; "
                f"allowed: {', '.join(allowed)}",
            )
        check_number(f"weight_multipliers.{option}", multiplier)
    return dict(value)


def check_retry_hosts(value: Any) -> list[list[Any]]:
    """The retry_hosts option as [host, nodename] pairs, Nova's form; a bare host name, or a
    null nodename, is Berth's shorthand for every node of that host, kept as [host, None]."""
    field = "retry_hosts"
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise SchedulerInputError(field, f"{field} must be a list of [host, nodename] pairs, "
                                         f"got {value!r}")
    pairs: list[list[Any]] = []
    for item in value:
        if isinstance(item, str) and item:
            pairs.append([item, None])
        elif (isinstance(item, (list, tuple)) and len(item) == 2
              and isinstance(item[0], str) and item[0]
              and (item[1] is None or isinstance(item[1], str) and item[1])):
            pairs.append([item[0], item[1]])
        else:
            raise SchedulerInputError(
                field, f"{field} items must be [host, nodename] pairs (or a host name for all "
                       f"its nodes), got {item!r}")
    return pairs


# Nova's default prefix when the request gives build_near_host_ip without cidr.
DEFAULT_CIDR = "/24"


def affinity_network(hints: dict[str, Any]) -> Any:
    """The network the build_near_host_ip and cidr hints describe ("10.0.0.7" and "/24" is
    10.0.0.0/24, host bits ignored as Nova's netaddr does), or None without build_near_host_ip;
    a bad address or prefix is refused, naming the hint."""
    address = hints.get("build_near_host_ip")
    if not address:
        return None
    cidr = hints.get("cidr") or DEFAULT_CIDR
    if not isinstance(address, str):
        raise SchedulerInputError("scheduler_hints.build_near_host_ip",
                                  f"scheduler_hints.build_near_host_ip must be an IP address, "
                                  f"got {address!r}")
    if not isinstance(cidr, str) or not cidr.startswith("/"):
        raise SchedulerInputError("scheduler_hints.cidr",
                                  f"scheduler_hints.cidr must be a prefix length such as '/24', "
                                  f"got {cidr!r}")
    try:
        ipaddress.ip_address(address)
    except ValueError:
        raise SchedulerInputError("scheduler_hints.build_near_host_ip",
                                  f"scheduler_hints.build_near_host_ip must be an IP address, "
                                  f"got {address!r}") from None
    try:
        return ipaddress.ip_network(address + cidr, strict=False)
    except ValueError:
        raise SchedulerInputError("scheduler_hints.cidr",
                                  f"scheduler_hints.cidr {cidr!r} is no prefix length for "
                                  f"{address}") from None
