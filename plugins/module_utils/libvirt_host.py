"""Everything Berth asks of a libvirt hypervisor.

This is the only Berth module that imports libvirt. Every call runs under a timeout: libvirt's
Python binding has none of its own, and one hung hypervisor must not hang a whole run.
"""

from __future__ import annotations

import threading
import xml.etree.ElementTree as ET
from typing import Any, Callable

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError

try:
    import libvirt
except ImportError:  # reported by require_libvirt() where it matters, not at import time
    libvirt = None

# Domain metadata that ties a libvirt domain to its Berth instance.
METADATA_NAMESPACE = "urn:berth:instance:1"
METADATA_PREFIX = "berth"

DOMAIN_STATES = {
    0: "nostate", 1: "running", 2: "blocked", 3: "paused",
    4: "shutdown", 5: "shutoff", 6: "crashed", 7: "pmsuspended",
}

_KIB_PER_MIB = 1024
_BYTES_PER_MIB = 1024 * 1024
_BYTES_PER_GIB = 1024 ** 3


def require_libvirt() -> None:
    if libvirt is None:
        raise HypervisorError(
            "controller",
            "the Python package libvirt-python is not installed for this interpreter "
            "(pip install libvirt-python)",
        )


def _silence(_ctx: Any, _err: Any) -> None:
    """libvirt prints every error on stderr by default; Berth reports them itself."""


def call_with_timeout(host: str, timeout_s: float, func: Callable[..., Any], *args: Any) -> Any:
    """Run one libvirt call in a daemon thread and give up after ``timeout_s`` seconds.

    A timed-out call keeps its thread until libvirt returns, but the run goes on without it.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = func(*args)
        except BaseException as exc:  # handed over to the calling thread below
            outcome["error"] = exc

    thread = threading.Thread(target=target, name=f"libvirt-{host}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        name = getattr(func, "__name__", "call")
        raise HypervisorError(host, f"libvirt did not answer {name} within {timeout_s:g} s")
    if "error" in outcome:
        error = outcome["error"]
        if libvirt is not None and isinstance(error, libvirt.libvirtError):
            raise HypervisorError(host, error.get_error_message() or str(error)) from error
        raise error
    return outcome.get("value")


class Hypervisor:
    """One open connection to one hypervisor: ``with Hypervisor(host, uri) as hv: ...``."""

    def __init__(self, host: str, uri: str, timeout_s: float = 10.0) -> None:
        require_libvirt()
        self.host = host
        self.uri = uri
        self.timeout_s = timeout_s
        self.conn: Any = None

    def __enter__(self) -> Hypervisor:
        libvirt.registerErrorHandler(_silence, None)
        self.conn = self._call(libvirt.open, self.uri)
        try:
            # Remote connections notice a dead peer after about 15 s instead of hanging.
            self.conn.setKeepAlive(5, 3)
        except libvirt.libvirtError:
            pass  # local drivers (test://) have no keepalive
        return self

    def __exit__(self, *_exc: Any) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except libvirt.libvirtError:
                pass
            self.conn = None

    def _call(self, func: Callable[..., Any], *args: Any) -> Any:
        return call_with_timeout(self.host, self.timeout_s, func, *args)

    # ---- facts ------------------------------------------------------------------------------

    def facts(self, pool_name: str) -> dict[str, Any]:
        """Raw facts in libvirt's terms; host_facts.host_state() turns them into a host state."""
        conn = self.conn
        caps = ET.fromstring(self._call(conn.getCapabilities))
        info = self._call(conn.getInfo)
        facts: dict[str, Any] = {
            "nodename": self._call(conn.getHostname),
            "uuid": caps.findtext("host/uuid") or "",
            "vcpus_total": int(info[2]),
            "hypervisor_type": self._call(conn.getType),
            "hypervisor_version": int(self._call(conn.getVersion)),
            "cpu_info": _cpu_info(caps),
            "supported_instances": _supported_instances(caps),
            "memory": self._memory_stats(info),
            "pool": self._pool(pool_name),
            "domains": [self._domain(dom) for dom in self._call(conn.listAllDomains, 0)],
        }
        return facts

    def _memory_stats(self, info: list[Any]) -> dict[str, int]:
        """Node memory in MiB from the node's statistics over all cells.

        getInfo() reports NUMA node 0 only on some machines, so it is a fallback for drivers
        without node statistics (the test driver).
        """
        try:
            stats = self._call(self.conn.getMemoryStats, libvirt.VIR_NODE_MEMORY_STATS_ALL_CELLS, 0)
        except HypervisorError:
            stats = None
        if not stats or "total" not in stats:
            return {"total_mb": int(info[1]), "free_mb": 0, "buffers_mb": 0, "cached_mb": 0}
        return {
            "total_mb": stats["total"] // _KIB_PER_MIB,
            "free_mb": stats.get("free", 0) // _KIB_PER_MIB,
            "buffers_mb": stats.get("buffers", 0) // _KIB_PER_MIB,
            "cached_mb": stats.get("cached", 0) // _KIB_PER_MIB,
        }

    def _pool(self, pool_name: str) -> dict[str, Any]:
        pool = self._call(self.conn.storagePoolLookupByName, pool_name)
        _state, capacity, allocation, available = self._call(pool.info)
        return {
            "name": pool_name,
            "capacity_gb": capacity // _BYTES_PER_GIB,
            "allocation_mb": allocation // _BYTES_PER_MIB,
            "available_mb": available // _BYTES_PER_MIB,
        }

    def _domain(self, dom: Any) -> dict[str, Any]:
        state, max_mem_kib, _mem, vcpus, _cpu_time = self._call(dom.info)
        root = ET.fromstring(self._call(dom.XMLDesc, 0))
        return {
            "name": dom.name(),
            "uuid": dom.UUIDString(),
            "state": DOMAIN_STATES.get(state, "unknown"),
            "vcpus": int(vcpus),
            "memory_mb": int(max_mem_kib) // _KIB_PER_MIB,
            "disks": [self._disk(path) for path in _disk_paths(root)],
            "berth": _berth_metadata(root),
        }

    def _disk(self, path: str) -> dict[str, Any]:
        try:
            vol = self._call(self.conn.storageVolLookupByPath, path)
            capacity_mb = self._call(vol.info)[1] // _BYTES_PER_MIB
        except HypervisorError:
            capacity_mb = 0  # not a pool volume: it takes nothing from the instance pool
        return {"path": path, "capacity_mb": capacity_mb}

    # ---- building and removing instances ---------------------------------------------------

    def create_volume(self, pool_name: str, name: str, capacity_gb: int) -> str:
        """Create a sparse qcow2 volume through the storage API and return its path."""
        pool = self._call(self.conn.storagePoolLookupByName, pool_name)
        vol_xml = _volume_xml(name, capacity_gb)
        vol = self._call(pool.createXML, vol_xml, 0)
        return vol.path()

    def delete_volume(self, pool_name: str, name: str) -> bool:
        """Delete a volume if it exists; True if one was deleted."""
        pool = self._call(self.conn.storagePoolLookupByName, pool_name)
        self._call(pool.refresh, 0)
        if name not in self._call(pool.listVolumes):
            return False
        vol = self._call(pool.storageVolLookupByName, name)
        self._call(vol.delete, 0)
        return True

    def define_and_start(self, domain_xml: str) -> str:
        """Define a persistent domain and start it; returns its UUID."""
        dom = self._call(self.conn.defineXML, domain_xml)
        self._call(dom.create)
        return dom.UUIDString()

    def find_domain(self, uuid: str) -> dict[str, Any] | None:
        try:
            dom = self._call(self.conn.lookupByUUIDString, uuid)
        except HypervisorError:
            return None
        return self._domain(dom)

    def remove_domain(self, uuid: str) -> bool:
        """Stop and undefine a domain if it exists; True if one was removed."""
        try:
            dom = self._call(self.conn.lookupByUUIDString, uuid)
        except HypervisorError:
            return False
        if self._call(dom.isActive):
            self._call(dom.destroy)
        flags = libvirt.VIR_DOMAIN_UNDEFINE_NVRAM | libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE
        self._call(dom.undefineFlags, flags)
        return True


def _volume_xml(name: str, capacity_gb: int) -> str:
    vol = ET.Element("volume")
    ET.SubElement(vol, "name").text = name
    ET.SubElement(vol, "capacity", unit="G").text = str(int(capacity_gb))
    ET.SubElement(vol, "allocation", unit="G").text = "0"
    target = ET.SubElement(vol, "target")
    ET.SubElement(target, "format", type="qcow2")
    return ET.tostring(vol, encoding="unicode")


def _disk_paths(root: ET.Element) -> list[str]:
    paths = []
    for disk in root.findall("devices/disk"):
        source = disk.find("source")
        if disk.get("device", "disk") == "disk" and source is not None and source.get("file"):
            paths.append(source.get("file"))
    return paths


def _berth_metadata(root: ET.Element) -> dict[str, Any] | None:
    node = root.find(f"metadata/{{{METADATA_NAMESPACE}}}instance")
    if node is None:
        return None
    return {
        "instance_uuid": node.findtext(f"{{{METADATA_NAMESPACE}}}uuid") or "",
        "name": node.findtext(f"{{{METADATA_NAMESPACE}}}name") or "",
        "flavor": node.findtext(f"{{{METADATA_NAMESPACE}}}flavor") or "",
    }


def _cpu_info(caps: ET.Element) -> dict[str, Any]:
    cpu = caps.find("host/cpu")
    if cpu is None:
        return {}
    topology = cpu.find("topology")
    return {
        "arch": cpu.findtext("arch") or "",
        "model": cpu.findtext("model") or "",
        "vendor": cpu.findtext("vendor") or "",
        "features": sorted(f.get("name", "") for f in cpu.findall("feature")),
        "topology": dict(topology.attrib) if topology is not None else {},
    }


def _supported_instances(caps: ET.Element) -> list[list[str]]:
    """[arch, hypervisor type, vm mode] triples, as Nova reports them."""
    triples = []
    for guest in caps.findall("guest"):
        arch = guest.find("arch")
        if arch is None:
            continue
        for domain in arch.findall("domain"):
            triples.append([arch.get("name", ""), domain.get("type", ""), guest.findtext("os_type") or ""])
    return triples
