"""A launch request's identity and flavor, checked before anything is changed."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import urlsplit

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils._guest import Guest, volume_devices
from ansible_collections.berth.fleet.plugins.module_utils._public_keys import public_key
from ansible_collections.berth.fleet.plugins.module_utils._static_network import (
    STATIC_KEYS,
    check_default_routes,
    has_static_config,
    static_config,
)
from ansible_collections.berth.fleet.plugins.module_utils.cpu_topology import best_topology
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.guest_cpu import recorded_cpu
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import DEFAULT_PROJECT_ID

# RFC 1123 label, lower case: instance names become domain names and guest hostnames.
_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def instance_names(name: Any, count: Any) -> list[str]:
    """The names a launch wants: ``<name>-1`` .. ``<name>-<count>``, always indexed.

    Always indexed, even for one instance, so that ``count`` is simply how many are wanted under
    a name: raising it adds instances, a second identical launch finds them all.
    """
    limits.COUNT.check(count)
    if not isinstance(name, str) or not _DNS_LABEL.match(f"{name}-{count}"):
        raise InputError(
            "name",
            f"name must make DNS labels with its index (lower-case letters, digits and '-', "
            f"starting and ending with a letter or digit, at most 63 characters as '<name>-<index>'), got {name!r}",
        )
    return [f"{name}-{index}" for index in range(1, count + 1)]


def dns_label(field: str, value: Any) -> str:
    """One DNS label (instance names become domain names and guest hostnames)."""
    if not isinstance(value, str) or not _DNS_LABEL.match(value):
        raise InputError(field, f"{field} must be a DNS label (lower-case letters, digits and '-', starting "
                         f"and ending with a letter or digit, at most 63 characters), got {value!r}")
    return value


def resolve_flavor(flavor: Any, flavors: Mapping[str, Any]) -> Flavor:
    """A flavor by name from ``flavors``, or an inline dict (with an optional ``name``)."""
    if isinstance(flavor, str):
        if flavor not in flavors:
            known = ", ".join(sorted(flavors)) or "none"
            raise InputError("flavor", f"unknown flavor {flavor!r} (known flavors: {known})")
        return Flavor.from_dict(flavors[flavor], name=flavor)
    if isinstance(flavor, Mapping):
        return Flavor.from_dict(flavor, name=str(flavor.get("name", "custom")))
    raise InputError("flavor", f"flavor must be a flavor name or a dict of sizes, got {type(flavor).__name__}")


# A volume name inside a storage pool: one path component, never "." or "..", no leading dot.
_VOLUME_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._+-]{0,199}$")
IMAGE_FORMATS = ("qcow2", "raw")
NETWORK_TYPES = ("none", "user", "network", "bridge")
# Interface names of Linux bridges and libvirt network names.
_NETWORK_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$")
_METADATA_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def volume_name(field: str, name: Any) -> str:
    """A name of a volume in a storage pool; refuses anything that could leave the pool."""
    if not isinstance(name, str) or not _VOLUME_NAME.match(name) or ".." in name:
        raise InputError(
            field,
            f"{field} must name a volume inside the storage pool (letters, digits, '.', '_', '+', '-'; "
            f"no '/', no '..', not starting with '.'), got {name!r}",
        )
    return name


def image_spec(image: Any) -> dict[str, Any] | None:
    """``image``: a volume name, or {name, format, source | url + checksum, properties}; None for
    no image (empty disk). ``source`` is a file on the controller, ``url`` an HTTP(S) address
    the controller downloads from (berth.fleet's _image_download), with the ``checksum`` it must
    match. ``properties`` are the image's properties as Nova's image metadata has them
    (hw_architecture, img_hv_type, os_distro...), which ImagePropertiesFilter and the
    aggregate isolation filters match and the instance records."""
    if image in (None, ""):
        return None
    if isinstance(image, str):
        image = {"name": image}
    if not isinstance(image, Mapping):
        raise InputError("image", f"image must be a volume name or a dict with name, format, source or url and "
                                  f"checksum, properties, got {image!r}")
    unknown = set(image) - set(_IMAGE_KEYS)
    if unknown:
        raise InputError("image", f"image has unknown keys {sorted(unknown)} (allowed: {', '.join(_IMAGE_KEYS)})")
    properties = image.get("properties") or {}
    if not isinstance(properties, Mapping) or not all(isinstance(key, str) for key in properties):
        raise InputError("image.properties", f"image.properties must be a mapping of property names to values, "
                                             f"got {properties!r}")
    limits.check_mapping_size("image.properties", properties)
    fmt = image.get("format") or "qcow2"
    if fmt not in IMAGE_FORMATS:
        raise InputError("image.format", f"image.format must be one of {', '.join(IMAGE_FORMATS)}, got {fmt!r}")
    source = image.get("source")
    if source is not None and (not isinstance(source, str) or not source.startswith("/")):
        raise InputError("image.source", f"image.source must be an absolute path on the controller, got {source!r}")
    url, checksum = image.get("url"), image.get("checksum")
    if url is not None:
        if source is not None:
            raise InputError("image.url", "image.url and image.source are exclusive: download the image, or "
                                          "upload a file of the controller")
        url = image_url(url)
        if checksum is None:
            raise InputError("image.checksum", "image.checksum is required with image.url "
                                               "(e.g. sha256:<64 hex digits>)")
    if checksum is not None:
        if url is None:
            raise InputError("image.checksum", "image.checksum goes with image.url")
        checksum = "%s:%s" % image_checksum(checksum)
    return {"name": volume_name("image.name", image.get("name")), "format": fmt, "source": source,
            "url": url, "checksum": checksum, "properties": dict(properties)}


_IMAGE_KEYS = ("name", "format", "source", "url", "checksum", "properties")
# Digests strong enough to name an image by (get_url's form, algorithm:hex); MD5 and SHA-1 are not.
CHECKSUM_ALGORITHMS = {"sha256": 64, "sha384": 96, "sha512": 128}
MAX_URL_LENGTH = 2048


def image_url(url: Any) -> str:
    """An HTTP(S) URL without credentials: the URL is shown in results and logs, so a password
    in it would be too (and the errors here never repeat one)."""
    rule = f"image.url must be an http:// or https:// URL with a host, at most {MAX_URL_LENGTH} characters"
    if not isinstance(url, str):
        raise InputError("image.url", f"{rule}, got {type(url).__name__}")
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        parts, host = None, None
    if parts is not None and (parts.username is not None or parts.password is not None):
        raise InputError("image.url", "image.url must not carry a user name or password: it appears in "
                                      "results and logs")
    if parts is None or parts.scheme not in ("http", "https") or not host or len(url) > MAX_URL_LENGTH \
            or any(ord(ch) <= 32 or ord(ch) == 127 for ch in url):
        raise InputError("image.url", f"{rule} and no spaces, got {url[:MAX_URL_LENGTH]!r}")
    return url


def image_checksum(checksum: Any) -> tuple[str, str]:
    """(algorithm, lower-case hex digest) from ``sha256:<hex>`` (sha256, sha384, sha512)."""
    algorithms = ", ".join(CHECKSUM_ALGORITHMS)
    algorithm, _sep, digest = checksum.partition(":") if isinstance(checksum, str) else ("", "", "")
    algorithm, digest = algorithm.strip().lower(), digest.strip().lower()
    if algorithm not in CHECKSUM_ALGORITHMS or len(digest) != CHECKSUM_ALGORITHMS[algorithm] \
            or any(ch not in "0123456789abcdef" for ch in digest):
        raise InputError("image.checksum", f"image.checksum must be <algorithm>:<hex digest> with the algorithm "
                                           f"one of {algorithms}, got {checksum!r}")
    return algorithm, digest


def network_specs(networks: Any) -> list[dict[str, Any]]:
    """``networks``: a list of {type: none|user|network|bridge, name}, each optionally with the
    guest's static settings of that interface (module_utils/_static_network.py: addresses,
    gateway, routes, nameservers, dhcp); [] and [{type: none}] mean none."""
    if networks in (None, ""):
        return []
    if not isinstance(networks, list):
        raise InputError("networks", f"networks must be a list of {{type, name}}, got {networks!r}")
    specs, fields = [], []
    for index, network in enumerate(networks):
        field = f"networks[{index}]"
        if isinstance(network, str):
            network = {"type": network}
        if not isinstance(network, Mapping) or network.get("type") not in NETWORK_TYPES:
            raise InputError(f"{field}.type", f"{field}.type must be one of {', '.join(NETWORK_TYPES)}, got {network!r}")
        unknown = sorted(set(network) - set(_NETWORK_KEYS), key=str)
        if unknown:
            raise InputError(field, f"{field} has unknown keys {unknown} (allowed: {', '.join(_NETWORK_KEYS)})")
        kind = network["type"]
        if kind == "none":
            if has_static_config(network):
                raise InputError(field, f"{field} is type none (no interface): it takes no {', '.join(STATIC_KEYS)}")
            continue
        name = network.get("name")
        if kind in ("network", "bridge"):
            if not isinstance(name, str) or not _NETWORK_NAME.match(name):
                raise InputError(f"{field}.name", f"{field}.name must name the libvirt {kind} "
                                 f"(letters, digits, '.', '_', '-'), got {name!r}")
        specs.append({"type": kind, "name": name or "", **static_config(field, network)})
        fields.append(field)
    check_default_routes(fields, specs)
    return specs


_NETWORK_KEYS = ("type", "name", *STATIC_KEYS)


def metadata_spec(metadata: Any) -> dict[str, str]:
    """User metadata kept in the domain's Berth metadata: string keys and short string values."""
    if metadata in (None, ""):
        return {}
    if not isinstance(metadata, Mapping):
        raise InputError("metadata", f"metadata must be a dict of strings, got {metadata!r}")
    limits.METADATA_ITEMS.check(len(metadata))
    result = {}
    for key, value in metadata.items():
        if isinstance(key, str):
            limits.METADATA_KEY.check(key)
        if not isinstance(key, str) or not _METADATA_KEY.match(key):
            raise InputError("metadata", f"metadata keys must be identifiers (letters, digits, '_', '.', '-'), got {key!r}")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise InputError(f"metadata.{key}", f"metadata.{key} must be a string or number, got {value!r}")
        text = limits.METADATA_VALUE.check(str(value), f"metadata.{key}")
        if any(ord(ch) < 32 and ch not in "\t\n" for ch in text):
            raise InputError(f"metadata.{key}", f"metadata.{key} must be printable text (no control characters)")
        result[key] = text
    return result


def user_data_spec(user_data: Any) -> str | None:
    if user_data in (None, ""):
        return None
    if not isinstance(user_data, str):
        raise InputError("user_data", f"user_data must be text (a cloud-config or a script), got {type(user_data).__name__}")
    return limits.USER_DATA.check(user_data)


def boot_spec(boot: Any) -> dict[str, str]:
    """Direct kernel boot: absolute kernel and initrd paths on the hypervisor, and a command line."""
    boot = boot or {}
    if not isinstance(boot, Mapping):
        raise InputError("boot", f"boot must be a dict with kernel, initrd, cmdline, got {boot!r}")
    spec = {key: str(boot.get(key) or "") for key in ("kernel", "initrd", "cmdline")}
    for key in ("kernel", "initrd"):
        path = spec[key]
        if path and (not path.startswith("/") or ".." in path.split("/")):
            raise InputError(f"boot.{key}", f"boot.{key} must be an absolute path on the hypervisor, got {path!r}")
    return spec


# An HA instance's place in the restart order, highest first (as Proxmox VE's HA priorities).
HA_PRIORITY_MAX = 1000


def ha_priority_option(value: Any) -> int:
    """``ha_priority``: an integer from 0 to HA_PRIORITY_MAX."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= HA_PRIORITY_MAX:
        raise InputError("ha_priority", f"ha_priority must be an integer from 0 to {HA_PRIORITY_MAX} (restarted "
                                        f"highest first), got {value!r}")
    return value


def ha_option(value: Any) -> bool:
    """``ha``: true or false."""
    if not isinstance(value, bool):
        raise InputError("ha", f"ha must be true or false, got {value!r}")
    return value


# How many labels one launch may give: a handful of short names, not a tag store.
LABELS_MAX = 16


def labels_option(value: Any) -> tuple[str, ...]:
    """``labels``: a list of short names (DNS labels) the operator's host rules select
    instances by; duplicates dropped, order kept."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise InputError("labels", f"labels must be a list of short names, got {value!r}")
    if len(value) > LABELS_MAX:
        raise InputError("labels", f"labels holds at most {LABELS_MAX} names, got {len(value)}")
    return tuple(dict.fromkeys(dns_label(f"labels[{index}]", label) for index, label in enumerate(value)))


# ---- volumes made with a launch (Nova's block device mapping of a blank volume) -----------------

_LAUNCH_VOLUME_KEYS = ("name", "size_gb", "delete_on_termination")


@dataclass(frozen=True)
class LaunchVolume:
    """A data volume a launch makes and attaches to each of its instances (Nova's block device
    mapping with source blank and destination volume): ``name`` (a DNS label) makes the volume
    ``<instance>-<name>`` in the ledger; ``delete_on_termination`` says whether deleting the
    instance deletes it too (else it is detached and kept, Nova's default)."""

    name: str
    size_gb: int
    delete_on_termination: bool = False

    def ledger_name(self, instance: str, field: str) -> str:
        """The volume's name in the ledger for ``instance``: one DNS label."""
        name = f"{instance}-{self.name}"
        if not _DNS_LABEL.match(name):
            raise InputError(field, f"{field}: the volume of instance {instance} would be named {name}, which is "
                                    f"not a DNS label of at most 63 characters: give it a shorter name")
        return name


def volumes_option(value: Any) -> tuple[LaunchVolume, ...]:
    """``volumes``: a list of {name, size_gb, delete_on_termination (default false)}, each name
    a DNS label once in the list, each size within VOLUME_SIZE_GB."""
    if value in (None, ""):
        return ()
    if not isinstance(value, list):
        raise InputError("volumes", f"volumes must be a list of {{name, size_gb, delete_on_termination}}, got {value!r}")
    checked: list[LaunchVolume] = []
    for index, item in enumerate(value):
        field = f"volumes[{index}]"
        if not isinstance(item, Mapping):
            raise InputError(field, f"{field} must be a mapping {{name, size_gb, delete_on_termination}}, got {item!r}")
        unknown = sorted(set(item) - set(_LAUNCH_VOLUME_KEYS), key=str)
        if unknown:
            raise InputError(f"{field}.{unknown[0]}", f"{field} has unknown key(s) {', '.join(map(str, unknown))} "
                                                      f"(known: {', '.join(_LAUNCH_VOLUME_KEYS)})")
        name = dns_label(f"{field}.name", item.get("name"))
        if any(volume.name == name for volume in checked):
            raise InputError(f"{field}.name", f"{field}.name {name} is given twice")
        if item.get("size_gb") is None:
            raise InputError(f"{field}.size_gb", f"{field}.size_gb is required (GiB)")
        size_gb = limits.VOLUME_SIZE_GB.check(item["size_gb"], f"{field}.size_gb")
        remove = item.get("delete_on_termination", False)
        if not isinstance(remove, bool):
            raise InputError(f"{field}.delete_on_termination",
                             f"{field}.delete_on_termination must be true or false, got {remove!r}")
        checked.append(LaunchVolume(name, size_gb, remove))
    return tuple(checked)


# ---- the launch request, typed ----------------------------------------------------------------

# The schema of an instance's recorded request (the ledger's instances.request): 1 kept the
# guest's definition inside its build record, with no version; 2 is Request.to_record.
REQUEST_VERSION = 2


@dataclass(frozen=True)
class Image:
    """The image of a root disk: a volume of the pool by ``name``, uploaded where missing from
    ``source`` (a file of the controller) or first downloaded from ``url``, with Nova's image
    ``properties``. ``name`` is None only in a request recorded before schema 2, which did not
    keep it."""

    name: str | None
    format: str = "qcow2"
    source: str | None = None
    url: str | None = None
    checksum: str | None = None
    properties: Mapping[str, Any] = field(default_factory=dict)
    # A run's answer, not the request: this run fetched the URL into the controller's cache.
    downloaded: bool = False

    @classmethod
    def from_option(cls, value: Any) -> Image | None:
        spec = image_spec(value)
        return cls(**spec) if spec is not None else None

    @property
    def digest(self) -> tuple[str, str]:
        """The checksum (checked when the image was) as (algorithm, lower-case hex digest)."""
        algorithm, _colon, digest = (self.checksum or ":").partition(":")
        return algorithm, digest

    @property
    def volume(self) -> str | None:
        """The volume every candidate host's pool must hold already (PoolImageFilter): none when
        the build uploads it where it is missing."""
        return self.name if not self.source else None

    def to_record(self) -> dict[str, Any]:
        # Not the controller's file it was uploaded from: a later run has its own.
        return {"name": self.name, "format": self.format, "url": self.url, "checksum": self.checksum,
                "properties": dict(self.properties)}

    @classmethod
    def from_record(cls, record: Any) -> Image | None:
        if record is None:
            return None
        if not isinstance(record, Mapping):
            raise InputError("image", f"the recorded image must be a mapping, got {record!r}")
        if record.get("name") is None:
            # Schema 1 kept the image's properties only.
            return cls(None, properties=dict(image_spec({"name": "unknown", "properties": record.get("properties")})
                                             ["properties"]))
        return cls.from_option({key: value for key, value in record.items() if value is not None})


@dataclass(frozen=True)
class Network:
    """One interface: its kind (user, network, bridge), the libvirt network or bridge, and the
    guest's static settings of it (addresses, gateway, routes, nameservers, dhcp), checked."""

    type: str
    name: str = ""
    static: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_option(cls, value: Any) -> tuple[Network, ...]:
        """The ``networks`` option (or a recorded list of to_dict's): every interface checked."""
        return tuple(cls(spec["type"], spec["name"], {key: item for key, item in spec.items()
                                                      if key not in ("type", "name")})
                     for spec in network_specs(value))

    def to_dict(self) -> dict[str, Any]:
        """As the domain template, the NoCloud seed and the record read it."""
        return {"type": self.type, "name": self.name, **self.static}


@dataclass(frozen=True)
class Boot:
    """Direct kernel boot: a kernel and initrd of the hypervisor, and their command line."""

    kernel: str = ""
    initrd: str = ""
    cmdline: str = ""

    @classmethod
    def from_option(cls, value: Any) -> Boot:
        return cls(**boot_spec(value))

    def to_dict(self) -> dict[str, str]:
        return {"kernel": self.kernel, "initrd": self.initrd, "cmdline": self.cmdline}


@dataclass(frozen=True)
class Built:
    """What a build made of the request on its host, beside its definition (the ledger keeps it
    as the record's ``build``): whether it made a NoCloud seed, the flavor's ephemeral and swap
    disks, and the guest's CPU (mode, model, features) as that host's settings gave it, which the
    guest keeps wherever it moves."""

    seed: bool
    local_disks: bool = True
    cpu: Mapping[str, Any] | None = None

    def to_record(self) -> dict[str, Any]:
        return {"seed": self.seed, "local_disks": self.local_disks,
                "cpu": None if self.cpu is None else {"mode": self.cpu["mode"], "model": self.cpu["model"],
                                                      "features": [dict(item) for item in self.cpu["features"]]}}

    @classmethod
    def from_record(cls, record: Any) -> Built:
        """``local_disks`` false: built before Berth built them (the instance has none)."""
        if not isinstance(record, Mapping):
            raise InputError("build", f"the recorded build must be a mapping, got {record!r}")
        cpu = recorded_cpu("build.cpu", record.get("cpu"), {})
        return cls(seed=record.get("seed") is True, local_disks=record.get("local_disks") is True,
                   cpu=None if cpu is None else {key: cpu[key] for key in ("mode", "model", "features")})


@dataclass(frozen=True)
class Request:
    """What a launch asked for, checked once where the task's options come in
    (operations/launch.check_request), then handed on whole: the schedule reads its flavor,
    image, networks, zone, group, hints and project; the build defines the domain from it; the
    ledger records it with each instance (``to_record``), and every move, resize or rebuild reads
    it back into this type (``from_record``), never from the domain a hypervisor reports.

    ``boot`` and ``project_id`` are the operator's settings at the launch, recorded with it.
    ``ha`` and ``ha_priority`` (restart the instance elsewhere when its host fails, in this order)
    are the requester's choice like the rest, but not part of the record: the ledger keeps them in
    the instance's own columns, written with its claim, because berth.fleet.instance_ha changes them
    after the launch and an HA run selects and orders instances by them; the record says how to
    re-create the guest, which they do not change.
    ``volumes`` (data volumes made and attached with the launch) are not part of the record
    either: the claim writes them into the ledger's volumes, where every later verb finds them
    like any attached volume, with their ``delete_on_termination``.
    ``topology`` (the guest's sockets, cores and threads) is derived from the flavor and the
    image, and refused when they contradict each other."""

    flavor: Flavor
    image: Image | None = None
    guest: Guest = field(default_factory=lambda: Guest.from_options({}))
    networks: tuple[Network, ...] = ()
    key_name: str | None = None
    public_keys: tuple[str, ...] = ()
    metadata: Mapping[str, str] = field(default_factory=dict)
    # Not recorded: it may hold secrets, and the instance's seed keeps it on its host.
    user_data: str | None = None
    boot: Boot = field(default_factory=Boot)
    availability_zone: str | None = None
    # A ledger group by name, or a group described in full (a "what if" without the ledger).
    server_group: Any = None
    scheduler_hints: Mapping[str, Any] = field(default_factory=dict)
    # Short names the requester gives, which the operator's host rules select instances by
    # (berth.fleet.host_rule); recorded, so every move is held to the same rules.
    labels: tuple[str, ...] = ()
    project_id: str = DEFAULT_PROJECT_ID
    domain_type: str = ""
    autostart: bool = False
    ha: bool = False
    ha_priority: int = 0
    volumes: tuple[LaunchVolume, ...] = ()
    topology: Mapping[str, int] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "topology", best_topology(self.flavor.vcpus, self.flavor.extra_specs,
                                                           self.image_properties))

    @property
    def image_properties(self) -> Mapping[str, Any]:
        return self.image.properties if self.image is not None else {}

    @property
    def image_volume(self) -> str | None:
        return self.image.volume if self.image is not None else None

    @property
    def requested_networks(self) -> list[str]:
        """The libvirt networks every candidate host must define (NetworkFilter)."""
        return sorted({network.name for network in self.networks if network.type == "network"})

    @property
    def wants_seed(self) -> bool:
        """Whether a build makes a NoCloud seed: for the user's data, the SSH keys, the static
        settings of an interface, or the vendor-data that has the guest format and mount its
        ephemeral and swap disks."""
        return (self.user_data is not None or bool(self.public_keys)
                or any(has_static_config(network.static) for network in self.networks)
                or bool(self.flavor.ephemeral_gb or self.flavor.swap))

    @property
    def volume_disk_mb(self) -> int:
        """The disk each instance's launch volumes take on its host (DiskFilter and the claim
        count it beside the flavor's)."""
        return 1024 * sum(volume.size_gb for volume in self.volumes)

    def volume_rows(self, instance: str) -> list[dict[str, Any]]:
        """The launch volumes of ``instance`` as the ledger records them: name, size_gb,
        delete_on_termination and the device each is attached on (the first ones a data volume
        may take on the guest's disk bus, in order)."""
        devices = volume_devices(self.guest.values["disk_bus"])
        return [{"name": volume.ledger_name(instance, f"volumes[{index}].name"), "size_gb": volume.size_gb,
                 "delete_on_termination": volume.delete_on_termination, "target": devices[index]}
                for index, volume in enumerate(self.volumes)]

    def resized(self, flavor: Flavor) -> Request:
        """The same request with another flavor (a resize): its topology derived again."""
        return dataclasses.replace(self, flavor=flavor)

    def to_record(self) -> dict[str, Any]:
        return {
            "version": REQUEST_VERSION, "flavor": self.flavor.to_dict(),
            "image": self.image.to_record() if self.image is not None else None,
            "guest": self.guest.to_record(), "networks": [network.to_dict() for network in self.networks],
            "key_name": self.key_name, "public_keys": list(self.public_keys), "metadata": dict(self.metadata),
            "boot": self.boot.to_dict(), "availability_zone": self.availability_zone,
            "server_group": self.server_group, "scheduler_hints": dict(self.scheduler_hints),
            "labels": list(self.labels),
            "project_id": self.project_id, "domain_type": self.domain_type, "autostart": self.autostart,
        }

    @classmethod
    def from_record(cls, record: Any) -> tuple[Request, Built | None]:
        """An instance's recorded request, and what its build made (None before it was built),
        each part checked as a launch checks it: the ledger is not trusted. A schema 1 record is
        read as the schema 2 it becomes; one that cannot be (without a build record) or of a
        schema this Berth does not know is refused, naming its version (RecordError)."""
        if not isinstance(record, Mapping):
            raise RecordError(None, f"it is not a mapping: {record!r}")
        version = record.get("version", 1)
        if version == 1:
            record = _upgraded(record)
        elif version != REQUEST_VERSION:
            raise RecordError(version, f"this Berth reads schema {REQUEST_VERSION} and 1 (a newer Berth wrote it?)")
        flavor = record.get("flavor")
        if not isinstance(flavor, Mapping):
            raise RecordError(REQUEST_VERSION, "it has no flavor")
        keys = record.get("public_keys") or []
        if not isinstance(keys, list):
            raise InputError("public_keys", f"the recorded public_keys must be a list, got {keys!r}")
        image = Image.from_record(record.get("image"))
        request = cls(
            flavor=Flavor.from_dict(flavor), image=image,
            guest=Guest.from_record(record.get("guest") or {}),
            networks=Network.from_option(record.get("networks")),
            key_name=record.get("key_name") if isinstance(record.get("key_name"), str) else None,
            public_keys=tuple(public_key(f"public_keys[{index}]", key) for index, key in enumerate(keys)),
            metadata=metadata_spec(record.get("metadata")), boot=Boot.from_option(record.get("boot")),
            availability_zone=_optional_name("availability_zone", record.get("availability_zone")),
            server_group=record.get("server_group"),
            scheduler_hints=limits.check_mapping_size("scheduler_hints", record.get("scheduler_hints") or {}),
            # Records written before labels were read have none.
            labels=labels_option(record.get("labels")),
            project_id=_optional_name("project_id", record.get("project_id")) or DEFAULT_PROJECT_ID,
            domain_type=domain_type_option(record.get("domain_type")),
            autostart=record.get("autostart") is True)
        built = record.get("build")
        return request, (Built.from_record(built) if built is not None else None)


class RecordError(InputError):
    """An instance's recorded request that this Berth cannot read; names its schema version."""

    def __init__(self, version: Any, why: str) -> None:
        said = f"schema {version}" if version is not None else "no schema"
        super().__init__("request", f"the recorded request ({said}) cannot be read: {why}")
        self.version = version


def _upgraded(record: Mapping[str, Any]) -> dict[str, Any]:
    """A schema 1 record as schema 2: its build record held the guest's definition (metadata,
    networks, boot, guest options, domain type); its image was known by its properties only."""
    built = record.get("build")
    if not isinstance(built, Mapping):
        raise RecordError(1, "it has no build record (launched before Berth kept them), so Berth does not know "
                             "what the instance was defined from")
    properties = record.get("image_properties") or {}
    cpu = built.get("cpu")
    return {
        "version": REQUEST_VERSION, "flavor": record.get("flavor"),
        "image": {"name": None, "properties": properties} if properties else None,
        "guest": built.get("guest") or {}, "networks": built.get("networks"), "metadata": built.get("metadata"),
        "boot": built.get("boot"), "availability_zone": record.get("availability_zone"),
        "server_group": record.get("server_group"), "scheduler_hints": record.get("scheduler_hints"),
        "project_id": record.get("project_id"), "domain_type": built.get("domain_type") or "",
        # Schema 1 kept the CPU's topology properties with it; schema 2 has them from the image.
        "build": {"seed": built.get("seed"), "local_disks": built.get("local_disks"),
                  "cpu": {key: value for key, value in cpu.items() if key != "image_properties"}
                  if isinstance(cpu, Mapping) else cpu},
    }


DOMAIN_TYPES = ("", "kvm", "qemu")


def domain_type_option(value: Any) -> str:
    """kvm, qemu, or empty: kvm where the host offers it, else qemu."""
    value = value or ""
    if value not in DOMAIN_TYPES:
        raise InputError("domain_type", f"domain_type must be kvm, qemu or empty, got {value!r}")
    return value


def _optional_name(field_name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InputError(field_name, f"{field_name} must be a non-empty string, got {value!r}")
    return limits.check_name(field_name, value)
