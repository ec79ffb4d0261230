"""Hypervisor facts turned into host states (docs/docsite/rst/design.rst), and the checks of an
inventory source's settings. Pure: host_fetch talks to the hypervisors and returns their raw
facts or why they did not answer (the inventory plugin caches that); ``host_state`` and
``down_state`` turn those into host states with the source's settings and aggregates.

The host state computed here is the hypervisor's own account (every domain it runs counts as
usage). The schedule action replaces the usage with the ledger's tracker view before deciding.

Python 3.9: the hypervisor_facts module ships this file to hypervisors.
"""

from __future__ import annotations

import ipaddress
import re
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils._untrusted_text import failure_reason
from ansible_collections.berth.fleet.plugins.module_utils.cpu_sets import CPU_SET_SETTINGS, check_cpu_sets, host_cpu_sets
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.guest_cpu import CPU_SETTINGS, cpu_settings, merged_settings
from ansible_collections.berth.fleet.plugins.module_utils.huge_pages import (
    RESERVED_PAGES_SETTING,
    host_reserved_pages,
    parse_reserved_huge_pages,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.free_amounts import free_amounts
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
    DEFAULT_RATIOS,
    DEFAULT_RESERVED,
)
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import is_data_volume, is_instance_volume

HOST_SETTINGS = tuple(DEFAULT_RATIOS) + tuple(DEFAULT_RESERVED)
# Nova's default_availability_zone.
DEFAULT_AVAILABILITY_ZONE = "nova"
SSH_TRANSPORTS = ("ssh", "libssh", "libssh2")
# Query parameters by which a URI turns host key checking off, per transport family.
_NO_VERIFY = {"ssh": ("no_verify", "1"), "libssh": ("known_hosts_verify", "ignore")}
_GROUP_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
UNKNOWN = None  # a value the hypervisor's driver cannot report (the test driver's free memory)


# ---- the inventory source ------------------------------------------------------------------

def validate_hypervisors(hypervisors: Any, uri_template: Optional[str] = None,
                         fleet_cpu: Optional[Mapping[str, Any]] = None) -> Dict[str, Dict[str, Any]]:
    """Check the ``hypervisors`` option of an inventory source; errors name the field.

    A hypervisor without ``uri`` takes ``uri_template`` with ``{name}`` replaced by its name, and
    without CPU settings of its own the source's (``fleet_cpu``: cpu_mode, cpu_models,
    cpu_model_extra_flags; and apart from them cpu_dedicated_set, cpu_shared_set; and
    reserved_huge_pages), as a compute without them in its nova.conf has the deployment's.
    """
    if not isinstance(hypervisors, Mapping) or not hypervisors:
        raise InputError("hypervisors", "hypervisors must be a non-empty mapping of name to settings")
    fleet_cpu = fleet_cpu or {}
    cpu_settings("", fleet_cpu)
    check_cpu_sets("", fleet_cpu)
    parse_reserved_huge_pages(RESERVED_PAGES_SETTING, fleet_cpu.get(RESERVED_PAGES_SETTING))
    allowed_keys = ("uri", "host_ip", *HOST_SETTINGS, *CPU_SETTINGS, *CPU_SET_SETTINGS, RESERVED_PAGES_SETTING)
    checked = {}
    for name, settings in hypervisors.items():
        field = f"hypervisors.{name}"
        if settings is None and uri_template:
            settings = {}
        if not isinstance(settings, Mapping):
            raise InputError(field, f"{field} must be a mapping with at least 'uri' (or set uri_template)")
        unknown = sorted(set(settings) - set(allowed_keys))
        if unknown:
            allowed = ", ".join(allowed_keys)
            raise InputError(f"{field}.{unknown[0]}", f"{field}: unknown setting {unknown[0]!r} (allowed: {allowed})")
        settings = dict(settings)
        if settings.get("uri") is None and uri_template:
            settings["uri"] = uri_template.replace("{name}", str(name))
        check_uri(f"{field}.uri", settings.get("uri"))
        if settings.get("host_ip") is not None and ip_address_text(settings["host_ip"]) is None:
            raise InputError(f"{field}.host_ip", f"{field}.host_ip must be an IP address, got {settings['host_ip']!r}")
        for key in DEFAULT_RATIOS:
            _check_ratio(f"{field}.{key}", settings.get(key))
        for key in DEFAULT_RESERVED:
            value = settings.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise InputError(f"{field}.{key}", f"{field}.{key} must be a non-negative integer, got {value!r}")
        cpu_settings(field, settings)
        check_cpu_sets(field, settings)
        own = hypervisors[name] or {}
        settings = {key: value for key, value in settings.items() if key not in (*CPU_SETTINGS, *CPU_SET_SETTINGS)}
        settings.update(merged_settings(fleet_cpu, own))
        # The two sets belong together (they must not overlap): a host that sets either takes
        # neither of the source's.
        sets_from = own if any(own.get(key) is not None for key in CPU_SET_SETTINGS) else fleet_cpu
        settings.update({key: sets_from[key] for key in CPU_SET_SETTINGS if sets_from.get(key) is not None})
        # As written (checked here, parsed where the host's cells are known): the host's own
        # replaces the source's.
        pages = own.get(RESERVED_PAGES_SETTING)
        parse_reserved_huge_pages(f"{field}.{RESERVED_PAGES_SETTING}", pages)
        if pages is None and fleet_cpu.get(RESERVED_PAGES_SETTING) is not None:
            settings[RESERVED_PAGES_SETTING] = fleet_cpu[RESERVED_PAGES_SETTING]
        checked[str(name)] = settings
    return checked


def ip_address_text(value: Any) -> Optional[str]:
    """``value`` as an IP address in its usual text form, or None if it is none."""
    try:
        return str(ipaddress.ip_address(value)) if isinstance(value, str) else None
    except ValueError:
        return None


def check_uri(field: str, uri: Any) -> None:
    """A libvirt URI that parses, and carries no password (it would be shown in hostvars)."""
    if not isinstance(uri, str) or "://" not in uri:
        raise InputError(field, f"{field} must be a libvirt URI such as qemu:///system or qemu+ssh://host/system")
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        raise InputError(field, f"{field} does not parse as a libvirt URI: {exc}") from None
    if not parts.scheme:
        raise InputError(field, f"{field} must be a libvirt URI such as qemu:///system")
    if parts.password is not None:
        # The message must not repeat the URI: it holds the password.
        raise InputError(
            field,
            f"{field} holds a password; it would appear in the inventory. Give it through the "
            "password option or $BERTH_LIBVIRT_PASSWORD instead",
        )


def _check_ratio(field: str, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
        raise InputError(field, f"{field} must be a positive number, got {value!r}")


def validate_aggregates(aggregates: Any, hosts: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """Check the ``aggregates`` option: {name: {hosts: [...], metadata: {...}}}.

    Metadata values are strings or numbers, as Nova's; ratio keys must be positive numbers;
    a host may be in several aggregates but in one availability zone only (Nova's rule).
    """
    if aggregates is None:
        return {}
    if not isinstance(aggregates, Mapping):
        raise InputError("aggregates", "aggregates must be a mapping of aggregate name to {hosts, metadata}")
    checked: Dict[str, Dict[str, Any]] = {}
    zone_of: Dict[str, str] = {}
    for name, aggregate in aggregates.items():
        field = f"aggregates.{name}"
        if not isinstance(name, str) or not _GROUP_NAME.match(name):
            raise InputError(field, f"{field}: an aggregate name becomes a group: letters, digits and _ only, not starting with a digit")
        if not isinstance(aggregate, Mapping):
            raise InputError(field, f"{field} must be a mapping with hosts and metadata")
        unknown = sorted(set(aggregate) - {"hosts", "metadata"})
        if unknown:
            raise InputError(f"{field}.{unknown[0]}", f"{field}: unknown key {unknown[0]!r} (allowed: hosts, metadata)")
        members = aggregate.get("hosts") or []
        if not isinstance(members, list) or not all(isinstance(host, str) for host in members):
            raise InputError(f"{field}.hosts", f"{field}.hosts must be a list of hypervisor names")
        strangers = [host for host in members if host not in hosts]
        if strangers:
            raise InputError(f"{field}.hosts", f"{field}.hosts: {strangers[0]!r} is not in hypervisors (known: {', '.join(sorted(hosts))})")
        metadata = aggregate.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise InputError(f"{field}.metadata", f"{field}.metadata must be a mapping of key to value")
        for key, value in metadata.items():
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise InputError(f"{field}.metadata.{key}", f"{field}.metadata.{key} must be a string or a number, got {value!r}")
            if key in DEFAULT_RATIOS:
                _check_ratio(f"{field}.metadata.{key}", _number(value))
        zone = metadata.get("availability_zone")
        if zone is not None:
            for host in members:
                if zone_of.setdefault(host, str(zone)) != str(zone):
                    raise InputError(
                        f"{field}.metadata.availability_zone",
                        f"{field}: host {host} would be in two availability zones, {zone_of[host]} and {zone}",
                    )
        checked[name] = {"hosts": list(dict.fromkeys(members)), "metadata": dict(metadata)}
    return checked


def _number(value: Any) -> Any:
    """Aggregate metadata holds strings in Nova ("1.5"); a ratio may be written either way."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def host_aggregates(name: str, aggregates: Mapping[str, Mapping[str, Any]],
                    default_zone: str = DEFAULT_AVAILABILITY_ZONE) -> Tuple[List[Dict[str, Any]], str]:
    """The aggregates a host is in ([{name, metadata}], by name) and its availability zone."""
    mine = [{"name": agg, "metadata": dict(spec["metadata"])}
            for agg, spec in sorted(aggregates.items()) if name in spec["hosts"]]
    zones = [agg["metadata"]["availability_zone"] for agg in mine if "availability_zone" in agg["metadata"]]
    return mine, str(zones[0]) if zones else default_zone


def effective_settings(settings: Mapping[str, Any], aggregates: List[Mapping[str, Any]] = ()) -> Dict[str, Any]:
    """Allocation ratios and reserved amounts for a host.

    A ratio set in the metadata of the host's aggregates wins, the smallest where they
    disagree (Nova's Aggregate*Filter); else the host's own setting; else Nova's default.
    """
    effective = {**DEFAULT_RATIOS, **DEFAULT_RESERVED}
    effective.update({key: settings[key] for key in HOST_SETTINGS if settings.get(key) is not None})
    for key in DEFAULT_RATIOS:
        values = [_number(agg["metadata"][key]) for agg in aggregates if key in agg["metadata"]]
        if values:
            effective[key] = float(min(values))
    return effective


# ---- connection URIs -----------------------------------------------------------------------

def transport(uri: str) -> str:
    """'ssh', 'libssh', 'tcp', 'unix', '' ... : the part after '+' in the URI's scheme."""
    scheme = urlsplit(uri).scheme
    return scheme.split("+", 1)[1] if "+" in scheme else ""


def is_local(uri: str) -> bool:
    """The hypervisor is this machine: no host in the URI, a local transport, a real driver."""
    parts = urlsplit(uri)
    driver = parts.scheme.split("+", 1)[0]
    return not parts.hostname and transport(uri) in ("", "unix") and driver != "test"


def connection_uri(field: str, uri: str, ssh_user: Optional[str] = None, ssh_keyfile: Optional[str] = None,
                   known_hosts: Optional[str] = None, verify_host_keys: bool = True) -> str:
    """The URI to connect with: the source's plus the SSH settings, never prompting.

    Host keys are checked unless ``verify_host_keys`` is false; a URI that turns checking
    off by itself is refused, so that only the source's explicit setting can.
    """
    kind = transport(uri)
    if kind not in SSH_TRANSPORTS:
        return uri
    family = "ssh" if kind == "ssh" else "libssh"
    parts = urlsplit(uri)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    off_key, off_value = _NO_VERIFY[family]
    if verify_host_keys and query.get(off_key, "") not in ("", "0", "normal"):
        raise InputError(
            field,
            f"{field} turns SSH host key checking off ({off_key}={query[off_key]}); set "
            "verify_host_keys: false in the source if that is really wanted",
        )
    if not verify_host_keys:
        query[off_key] = off_value
    if known_hosts:
        if family == "ssh":
            raise InputError(
                "known_hosts",
                f"known_hosts works with the libssh transports (qemu+libssh://); {field} uses "
                "qemu+ssh, which checks the ssh client's own known_hosts files",
            )
        query.setdefault("known_hosts", known_hosts)
    if ssh_keyfile:
        query.setdefault("keyfile", ssh_keyfile)
    if family == "ssh":
        query.setdefault("no_tty", "1")  # batch mode: fail instead of asking anyone anything
    netloc = parts.netloc
    if ssh_user and parts.username is None:
        netloc = f"{ssh_user}@{netloc}"
    # %20, not "+", for a space: libvirt does not read "+" as a space in a query.
    query_text = urlencode(query, safe="/:,", quote_via=quote)
    return urlunsplit((parts.scheme, netloc, parts.path, query_text, parts.fragment))


# ---- host states (pure) --------------------------------------------------------------------

def host_state(name: str, facts: Mapping[str, Any], settings: Mapping[str, Any],
               aggregates: List[Mapping[str, Any]] = (),
               availability_zone: str = DEFAULT_AVAILABILITY_ZONE,
               gathered_at: Optional[float] = None) -> Dict[str, Any]:
    """The host state from one hypervisor's raw facts and its inventory settings."""
    effective = effective_settings(settings, list(aggregates))
    memory = facts["memory"]
    pool_name = facts["storage_pool"]
    pool = next(pool for pool in facts["pools"] if pool["name"] == pool_name)
    domains = facts["domains"]
    memory_used_mb = sum(dom["memory_mb"] for dom in domains)
    # Only volumes of the instance pool take from its capacity (a disk elsewhere does not).
    disk_used_mb = sum(disk["capacity_mb"] for dom in domains for disk in dom["disks"]
                       if disk.get("pool") == pool_name)
    total_ram_mb = memory["total_mb"]
    total_disk_gb = pool["capacity_mb"] // 1024
    free = free_amounts({**effective, "total_usable_ram_mb": total_ram_mb, "memory_mb_used": memory_used_mb,
                         "total_usable_disk_gb": total_disk_gb, "disk_mb_used": disk_used_mb})
    known = [memory[key] for key in ("free_mb", "buffers_mb", "cached_mb")]
    builds: list[str] = []  # named as builds name their volumes (berth-<instance uuid>-...)
    others: list[str] = []
    data: list[str] = []  # berth.fleet.volume's: the ledger's volumes table knows them; never an image
    for volume in facts.get("volumes", []):
        (data if is_data_volume(volume) else builds if is_instance_volume(volume) else others).append(volume)
    state = {
        "host": name,
        "nodename": facts["nodename"],
        # The test driver reports no host UUID; one derived from the URI keeps the ledger's key stable.
        "uuid": facts["uuid"] or facts["uri_uuid"],
        "service_up": True,
        "down_reason": None,
        "disabled": False,
        "disabled_reason": None,
        "vcpus_total": facts["vcpus_total"],
        "vcpus_used": sum(dom["vcpus"] for dom in domains),
        "total_usable_ram_mb": total_ram_mb,
        "free_ram_mb": free["free_ram_mb"],
        "total_usable_disk_gb": total_disk_gb,
        "free_disk_mb": free["free_disk_mb"],
        "num_instances": len(domains),
        "num_io_ops": 0,
        "hypervisor_type": facts["hypervisor_type"],
        "hypervisor_version": facts["hypervisor_version"],
        "libvirt_version": facts["libvirt_version"],
        "supported_instances": facts["supported_instances"],
        # Beside the host's CPU, what its guests get (Nova's [libvirt] cpu_* options for this host)
        # and what libvirt said each domain type can run: a build makes the guest's <cpu> of them.
        "cpu_info": {**facts["cpu_info"], "guest": {
            "settings": {key: settings[key] for key in CPU_SETTINGS if settings.get(key) is not None},
            "domain_capabilities": dict(facts.get("domain_capabilities") or {})}},
        "numa_topology": _numa_topology(name, facts, settings),
        # What libvirt's node devices say; nothing is claimed from them yet.
        "pci_devices": list(facts.get("pci_devices") or []),
        "pci_devices_skipped": dict(facts.get("pci_devices_skipped") or _NONE_SKIPPED),
        "aggregates": [dict(agg) for agg in aggregates],
        "availability_zone": availability_zone,
        "metrics": dict(facts["metrics"]),
        "hv_memory_total_mb": total_ram_mb,
        "hv_memory_free_mb": memory["free_mb"],
        "hv_memory_buffers_mb": memory["buffers_mb"],
        "hv_memory_cached_mb": memory["cached_mb"],
        "hv_memory_used_mb": UNKNOWN if UNKNOWN in known else total_ram_mb - sum(known),
        "hv_memory_source": facts["memory_source"],
        "domains": list(domains),
        "instances": [dom["berth"]["instance_uuid"] for dom in domains if dom["berth"]],
        # Without the ledger a domain is an orphan when Berth did not make it; the tracker sync
        # re-sorts them against the ledger.
        "orphans": [dom["name"] for dom in domains if not dom["berth"]],
        "storage_pool": pool_name,
        "pools": list(facts["pools"]),
        # What a launch may use as its image (the volumes builds made are not images; those that
        # could lead out of the pool are refused, with why), and the networks it may attach to:
        # PoolImageFilter and NetworkFilter read them.
        "images": [name for name in others if name not in facts.get("image_refusals", {})],
        "refused_images": dict(facts.get("image_refusals", {})),
        # The pool's volumes named as builds name theirs (berth-<instance uuid>-...): the tracker
        # sync tells which belong to an instance, to a build in progress, or to nothing.
        "instance_volumes": builds,
        # The pool's volumes named as berth.fleet.volume names data volumes (berth-volume-<name>.qcow2):
        # the tracker sync reports those no volume of the ledger is.
        "data_volumes": data,
        "networks": list(facts.get("networks", [])),
        "host_ip": settings.get("host_ip") or facts.get("host_ip"),
        "gathered_at": time.time() if gathered_at is None else gathered_at,
    }
    state.update(effective)
    refusal = limits.host_state_refusal(state)
    if refusal:
        # Numbers the ledger cannot hold (a test-driver node with a petabyte of memory): down, with why.
        return down_state(name, settings, refusal, list(aggregates), availability_zone, state["gathered_at"])
    return state


_NONE_SKIPPED = {"beyond_limit": 0, "unreadable": 0}


def _numa_topology(name: str, facts: Mapping[str, Any], settings: Mapping[str, Any]) -> Dict[str, Any]:
    """The cells libvirt reported, with the host's cpu_dedicated_set and cpu_shared_set (sorted
    ids, None where unset: Nova then lets instances use every CPU as shared), checked against its
    CPUs: those of its cells, else 0 to vcpus_total - 1 where the driver reports no cells; and
    its reserved_huge_pages as reserved_pages ({cell id: {size_kb: count}}, text keys; absent
    where none, as older facts have it), checked against its cells' pages."""
    cells = facts["numa_topology"].get("cells") or []
    host_cpus = [cpu for cell in cells for cpu in cell["cpus"]] if cells else range(facts["vcpus_total"])
    sets = host_cpu_sets(f"hypervisors.{name}", settings, host_cpus, name)
    # Checked again here, not only in the source: the settings reach a sync through hostvars.
    field = f"hypervisors.{name}.{RESERVED_PAGES_SETTING}"
    entries = parse_reserved_huge_pages(field, settings.get(RESERVED_PAGES_SETTING))
    reserved = host_reserved_pages(field, entries, cells, name)
    return {**facts["numa_topology"], **sets, **({"reserved_pages": reserved} if reserved else {})}


def down_state(name: str, settings: Mapping[str, Any], reason: str,
               aggregates: List[Mapping[str, Any]] = (),
               availability_zone: str = DEFAULT_AVAILABILITY_ZONE,
               gathered_at: Optional[float] = None) -> Dict[str, Any]:
    """A host that did not answer: listed, marked down with the reason, no capacity."""
    state: Dict[str, Any] = {
        "host": name, "nodename": "", "uuid": "", "service_up": False, "down_reason": reason,
        "disabled": False, "disabled_reason": None, "vcpus_total": 0, "vcpus_used": 0,
        "total_usable_ram_mb": 0, "free_ram_mb": 0, "total_usable_disk_gb": 0, "free_disk_mb": 0,
        "num_instances": 0, "num_io_ops": 0, "hypervisor_type": None, "hypervisor_version": None,
        "libvirt_version": None, "supported_instances": [], "cpu_info": {}, "numa_topology": {"cells": []},
        "pci_devices": [], "pci_devices_skipped": dict(_NONE_SKIPPED),
        "aggregates": [dict(agg) for agg in aggregates], "availability_zone": availability_zone,
        "metrics": {}, "hv_memory_total_mb": None, "hv_memory_free_mb": None,
        "hv_memory_buffers_mb": None, "hv_memory_cached_mb": None, "hv_memory_used_mb": None,
        "hv_memory_source": None, "domains": [], "instances": [], "orphans": [], "storage_pool": None,
        "pools": [], "images": [], "refused_images": {}, "instance_volumes": [], "data_volumes": [], "networks": [], "host_ip": settings.get("host_ip"),
        "gathered_at": time.time() if gathered_at is None else gathered_at,
    }
    state.update(effective_settings(settings, list(aggregates)))
    return state


def state_from_outcome(name: str, outcome: Mapping[str, Any], settings: Mapping[str, Any],
                       aggregates: Mapping[str, Mapping[str, Any]] = None,
                       default_zone: str = DEFAULT_AVAILABILITY_ZONE) -> Dict[str, Any]:
    """The host state of one fetch outcome, up or down, with the aggregates of the source."""
    mine, zone = host_aggregates(name, aggregates or {}, default_zone)
    return outcome_state(name, outcome, settings, mine, zone)


def outcome_state(name: str, outcome: Mapping[str, Any], settings: Mapping[str, Any],
                  aggregates: List[Mapping[str, Any]] = (),
                  availability_zone: str = DEFAULT_AVAILABILITY_ZONE) -> Dict[str, Any]:
    """The host state of one fetch outcome (host_fetch): up, or down with why where the host did
    not answer or its facts do not make a host state - an operator's setting that does not fit
    them (a CPU set naming CPUs it lacks), or anything else host_state raises over them: one
    host's answers are that host's problem, never the whole sync's or inventory's."""
    gathered_at = outcome.get("gathered_at")
    if "facts" not in outcome:
        return down_state(name, settings, outcome["down_reason"], aggregates, availability_zone, gathered_at)
    try:
        return host_state(name, outcome["facts"], settings, aggregates, availability_zone, gathered_at)
    except Exception as exc:  # whatever it is, this host's (see the docstring)
        return down_state(name, settings, failure_reason(name, exc), aggregates, availability_zone, gathered_at)
