"""Hypervisor facts, gathered in parallel, turned into DESIGN.md's host state.

The host state computed here is the hypervisor's own account (every domain it runs counts as
usage). The schedule action replaces the usage with the ledger's tracker view before deciding.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Mapping
from urllib.parse import urlsplit

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
    DEFAULT_RATIOS,
    DEFAULT_RESERVED,
)

HOST_SETTINGS = tuple(DEFAULT_RATIOS) + tuple(DEFAULT_RESERVED)


def validate_hypervisors(hypervisors: Any) -> dict[str, dict[str, Any]]:
    """Check the ``hypervisors`` option of an inventory source; errors name the field."""
    if not isinstance(hypervisors, Mapping) or not hypervisors:
        raise InputError("hypervisors", "hypervisors must be a non-empty mapping of name to settings")
    checked = {}
    for name, settings in hypervisors.items():
        field = f"hypervisors.{name}"
        if not isinstance(settings, Mapping):
            raise InputError(field, f"{field} must be a mapping with at least 'uri'")
        unknown = sorted(set(settings) - {"uri", *HOST_SETTINGS})
        if unknown:
            allowed = ", ".join(["uri", *HOST_SETTINGS])
            raise InputError(f"{field}.{unknown[0]}", f"{field}: unknown setting {unknown[0]!r} (allowed: {allowed})")
        uri = settings.get("uri")
        if not isinstance(uri, str) or not urlsplit(uri).scheme or "://" not in uri:
            raise InputError(f"{field}.uri", f"{field}.uri must be a libvirt URI such as qemu:///system")
        for key in DEFAULT_RATIOS:
            value = settings.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise InputError(f"{field}.{key}", f"{field}.{key} must be a positive number, got {value!r}")
        for key in DEFAULT_RESERVED:
            value = settings.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise InputError(f"{field}.{key}", f"{field}.{key} must be a non-negative integer, got {value!r}")
        checked[str(name)] = dict(settings)
    return checked


def effective_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Allocation ratios and reserved amounts for a host: its own, else Nova's defaults."""
    effective = {**DEFAULT_RATIOS, **DEFAULT_RESERVED}
    effective.update({key: settings[key] for key in HOST_SETTINGS if settings.get(key) is not None})
    return effective


def host_state(name: str, facts: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """DESIGN.md's host state from one hypervisor's raw facts and its inventory settings."""
    effective = effective_settings(settings)
    memory = facts["memory"]
    pool = facts["pool"]
    domains = facts["domains"]
    memory_used_mb = sum(dom["memory_mb"] for dom in domains)
    disk_used_mb = sum(disk["capacity_mb"] for dom in domains for disk in dom["disks"])
    total_ram_mb = memory["total_mb"]
    state = {
        "host": name,
        "nodename": facts["nodename"],
        "uuid": facts["uuid"],
        "service_up": True,
        "down_reason": None,
        "disabled": False,
        "disabled_reason": None,
        "vcpus_total": facts["vcpus_total"],
        "vcpus_used": sum(dom["vcpus"] for dom in domains),
        "total_usable_ram_mb": total_ram_mb,
        "free_ram_mb": total_ram_mb - effective["reserved_host_memory_mb"] - memory_used_mb,
        "total_usable_disk_gb": pool["capacity_gb"],
        "free_disk_mb": pool["capacity_gb"] * 1024 - effective["reserved_host_disk_mb"] - disk_used_mb,
        "num_instances": len(domains),
        "num_io_ops": 0,
        "hypervisor_type": facts["hypervisor_type"],
        "hypervisor_version": facts["hypervisor_version"],
        "supported_instances": facts["supported_instances"],
        "cpu_info": facts["cpu_info"],
        "hv_memory_total_mb": total_ram_mb,
        "hv_memory_free_mb": memory["free_mb"],
        "hv_memory_buffers_mb": memory["buffers_mb"],
        "hv_memory_cached_mb": memory["cached_mb"],
        "hv_memory_used_mb": total_ram_mb - (memory["free_mb"] + memory["buffers_mb"] + memory["cached_mb"]),
        "domains": domains,
        "instances": [dom["berth"]["instance_uuid"] for dom in domains if dom["berth"]],
        # Without the ledger a domain is an orphan when Berth did not make it; the schedule
        # action re-sorts them against the ledger.
        "orphans": [dom["name"] for dom in domains if not dom["berth"]],
        "pools": [pool],
        "gathered_at": time.time(),
    }
    state.update(effective)
    return state


def down_state(name: str, settings: Mapping[str, Any], reason: str) -> dict[str, Any]:
    """A host that did not answer: listed, marked down with the reason, no capacity."""
    effective = effective_settings(settings)
    state: dict[str, Any] = {
        "host": name, "nodename": "", "uuid": "", "service_up": False, "down_reason": reason,
        "disabled": False, "disabled_reason": None, "vcpus_total": 0, "vcpus_used": 0,
        "total_usable_ram_mb": 0, "free_ram_mb": 0, "total_usable_disk_gb": 0, "free_disk_mb": 0,
        "num_instances": 0, "num_io_ops": 0, "domains": [], "instances": [], "orphans": [],
        "pools": [], "gathered_at": time.time(),
    }
    state.update(effective)
    return state


def gather_one(name: str, settings: Mapping[str, Any], pool_name: str, timeout_s: float) -> dict[str, Any]:
    try:
        with Hypervisor(name, settings["uri"], timeout_s) as hv:
            return host_state(name, hv.facts(pool_name), settings)
    except HypervisorError as exc:
        return down_state(name, settings, str(exc))


def gather(hypervisors: Mapping[str, Mapping[str, Any]], pool_name: str, timeout_s: float) -> dict[str, dict[str, Any]]:
    """Gather every hypervisor at once; a host that fails or hangs comes back down, not raised.

    Each libvirt call has its own timeout; the whole host gets twice that for its connection plus
    its calls before it is reported down.
    """
    results: dict[str, dict[str, Any]] = {}
    lock = threading.Lock()

    def work(name: str, settings: Mapping[str, Any]) -> None:
        state = gather_one(name, settings, pool_name, timeout_s)
        with lock:
            results[name] = state

    threads = {
        name: threading.Thread(target=work, args=(name, settings), name=f"gather-{name}", daemon=True)
        for name, settings in hypervisors.items()
    }
    for thread in threads.values():
        thread.start()
    deadline = time.monotonic() + 2 * timeout_s
    for thread in threads.values():
        thread.join(max(0.0, deadline - time.monotonic()))
    with lock:
        for name, settings in hypervisors.items():
            if name not in results:
                results[name] = down_state(name, settings, f"{name}: no answer within {2 * timeout_s:g} s")
        return {name: results[name] for name in hypervisors}
