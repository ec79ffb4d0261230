"""A launch request's identity and flavor, checked before anything is changed."""

from __future__ import annotations

import re
from typing import Any, Mapping
from urllib.parse import urlsplit

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils._static_network import (
    STATIC_KEYS,
    check_default_routes,
    has_static_config,
    static_config,
)
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor

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
