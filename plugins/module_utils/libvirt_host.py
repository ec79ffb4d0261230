"""Everything Berth asks of a libvirt hypervisor, over one connection.

This is the only Berth module that imports libvirt; reading its capabilities XML into facts is
pure parsing and lives beside it, in host_capabilities.py. Every call runs under a timeout:
libvirt's Python binding has none of its own, and one hung hypervisor must not hang a whole run.
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import struct
import threading
import time
import uuid as uuidlib
import xml.etree.ElementTree as ET
from typing import Any, BinaryIO, Callable, NoReturn, Sequence
from urllib.parse import parse_qs, urlsplit

from ansible_collections.berth.fleet.plugins.module_utils import _guest_addresses, host_capabilities, host_devices, limits
from ansible_collections.berth.fleet.plugins.module_utils._requirements import import_library
from ansible_collections.berth.fleet.plugins.module_utils._untrusted_text import whole_number
from ansible_collections.berth.fleet.plugins.module_utils.errors import ControllerRefusal, HypervisorError, NotSupported
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import DEFAULT_POLICY, UriPolicy

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

# A remote connection is dropped after this many unanswered keepalives, this many seconds apart.
KEEPALIVE_INTERVAL_S = 5
KEEPALIVE_COUNT = 3
# libvirt's volume types (virStorageVolType), as volume() reports them.
VOLUME_TYPES = {0: "file", 1: "block", 2: "dir", 3: "network", 4: "netdir", 5: "ploop"}
# Where a local qemu:///system daemon listens: the modular daemon first, then the monolithic one.
SYSTEM_SOCKETS = ("/run/libvirt/virtqemud-sock", "/run/libvirt/libvirt-sock")
USERNAME_ENV = "BERTH_LIBVIRT_USERNAME"
# Where libvirt looks for a guest's addresses (virDomainInterfaceAddresses), in Berth's default
# order: the DHCP leases of libvirt's own networks, the QEMU guest agent, the host's ARP table.
ADDRESS_SOURCES = ("lease", "agent", "arp")
# The guest agent's virtio-serial channel, as libvirt names it in the domain XML.
GUEST_AGENT_CHANNEL = "org.qemu.guest_agent.0"
PASSWORD_ENV = "BERTH_LIBVIRT_PASSWORD"
# The name of a transient storage pool read_file_tail starts over a directory that no pool of the
# operator's covers (with a random suffix), so that an operator seeing one knows whose it is.
READER_POOL_PREFIX = "berth-read-"
# Uploads go in chunks of this size: what the controller holds of an image at a time.
UPLOAD_CHUNK_BYTES = 1024 * 1024
# The slowest link an upload is given time for (40 Mbit/s): a 2 GiB image may take 7 minutes.
UPLOAD_FLOOR_BYTES_PER_S = 5 * 1024 * 1024


def require_libvirt() -> None:
    if libvirt is None:
        import_library("libvirt", "libvirt-python", "talking to a hypervisor through libvirt")


_event_loop_lock = threading.Lock()
_event_loop_pid: int | None = None


def _run_event_loop() -> None:
    while True:
        libvirt.virEventRunDefaultImpl()


def ensure_event_loop() -> None:
    """Run libvirt's default event loop in a daemon thread of this process.

    Keepalive messages and the libssh transports only work with an event loop. A forked
    process (Ansible's workers) inherits the registration but not the thread, so each
    process starts its own.
    """
    global _event_loop_pid
    with _event_loop_lock:
        if _event_loop_pid == os.getpid():
            return
        if _event_loop_pid is None:
            libvirt.virEventRegisterDefaultImpl()
        threading.Thread(target=_run_event_loop, name="libvirt-events", daemon=True).start()
        _event_loop_pid = os.getpid()


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
        _raise(host, outcome["error"])
    return outcome.get("value")


def call_on_this_thread(host: str, func: Callable[..., Any], *args: Any) -> Any:
    """One libvirt call without a timeout of its own, for a caller that bounds the whole session
    itself (a thread per call costs more than the call on a fast hypervisor)."""
    try:
        return func(*args)
    except BaseException as exc:
        _raise(host, exc)


def _raise(host: str, error: BaseException) -> NoReturn:
    if libvirt is not None and isinstance(error, libvirt.libvirtError):
        raise HypervisorError(host, error.get_error_message() or str(error)) from error
    raise error


class Hypervisor:
    """One open connection to one hypervisor: ``with Hypervisor(host, uri) as hv: ...``.
    It implements hypervisor_driver.HypervisorDriver, and the class itself is the operations'
    default ``connect``; copy_volume_to, create_volume_like and live_migrate take another
    Hypervisor as their peer.

    ``username`` and ``password`` answer libvirt's authentication prompts (SASL...); they
    default to $BERTH_LIBVIRT_USERNAME and $BERTH_LIBVIRT_PASSWORD, the way AWX injects a
    credential, and never appear in the URI.

    ``uri_policy`` is the operator's (uri_policy.py; the strict default without one): the URI
    is opened only if it passes, the credentials answer a login only on a host it names, and a
    ``qemu+tcp`` connection is kept only if the hypervisor asked for a SASL login.
    """

    def __init__(self, host: str, uri: str, timeout_s: float = 10.0,
                 username: str | None = None, password: str | None = None,
                 keepalive_interval_s: int = KEEPALIVE_INTERVAL_S,
                 keepalive_count: int = KEEPALIVE_COUNT, transfer_timeout_s: float | None = None,
                 bounded_by_caller: bool = False, uri_policy: UriPolicy | None = None) -> None:
        require_libvirt()
        self.host = host
        self.uri = uri
        self.uri_policy = uri_policy or DEFAULT_POLICY
        self._login_asked = False
        self._credentials_withheld = False
        self.timeout_s = timeout_s
        # Copying a volume or migrating a domain moves whole disks: these calls get their own limit.
        self.transfer_timeout_s = transfer_timeout_s or timeout_s
        self.username = username if username is not None else os.environ.get(USERNAME_ENV)
        self.password = password if password is not None else os.environ.get(PASSWORD_ENV)
        self.keepalive = (keepalive_interval_s, keepalive_count)
        self.conn: Any = None
        self._daemon_pid: int | None = None  # found on first use; 0: none to look through
        # The caller gives up on the whole session after its own deadline (the tracker sync's
        # readers do): each call then runs on the caller's thread, without a timeout of its own.
        self.bounded_by_caller = bounded_by_caller

    def __enter__(self) -> Hypervisor:
        refusal = self.uri_policy.refusal(self.uri)
        if refusal:
            raise ControllerRefusal(self.host, f"its URI is refused by Berth's URI policy: {refusal}")
        libvirt.registerErrorHandler(_silence, None)
        ensure_event_loop()
        try:
            self.conn = self._call(libvirt.openAuth, self.uri, self._auth(), 0)
        except HypervisorError as exc:
            if self._credentials_withheld:
                raise ControllerRefusal(self.host, (
                    f"it asked for a login, and the libvirt credentials are only sent to this machine or a host "
                    f"the operator's configuration names (an inventory source, uri_policy.credential_hosts); "
                    f"{urlsplit(self.uri).hostname} is not one: {exc}")) from exc
            raise
        if urlsplit(self.uri).scheme.lower().endswith("+tcp") and not self._login_asked:
            self.__exit__()
            raise HypervisorError(self.host, "it let a qemu+tcp connection in without a SASL login: unencrypted "
                                             "and unauthenticated, refused (set auth_tcp = \"sasl\" on the hypervisor)")
        try:
            # Remote connections notice a dead peer after interval x count seconds instead of
            # hanging on a half-open TCP connection.
            self.conn.setKeepAlive(*self.keepalive)
        except libvirt.libvirtError:
            pass  # local drivers (test://, unix sockets of some drivers) have no keepalive
        return self

    def _auth(self) -> list[Any]:
        """libvirt's credential callback: the user name and password, nothing interactive, and
        only to a host the policy lets them go to."""
        send = self.uri_policy.may_send_credentials(self.uri)

        def answer(credentials: list[list[Any]], _data: Any) -> int:
            self._login_asked = True
            if not send:
                self._credentials_withheld = True
                return -1
            for credential in credentials:
                if credential[0] == libvirt.VIR_CRED_AUTHNAME and self.username:
                    credential[4] = self.username
                elif credential[0] == libvirt.VIR_CRED_PASSPHRASE and self.password:
                    credential[4] = self.password
                else:
                    return -1  # nobody to ask: fail rather than prompt
            return 0
        return [[libvirt.VIR_CRED_AUTHNAME, libvirt.VIR_CRED_PASSPHRASE], answer, None]

    def __exit__(self, *_exc: Any) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except libvirt.libvirtError:
                pass
            self.conn = None

    def _call(self, func: Callable[..., Any], *args: Any) -> Any:
        if self.bounded_by_caller:
            return call_on_this_thread(self.host, func, *args)
        return call_with_timeout(self.host, self.timeout_s, func, *args)

    def _optional(self, func: Callable[..., Any], *args: Any) -> Any:
        """A call some drivers do not support (the test driver): None instead of an error.

        Only "not supported" counts; a timeout or a lost connection still raises.
        """
        try:
            return self._call(func, *args)
        except HypervisorError as exc:
            unsupported = (libvirt.VIR_ERR_NO_SUPPORT, libvirt.VIR_ERR_ARGUMENT_UNSUPPORTED,
                           libvirt.VIR_ERR_OPERATION_UNSUPPORTED)
            if _error_code(exc) in unsupported:
                return None
            raise

    # ---- facts ------------------------------------------------------------------------------

    def facts(self, pool_name: str) -> dict[str, Any]:
        """Raw facts in libvirt's terms; host_facts.host_state() turns them into a host state."""
        conn = self.conn
        caps = ET.fromstring(self._call(conn.getCapabilities))
        info = self._call(conn.getInfo)
        pools = self._pools()
        if not any(pool["name"] == pool_name for pool in pools):
            known = ", ".join(pool["name"] for pool in pools) or "none"
            raise HypervisorError(self.host, f"storage pool {pool_name!r} not found (pools: {known})")
        return {
            "nodename": self._call(conn.getHostname),
            "uuid": host_capabilities.host_uuid(caps),
            "vcpus_total": int(info[2]),
            "hypervisor_type": self._call(conn.getType),
            "hypervisor_version": int(self._call(conn.getVersion)),
            "libvirt_version": int(self._call(conn.getLibVersion)),
            "cpu_info": host_capabilities.cpu_info(caps, info),
            "numa_topology": host_capabilities.numa_topology(caps, self._free_pages(caps)),
            **self._pci_devices(),
            "supported_instances": host_capabilities.supported_instances(caps),
            "domain_capabilities": self._domain_cpu_capabilities(caps),
            "memory": self._memory_stats(info),
            "cpu_times": self._cpu_times(),
            "pools": pools,
            "storage_pool": pool_name,
            "volumes": self.volume_names(pool_name),
            "networks": self.network_names(),
            "domains": self.facts_domains(),
        }

    def _free_pages(self, caps: ET.Element) -> dict[int, dict[int, int]]:
        """{cell id: {page size in KiB: free pages}} (virNodeGetFreePages), for every page size
        the cells count; empty where the driver cannot say (the test driver answers nothing)."""
        # A cell id that is no number is numa_topology's to refuse; here it is only not asked about.
        numbers = (whole_number(cell.get("id")) for cell in caps.findall("host/topology/cells/cell"))
        cell_ids = [number for number in numbers if number is not None]
        sizes = host_capabilities.page_sizes_kb(caps)
        if not cell_ids or not sizes or cell_ids != list(range(len(cell_ids))):
            return {}  # the call takes a run of cells from 0; a host with gaps is asked nothing
        free = self._optional(self.conn.getFreePages, sizes, 0, len(cell_ids))
        return {int(cell): {int(size): int(count) for size, count in counts.items()}
                for cell, counts in (free or {}).items()}

    def _pci_devices(self) -> dict[str, Any]:
        """{pci_devices, pci_devices_skipped}: the host's PCI devices and mdev-capable parents
        (host_devices.pci_device), at most limits.NODE_DEVICES_READ of them in name order; those
        beyond it, or whose XML does not read as a PCI device, are counted in ``skipped``."""
        flags = (libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV
                 | libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV_TYPES)
        listed = self._optional(self.conn.listAllDevices, flags) or []
        ordered = sorted(listed, key=lambda device: device.name())
        devices, unreadable = [], 0
        for device in ordered[:limits.NODE_DEVICES_READ]:
            try:
                found = host_devices.pci_device(ET.fromstring(self._call(device.XMLDesc, 0)))
            except HypervisorError as exc:
                if _connection_lost(exc):
                    raise
                unreadable += 1  # removed meanwhile (a VF being disabled)
                continue
            except (ET.ParseError, host_devices.DeviceXMLError):
                unreadable += 1
                continue
            if found is not None:
                devices.append(found)
        return {"pci_devices": devices,
                "pci_devices_skipped": {"beyond_limit": max(0, len(ordered) - limits.NODE_DEVICES_READ),
                                        "unreadable": unreadable}}

    def _domain_cpu_capabilities(self, caps: ET.Element) -> dict[str, Any]:
        """{domain type: what it offers a guest CPU} for the host's own architecture's kvm and
        qemu guests; empty where the driver has no domain capabilities (the test driver)."""
        arch = caps.findtext("host/cpu/arch") or ""
        offered = sorted({triple[1] for triple in host_capabilities.supported_instances(caps)
                          if triple[0] == arch and triple[1] in ("kvm", "qemu")})
        found = {}
        for kind in offered:
            xml = self._optional(self.conn.getDomainCapabilities, None, arch, None, kind, 0)
            if xml:
                found[kind] = host_capabilities.domain_cpu_capabilities(ET.fromstring(xml))
        return found

    def guest_cpu_refusal(self, domain_xml: str, domain_type: str) -> str | None:
        """Why this host cannot run the ``<cpu>`` of ``domain_xml`` (a custom model with its
        features) as ``domain_type``, in libvirt's words naming the missing features; None where
        it can, where the domain has no custom CPU, or where the driver cannot compare."""
        cpu = ET.fromstring(domain_xml).find("cpu")
        if cpu is None or cpu.get("mode") != "custom" or not hasattr(self.conn, "compareHypervisorCPU"):
            return None
        arch = ET.fromstring(self._call(self.conn.getCapabilities)).findtext("host/cpu/arch") or None
        try:
            self._optional(self.conn.compareHypervisorCPU, None, arch, None, domain_type,
                           ET.tostring(cpu, encoding="unicode"), libvirt.VIR_CONNECT_COMPARE_CPU_FAIL_INCOMPATIBLE)
        except HypervisorError as exc:
            if _error_code(exc) in (libvirt.VIR_ERR_CPU_INCOMPATIBLE, libvirt.VIR_ERR_INTERNAL_ERROR):
                return str(exc)
            raise
        return None

    def readiness(self) -> dict[str, Any]:
        """What Berth needs of a hypervisor, as libvirt reports it (berth.fleet.hypervisor_check
        judges it): its libvirt version, driver and guest domain types, and every storage pool
        and network with whether it is active and autostarted."""
        conn = self.conn
        caps = ET.fromstring(self._call(conn.getCapabilities))
        pools = [{"name": pool.name(), "active": bool(self._call(pool.isActive)),
                  "autostart": bool(self._call(pool.autostart)),
                  "capacity_mb": self._call(pool.info)[1] // _BYTES_PER_MIB}
                 for pool in self._call(conn.listAllStoragePools, 0)]
        networks = [{"name": network.name(), "active": bool(self._call(network.isActive)),
                     "autostart": bool(self._call(network.autostart))}
                    for network in self._call(conn.listAllNetworks, 0)]
        return {
            "libvirt_version": int(self._call(conn.getLibVersion)),
            "hypervisor_type": self._call(conn.getType),
            "domain_types": sorted({triple[1] for triple in host_capabilities.supported_instances(caps)}),
            "pools": sorted(pools, key=lambda pool: pool["name"]),
            "networks": sorted(networks, key=lambda network: network["name"]),
        }

    def facts_domains(self) -> list[dict[str, Any]]:
        """Every domain of the host, as facts() reports them."""
        # Sorted, so that two gatherings of the same host compare equal.
        return sorted((self._domain(dom) for dom in self._call(self.conn.listAllDomains, 0)),
                      key=lambda dom: dom["name"])

    def _memory_stats(self, info: list[Any]) -> dict[str, int | None]:
        """Node memory in MiB from the node's statistics over all cells.

        getInfo() reports NUMA node 0 only on some machines, so it gives the total only for
        drivers without node statistics (the test driver), and free/buffers/cached are then
        unknown (None): the test driver's getFreeMemory() answers 0, which would be a lie.
        """
        stats = self._optional(self.conn.getMemoryStats, libvirt.VIR_NODE_MEMORY_STATS_ALL_CELLS, 0)
        if not stats or "total" not in stats:
            return {"total_mb": int(info[1]), "free_mb": None, "buffers_mb": None, "cached_mb": None}
        return {
            "total_mb": stats["total"] // _KIB_PER_MIB,
            "free_mb": _mib(stats.get("free")),
            "buffers_mb": _mib(stats.get("buffers")),
            "cached_mb": _mib(stats.get("cached")),
        }

    def _cpu_times(self) -> dict[str, int]:
        """Node CPU time counters over all CPUs, in nanoseconds (kernel, user, idle, iowait)."""
        stats = self._optional(self.conn.getCPUStats, libvirt.VIR_NODE_CPU_STATS_ALL_CPUS, 0) or {}
        return {f"cpu_{key}_ns": int(value) for key, value in sorted(stats.items())}

    def _pools(self) -> list[dict[str, Any]]:
        pools = []
        for pool in self._call(self.conn.listAllStoragePools, 0):
            _state, capacity, allocation, available = self._call(pool.info)
            pools.append({
                "name": pool.name(),
                "active": bool(self._call(pool.isActive)),
                "capacity_mb": capacity // _BYTES_PER_MIB,
                "allocation_mb": allocation // _BYTES_PER_MIB,
                "available_mb": available // _BYTES_PER_MIB,
            })
        return sorted(pools, key=lambda pool: pool["name"])

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
            # Its pinned CPUs and PCI devices, which a domain Berth did not make holds too.
            "holds": host_devices.domain_holdings(root),
        }

    def _disk(self, path: str) -> dict[str, Any]:
        try:
            vol = self._call(self.conn.storageVolLookupByPath, path)
            capacity_mb = self._call(vol.info)[1] // _BYTES_PER_MIB
            pool = self._call(vol.storagePoolLookupByVolume).name()
        except HypervisorError:
            # Not a pool volume: it takes nothing from the instance pool.
            capacity_mb, pool = 0, None
        return {"path": path, "capacity_mb": capacity_mb, "pool": pool}

    # ---- building and removing instances ---------------------------------------------------

    def create_volume(self, pool_name: str, name: str, capacity_gb: int,
                      backing: dict[str, str] | None = None, capacity_mb: int | None = None) -> str:
        """Create a sparse qcow2 volume through the storage API and return its path.

        With ``backing`` ({path, format}) the volume is a copy-on-write overlay of that base
        volume, as Nova's qcow2 image backend makes one per instance. ``capacity_mb``, where
        given, is its size instead of ``capacity_gb`` (a swap disk is sized in MiB).
        """
        pool = self._call(self.conn.storagePoolLookupByName, pool_name)
        size_bytes = None if capacity_mb is None else capacity_mb * _BYTES_PER_MIB
        vol_xml = _volume_xml(name, capacity_gb, backing, size_bytes=size_bytes)
        vol = self._call(pool.createXML, vol_xml, 0)
        return vol.path()

    def volume(self, pool_name: str, name: str, refresh: bool = True) -> dict[str, Any] | None:
        """{name, path, format, capacity_mb} of a volume in a pool, or None if it is not there.

        Only volumes the pool lists count: a name can never reach outside the pool this way.
        ``refresh=False`` trusts the pool's last scan (several lookups right after one).
        """
        pool = self._call(self.conn.storagePoolLookupByName, pool_name)
        if refresh:
            self._call(pool.refresh, 0)
        if name not in self._call(pool.listVolumes):
            return None
        vol = self._call(pool.storageVolLookupByName, name)
        root = ET.fromstring(self._call(vol.XMLDesc, 0))
        fmt = root.find("target/format")
        info = self._call(vol.info)
        path = self._call(vol.path)
        return {
            "name": name,
            "path": path,
            "type": VOLUME_TYPES.get(info[0], "unknown"),
            "format": fmt.get("type", "raw") if fmt is not None else "raw",
            "capacity_mb": int(info[1]) // _BYTES_PER_MIB,
            "link": self.is_link(path),
            # The image's own backing file, as its qcow2 header names it (relative or absolute).
            "backing": root.findtext("backingStore/path") or None,
        }

    def is_link(self, path: str) -> bool | None:
        """Whether ``path`` is a symbolic link on the hypervisor; None where that cannot be seen.

        libvirt's storage API shows a link in a directory pool as an ordinary volume (same name,
        path, key and the target's size), so the link is looked for in the filesystem as the
        daemon itself sees it: /proc/<daemon pid>/root, for a daemon on this machine reached
        through its unix socket. A remote daemon's filesystem is out of reach: None.
        """
        if self._daemon_pid is None:
            self._daemon_pid = daemon_pid(self.uri) or 0
        if not self._daemon_pid:  # remote, or (PID 0) a daemon in another PID namespace
            return None
        try:
            mode = os.lstat(os.path.join(f"/proc/{self._daemon_pid}/root", path.lstrip("/"))).st_mode
        except OSError:
            return None  # not allowed to look (a non-root controller), or gone meanwhile
        return stat.S_ISLNK(mode)

    def volume_users(self, pool_name: str, path: str, domain_uuid: str) -> list[str]:
        """What else needs the volume at ``path``: domains other than ``domain_uuid`` with it as a
        disk or CD-ROM, and volumes of the pool backed by it."""
        users = []
        for dom in self._call(self.conn.listAllDomains, 0):
            if self._call(dom.UUIDString) == domain_uuid:
                continue
            root = ET.fromstring(self._call(dom.XMLDesc, 0))
            if path in (source.get("file") for source in root.findall("devices/disk/source")):
                users.append(f"domain {self._call(dom.name)}")
        pool = self._call(self.conn.storagePoolLookupByName, pool_name)
        for vol in self._call(pool.listAllVolumes, 0):
            if ET.fromstring(self._call(vol.XMLDesc, 0)).findtext("backingStore/path") == path:
                users.append(f"volume {self._call(vol.name)}")
        return users

    def pool_path(self, pool_name: str) -> str:
        """Where a directory pool keeps its volumes (its target path)."""
        pool = self._call(self.conn.storagePoolLookupByName, pool_name)
        root = ET.fromstring(self._call(pool.XMLDesc, 0))
        return root.findtext("target/path") or ""

    def read_file_tail(self, directory: str, file_name: str, max_bytes: int) -> tuple[bytes, int] | None:
        """The last ``max_bytes`` (at most) of the regular file ``file_name`` in ``directory`` on the
        hypervisor, with the file's size in bytes; None if there is no such file.

        libvirt reads a host's file only as a storage volume: the volume is downloaded from an
        offset with a length (virStorageVolDownload), so no more than ``max_bytes`` ever cross
        the connection, whatever the file's size. The pool is the active one whose target is
        ``directory`` where the operator has one; else a transient directory pool started for
        this read and destroyed after it (nothing of it persists, not even across a daemon
        restart). ``file_name`` must be one path component, ``directory`` an absolute path: the
        caller builds both from the operator's settings and a validated name.
        """
        if "/" in file_name or file_name in ("", ".", ".."):
            raise ValueError(f"{file_name!r} is not a file name")
        for last_try in (False, True):
            pool, transient = self._directory_pool(directory)
            try:
                return self._volume_tail(pool, file_name, max_bytes)
            except HypervisorError:
                # Another read's transient pool, read through, may be destroyed under this
                # read: once, start again (with a pool of this read's own, most likely).
                if last_try or transient or not self._call(pool.name).startswith(READER_POOL_PREFIX):
                    raise
            finally:
                if transient:
                    try:
                        self._call(pool.destroy)
                    except HypervisorError:
                        pass  # transient: gone at the daemon's next start; the next read uses it meanwhile
        raise AssertionError("unreachable: the last try returns or raises")

    def _volume_tail(self, pool: Any, file_name: str, max_bytes: int) -> tuple[bytes, int] | None:
        vol = self._pool_volume(pool, file_name)
        if vol is None:
            return None
        path = self._call(vol.path)
        kind = VOLUME_TYPES.get(self._call(vol.info)[0], "unknown")
        if kind != "file" or self.is_link(path):
            # Only the hypervisor's own daemon writes there; anything but a plain file was
            # put there by someone else, and is not read.
            raise HypervisorError(self.host, f"{path} is not a regular file ({'a link' if kind == 'file' else kind})")
        # The file's size itself (physical), not a capacity probed from its first bytes, which
        # the guest wrote.
        size_bytes = int(self._call(vol.infoFlags, libvirt.VIR_STORAGE_VOL_GET_PHYSICAL)[2])
        stream = self._call(self.conn.newStream, 0)
        self._call(vol.download, stream, max(0, size_bytes - max_bytes), max_bytes, 0)

        def receive() -> bytes:
            received, total = [], 0
            for chunk in iter(lambda: stream.recv(max_bytes), b""):
                received.append(chunk)
                total += len(chunk)
                if total > max_bytes:
                    stream.abort()
                    raise HypervisorError(self.host, f"sent more of {path} than the {max_bytes} bytes asked for")
            stream.finish()
            return b"".join(received)

        return call_with_timeout(self.host, self.timeout_s, receive), size_bytes

    def _directory_pool(self, directory: str) -> tuple[Any, bool]:
        """The active storage pool whose target is ``directory``, and whether it is a transient
        one started here for the caller (which destroys it)."""
        try:
            return self._call(self.conn.storagePoolLookupByTargetPath, directory), False
        except HypervisorError as exc:
            if _error_code(exc) != libvirt.VIR_ERR_NO_STORAGE_POOL:
                raise
        pool = ET.Element("pool", type="dir")
        ET.SubElement(pool, "name").text = f"{READER_POOL_PREFIX}{uuidlib.uuid4().hex[:12]}"
        ET.SubElement(ET.SubElement(pool, "target"), "path").text = directory
        try:
            return self._call(self.conn.storagePoolCreateXML, ET.tostring(pool, encoding="unicode"), 0), True
        except HypervisorError as refused:
            # Another read's transient pool came first (libvirt allows one pool per directory):
            # read through it. An inactive pool of the operator's over the directory also
            # refuses a second one; that one Berth does not start.
            try:
                return self._call(self.conn.storagePoolLookupByTargetPath, directory), False
            except HypervisorError:
                why = _error_message(refused)
                raise HypervisorError(self.host, f"no active storage pool has {directory} as its target, and "
                                                 f"Berth could not start one for the read: {why}") from refused

    def _pool_volume(self, pool: Any, name: str) -> Any:
        """The volume ``name`` of ``pool``, the pool rescanned first if it does not list it yet
        (a file made since its last scan); None if it is not there."""
        for rescan in (False, True):
            if rescan:
                self._call(pool.refresh, 0)
            try:
                return self._call(pool.storageVolLookupByName, name)
            except HypervisorError as exc:
                if _error_code(exc) != libvirt.VIR_ERR_NO_STORAGE_VOL:
                    raise
        return None

    def network_names(self) -> list[str]:
        return sorted(self._call(self.conn.listNetworks) + self._call(self.conn.listDefinedNetworks))

    def domain_xml(self, uuid: str, inactive: bool = False) -> str | None:
        """The domain's XML (its persistent definition with ``inactive``), or None if it is not there."""
        try:
            dom = self._call(self.conn.lookupByUUIDString, uuid)
        except HypervisorError:
            return None
        return self._call(dom.XMLDesc, libvirt.VIR_DOMAIN_XML_INACTIVE if inactive else 0)

    def volume_names(self, pool_name: str) -> list[str]:
        pool = self._call(self.conn.storagePoolLookupByName, pool_name)
        self._call(pool.refresh, 0)
        return sorted(self._call(pool.listVolumes))

    def upload_volume(self, pool_name: str, name: str, reader: BinaryIO, size_bytes: int, fmt: str) -> str:
        """Create a volume of exactly ``size_bytes`` and fill it from ``reader`` through a libvirt
        stream, UPLOAD_CHUNK_BYTES at a time (so the controller holds one chunk, whatever the
        image's size), within a time limit that grows with the size (upload_timeout_s).

        Works over any libvirt connection (qemu+ssh too): nothing is copied with scp.
        """
        pool = self._call(self.conn.storagePoolLookupByName, pool_name)
        vol = self._call(pool.createXML, _volume_xml(name, 0, None, fmt=fmt, size_bytes=size_bytes), 0)
        stream = None
        try:
            stream = self._call(self.conn.newStream, 0)
            self._call(vol.upload, stream, 0, size_bytes, 0)

            def send_all() -> None:
                left = size_bytes
                while left:
                    chunk = reader.read(min(UPLOAD_CHUNK_BYTES, left))
                    if not chunk:
                        raise HypervisorError(self.host, f"upload of {name}: the file ended {left} bytes short "
                                                         f"of the {size_bytes} it had")
                    sent = 0
                    while sent < len(chunk):
                        sent += stream.send(chunk[sent:] if sent else chunk)
                    left -= len(chunk)
                stream.finish()

            call_with_timeout(self.host, self.upload_timeout_s(size_bytes), send_all)
        except HypervisorError:
            if stream is not None:
                try:
                    stream.abort()  # the daemon drops what it was sent; a timed-out send stops
                except libvirt.libvirtError:
                    pass
            self._call(vol.delete, 0)
            raise
        return vol.path()

    def upload_timeout_s(self, size_bytes: int) -> float:
        """How long an upload of ``size_bytes`` may take: the call timeout, plus the time the
        bytes take at UPLOAD_FLOOR_BYTES_PER_S."""
        return self.timeout_s + size_bytes / UPLOAD_FLOOR_BYTES_PER_S

    def volume_digest(self, pool_name: str, name: str, algorithm: str) -> str:
        """The hex digest (hashlib's ``algorithm``) of a volume's bytes, read through a libvirt
        stream: what an image by URL is checked against when the pool already has its name."""
        digest = hashlib.new(algorithm)
        self.download_volume(pool_name, name, digest.update)
        return digest.hexdigest()

    def download_volume(self, pool_name: str, name: str, write: Callable[[bytes], Any]) -> None:
        """A volume's bytes, as its file holds them, handed to ``write`` chunk by chunk through a
        libvirt stream (within the transfer timeout)."""
        pool = self._call(self.conn.storagePoolLookupByName, pool_name)
        vol = self._call(pool.storageVolLookupByName, name)
        stream = self._call(self.conn.newStream, 0)
        self._call(vol.download, stream, 0, 0, 0)

        def pump() -> None:
            for chunk in iter(lambda: stream.recv(1024 * 1024), b""):
                write(chunk)
            stream.finish()

        call_with_timeout(self.host, self.transfer_timeout_s, pump)

    def flatten_volume(self, pool_name: str, name: str, new_name: str, running: str | None = None) -> str:
        """A standalone qcow2 copy ``new_name`` of volume ``name`` in the same pool, its backing
        chain read through; returns its path. Where the domain ``running`` (a UUID) has it open,
        QEMU itself copies it (a block copy, ended before any pivot: the domain keeps its disk),
        since QEMU's lock keeps qemu-img away; else libvirt's createXMLFrom runs qemu-img convert."""
        pool = self._call(self.conn.storagePoolLookupByName, pool_name)
        source = self._call(pool.storageVolLookupByName, name)
        if running is None:
            capacity = int(ET.fromstring(self._call(source.XMLDesc, 0)).findtext("capacity") or 0)
            made = call_with_timeout(self.host, self.transfer_timeout_s, pool.createXMLFrom,
                                     _volume_xml(new_name, 0, None, fmt="qcow2", size_bytes=capacity), source, 0)
            return str(self._call(made.path))
        dom = self._call(self.conn.lookupByUUIDString, running)
        source_path = self._call(source.path)
        disk_found = next((disk for disk in ET.fromstring(self._call(dom.XMLDesc, 0)).findall("devices/disk")
                           if disk.find("source") is not None and disk.find("source").get("file") == source_path
                           and disk.find("target") is not None), None)
        if disk_found is None:
            raise HypervisorError(self.host, f"the running domain {running} has no disk {source_path}")
        device = disk_found.find("target").get("dev")
        target = os.path.join(os.path.dirname(source_path), new_name)
        mirror = disk_found.find("mirror")
        mirror_source = mirror.find("source") if mirror is not None else None
        if mirror is not None and target in (mirror.get("file"), None if mirror_source is None
                                             else mirror_source.get("file")):
            # A copy into this very file whose caller died (QEMU keeps mirroring): ended first.
            self._call(dom.blockJobAbort, device, 0)
        disk = ET.Element("disk", type="file")
        ET.SubElement(disk, "source", file=target)
        ET.SubElement(disk, "driver", type="qcow2")

        def copy() -> None:
            dom.blockCopy(device, ET.tostring(disk, encoding="unicode"), {}, libvirt.VIR_DOMAIN_BLOCK_COPY_TRANSIENT_JOB)
            # Its own deadline: call_with_timeout gives up on this thread, which must not poll on.
            deadline, job = time.monotonic() + self.transfer_timeout_s, True
            try:
                while True:
                    info = dom.blockJobInfo(device, 0)
                    if not info:
                        job = False
                        raise HypervisorError(self.host, f"the block copy of {source_path} stopped before it was done")
                    if info.get("end") and info.get("cur") == info.get("end"):
                        break
                    if time.monotonic() > deadline:
                        raise HypervisorError(self.host, f"the block copy of {source_path} was not done within "
                                                         f"{self.transfer_timeout_s:g} s")
                    time.sleep(0.2)
            finally:
                if job:  # ended before any pivot: the domain keeps its own disk
                    dom.blockJobAbort(device, 0)

        try:
            call_with_timeout(self.host, self.transfer_timeout_s, copy)
        finally:
            self._call(pool.refresh, 0)  # the copy's file becomes a volume of the pool (or is gone)
        return target

    def fs_freeze(self, uuid: str) -> str | None:
        """Freeze the running guest's file systems through its QEMU guest agent; None once they
        are frozen, else why not (no agent, or it did not answer)."""
        dom = self._call(self.conn.lookupByUUIDString, uuid)
        try:
            self._call(dom.fsFreeze, None, 0)
        except HypervisorError as exc:
            return _error_message(exc)
        return None

    def fs_thaw(self, uuid: str) -> None:
        dom = self._call(self.conn.lookupByUUIDString, uuid)
        self._call(dom.fsThaw, None, 0)

    def copy_volume_to(self, target: Hypervisor, pool_name: str, name: str) -> None:
        """Copy a volume into the same-named pool of another hypervisor through libvirt streams.

        The target volume gets the source's format, capacity and backing image (a qcow2 overlay
        stays an overlay: its base image must already be in the target pool).
        """
        src_pool = self._call(self.conn.storagePoolLookupByName, pool_name)
        src_vol = self._call(src_pool.storageVolLookupByName, name)
        dst_vol = target.create_volume_like(self, pool_name, name)
        try:
            download = self._call(self.conn.newStream, 0)
            upload = target._call(target.conn.newStream, 0)
            self._call(src_vol.download, download, 0, 0, 0)
            target._call(dst_vol.upload, upload, 0, 0, 0)

            def pump() -> None:
                while True:
                    chunk = download.recv(1024 * 1024)
                    if not chunk:
                        break
                    view = memoryview(chunk)
                    while view:
                        view = view[upload.send(view.tobytes()):]
                download.finish()
                upload.finish()

            call_with_timeout(self.host, self.transfer_timeout_s, pump)
        except HypervisorError:
            target._call(dst_vol.delete, 0)
            raise

    def volume_xml(self, pool_name: str, name: str) -> str:
        pool = self._call(self.conn.storagePoolLookupByName, pool_name)
        vol = self._call(pool.storageVolLookupByName, name)
        return self._call(vol.XMLDesc, 0)

    def create_volume_like(self, source: Hypervisor, pool_name: str, name: str) -> Any:
        """An empty volume here with the format, capacity and backing image of ``source``'s volume;
        returns it (libvirt's virStorageVol)."""
        src_xml = ET.fromstring(source.volume_xml(pool_name, name))
        fmt = src_xml.find("target/format")
        backing = None
        base_path = src_xml.findtext("backingStore/path")
        if base_path:
            base = self.volume(pool_name, base_path.rsplit("/", 1)[-1])
            if base is None:
                raise HypervisorError(self.host, f"base image of {name} is not in pool {pool_name}")
            backing = {"path": base["path"], "format": base["format"]}
        pool = self._call(self.conn.storagePoolLookupByName, pool_name)
        vol_xml = _volume_xml(name, 0, backing, fmt=fmt.get("type", "raw") if fmt is not None else "raw",
                              size_bytes=int(src_xml.findtext("capacity") or 0))
        return self._call(pool.createXML, vol_xml, 0)

    def autostart(self, uuid: str) -> bool:
        dom = self._call(self.conn.lookupByUUIDString, uuid)
        return bool(self._call(dom.autostart))

    def stop(self, uuid: str) -> bool:
        """Power a domain off (destroy); True if it was running."""
        dom = self._call(self.conn.lookupByUUIDString, uuid)
        if not self._call(dom.isActive):
            return False
        self._call(dom.destroy)
        return True

    def domain_state(self, uuid: str) -> str | None:
        """The domain's state, by DOMAIN_STATES' names (running, paused, shutoff...), or None
        if there is no such domain. One call, where find_domain reads the whole definition."""
        try:
            dom = self._call(self.conn.lookupByUUIDString, uuid)
        except HypervisorError as exc:
            if _error_code(exc) == libvirt.VIR_ERR_NO_DOMAIN:
                return None
            raise  # a timeout or a lost connection is not "no such domain"
        state, _reason = self._call(dom.state, 0)
        return DOMAIN_STATES.get(state, "unknown")

    def shutdown(self, uuid: str) -> None:
        """Ask the guest to shut down (for QEMU, libvirt presses the ACPI power button) and
        return at once: whether and when the guest does is up to it."""
        dom = self._call(self.conn.lookupByUUIDString, uuid)
        self._call(dom.shutdown)

    def suspend(self, uuid: str) -> None:
        """Pause a running domain: its vCPUs stop, its memory stays (Nova's pause)."""
        dom = self._call(self.conn.lookupByUUIDString, uuid)
        self._call(dom.suspend)

    def resume(self, uuid: str) -> None:
        dom = self._call(self.conn.lookupByUUIDString, uuid)
        self._call(dom.resume)

    def resize_volume(self, pool_name: str, name: str, capacity_mb: int, shrink: bool = False) -> None:
        """Give a volume a new capacity (its virtual size; a qcow2 volume stays sparse). Growing
        only, unless ``shrink``: then the part cut off must hold nothing anyone wrote."""
        pool = self._call(self.conn.storagePoolLookupByName, pool_name)
        vol = self._call(pool.storageVolLookupByName, name)
        flags = libvirt.VIR_STORAGE_VOL_RESIZE_SHRINK if shrink else 0
        self._call(vol.resize, capacity_mb * _BYTES_PER_MIB, flags)

    def can_live_migrate(self) -> bool:
        """Whether this host's capabilities offer live migration."""
        caps = ET.fromstring(self._call(self.conn.getCapabilities))
        return caps.find("host/migration_features/live") is not None

    def host_cpu_xml(self) -> str:
        """This host's own CPU as its capabilities describe it (a ``<cpu>`` of the host kind)."""
        cpu = ET.fromstring(self._call(self.conn.getCapabilities)).find("host/cpu")
        if cpu is None:
            raise HypervisorError(self.host, "its capabilities describe no host CPU")
        return ET.tostring(cpu, encoding="unicode")

    def compare_cpu(self, cpu_xml: str, domain_type: str | None = None, arch: str | None = None,
                    host_kind: bool = False) -> str | None:
        """Whether this host can run the CPU ``cpu_xml``: None if it can, else libvirt's reason,
        which names the features it lacks (asked with VIR_CONNECT_COMPARE_CPU_FAIL_INCOMPATIBLE).

        A guest CPU is compared with what this host's hypervisor gives a guest of ``domain_type``
        and ``arch`` (compareHypervisorCPU: the KVM view of the CPU, not the bare silicon),
        where the daemon has that call (libvirt 4.4); else, and for a ``host_kind`` CPU (another
        host's own, which a host-passthrough guest gets whole), with this host's own CPU
        (compareCPU). Any other libvirt error raises HypervisorError, and a daemon that cannot
        compare at all raises NotSupported."""
        flags = libvirt.VIR_CONNECT_COMPARE_CPU_FAIL_INCOMPATIBLE
        # A binding built against libvirt older than 4.4 has no compareHypervisorCPU.
        hypervisor_compare = None if host_kind else getattr(self.conn, "compareHypervisorCPU", None)
        try:
            answer = None
            if hypervisor_compare is not None:
                try:
                    answer = self._call(hypervisor_compare, None, arch, None, domain_type, cpu_xml, flags)
                except HypervisorError as exc:
                    if _error_code(exc) != libvirt.VIR_ERR_NO_SUPPORT:
                        raise
            if answer is None:
                answer = self._call(self.conn.compareCPU, cpu_xml, flags)
        except HypervisorError as exc:
            if _error_code(exc) == libvirt.VIR_ERR_CPU_INCOMPATIBLE:
                return str(exc).removeprefix(f"{self.host}: ")
            if _error_code(exc) == libvirt.VIR_ERR_NO_SUPPORT:
                raise NotSupported(self.host, f"it cannot compare CPUs: {exc}") from exc
            raise
        if answer == libvirt.VIR_CPU_COMPARE_INCOMPATIBLE:
            # The flag makes libvirt raise the error above instead; a daemon that ignores it
            # names no feature.
            return "the CPU is incompatible with host CPU"
        return None

    def baseline_cpu(self, cpu_xmls: list[str], domain_type: str, arch: str) -> str:
        """The baseline of ``cpu_xmls`` for ``domain_type`` guests of ``arch``, migratable
        features only (baselineHypervisorCPU, libvirt 4.4; else the older baselineCPU, which
        knows no domain type). NotSupported where the daemon has neither."""
        flags = libvirt.VIR_CONNECT_BASELINE_CPU_MIGRATABLE
        hypervisor_baseline = getattr(self.conn, "baselineHypervisorCPU", None)
        try:
            if hypervisor_baseline is not None:
                try:
                    return self._call(hypervisor_baseline, None, arch, None, domain_type, cpu_xmls, flags)
                except HypervisorError as exc:
                    if _error_code(exc) != libvirt.VIR_ERR_NO_SUPPORT:
                        raise
            return self._call(self.conn.baselineCPU, cpu_xmls, flags)
        except HypervisorError as exc:
            if _error_code(exc) == libvirt.VIR_ERR_NO_SUPPORT:
                raise NotSupported(self.host, f"it cannot compute a baseline CPU: {exc}") from exc
            raise

    def live_migrate(self, uuid: str, target: Hypervisor, address: str | None = None,
                     definition: str | None = None, shared_paths: Sequence[str] = ()) -> None:
        """Live migration, peer to peer, copying the non-shared disks; the target's volumes exist.
        ``shared_paths``: disk files both hosts see (a shared pool's), which QEMU must not copy
        (onto themselves): the disks copied are then named (VIR_MIGRATE_PARAM_MIGRATE_DISKS).

        ``address``: where the source's QEMU reaches the target's for memory and disks; by default
        libvirt uses the target's hostname, which must then resolve from the source.
        ``definition``: the domain XML the target keeps as its persistent definition; None keeps
        the source's. The running domain's own definition comes with the migration.
        """
        dom = self._call(self.conn.lookupByUUIDString, uuid)
        flags = (libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PEER2PEER | libvirt.VIR_MIGRATE_PERSIST_DEST
                 | libvirt.VIR_MIGRATE_UNDEFINE_SOURCE | libvirt.VIR_MIGRATE_NON_SHARED_INC)
        params = {}
        if address:
            uri = f"tcp://{address}"
            params = {libvirt.VIR_MIGRATE_PARAM_URI: uri, libvirt.VIR_MIGRATE_PARAM_DISKS_URI: uri}
        if definition is not None:
            params[libvirt.VIR_MIGRATE_PARAM_PERSIST_XML] = definition
        if shared_paths:
            live = ET.fromstring(self._call(dom.XMLDesc, 0))
            # What libvirt copies by itself without the list: the writable disks with a source.
            params[libvirt.VIR_MIGRATE_PARAM_MIGRATE_DISKS] = [
                disk.find("target").get("dev") for disk in live.findall("devices/disk")
                if disk.get("device", "disk") == "disk" and disk.find("readonly") is None
                and disk.find("source") is not None and disk.find("source").get("file") not in shared_paths]
        call_with_timeout(self.host, self.transfer_timeout_s, dom.migrateToURI3, target.uri, params, flags)

    def delete_volume(self, pool_name: str, name: str) -> bool:
        """Delete a volume if it exists; True if one was deleted."""
        pool = self._call(self.conn.storagePoolLookupByName, pool_name)
        # No pool refresh here: libvirt refuses it while another run creates a volume in the pool
        # ("asynchronous jobs running"), and the daemon knows the volumes Berth made through it.
        if name not in self._call(pool.listVolumes):
            return False
        vol = self._call(pool.storageVolLookupByName, name)
        self._call(vol.delete, 0)
        return True

    def define(self, domain_xml: str) -> str:
        """Define a persistent domain (not started); returns its UUID."""
        dom = self._call(self.conn.defineXML, domain_xml)
        return dom.UUIDString()

    def start(self, uuid: str, autostart: bool | None = False) -> None:
        """Start a defined domain; set its autostart flag too, unless ``autostart`` is None."""
        dom = self._call(self.conn.lookupByUUIDString, uuid)
        if autostart is not None:
            self._call(dom.setAutostart, 1 if autostart else 0)
        self._call(dom.create)

    def find_domain(self, uuid: str) -> dict[str, Any] | None:
        try:
            dom = self._call(self.conn.lookupByUUIDString, uuid)
        except HypervisorError:
            return None
        return self._domain(dom)

    def find_domain_named(self, key: str) -> dict[str, Any] | None:
        """A domain by its UUID or its name (as virsh takes either), or None."""
        lookups = (self.conn.lookupByUUIDString, self.conn.lookupByName) if _is_uuid(key) else (self.conn.lookupByName,)
        for lookup in lookups:
            try:
                dom = self._call(lookup, key)
            except HypervisorError as exc:
                if _error_code(exc) == libvirt.VIR_ERR_NO_DOMAIN:
                    continue
                raise  # a timeout or a lost connection is not "no such domain"
            return {**self._domain(dom), "persistent": bool(self._call(dom.isPersistent))}
        return None

    def interface_addresses(self, uuid: str, sources: Sequence[str] = ADDRESS_SOURCES) -> dict[str, Any] | None:
        """A domain's network interfaces and the addresses libvirt finds for them; None if the
        domain is not on this host.

        ``sources`` are asked in order, ``lease`` always before those the guest reports, and the
        first that gives a usable address wins: ``lease`` (the DHCP leases of libvirt's virtual
        networks: interfaces of type network), ``agent`` (the QEMU guest agent, where the domain
        has its channel and the guest runs it), ``arp`` (the host's ARP table: any interface the
        host has seen traffic from). Only IP addresses are kept, and a guest-reported one only
        inside a network its interface is attached to (_guest_addresses.vetted). A source that
        cannot answer for this domain, or whose every address was refused, is skipped with the
        reason in ``skipped``; a timeout or a lost connection raises HypervisorError.

        Returns {state, interfaces [{type, source, mac}], metadata (Berth's, or None), source
        (the one that answered, or None), addresses [{interface, mac, type, address, prefix}],
        asked (the sources libvirt was asked), skipped {source: why it gave nothing}}.
        """
        try:
            dom = self._call(self.conn.lookupByUUIDString, uuid)
        except HypervisorError as exc:
            if _error_code(exc) == libvirt.VIR_ERR_NO_DOMAIN:
                return None
            raise
        state = DOMAIN_STATES.get(self._call(dom.state, 0)[0], "unknown")
        root = ET.fromstring(self._call(dom.XMLDesc, 0))
        interfaces = _interfaces(root)
        berth = _berth_metadata(root)
        found: dict[str, Any] = {
            "state": state, "interfaces": interfaces, "metadata": berth["metadata"] if berth else None,
            "source": None, "addresses": [], "asked": [], "skipped": {},
        }
        networks_by_mac: dict[str, list[Any]] | None = None  # read when a guest first reports one
        for source in _guest_addresses.trust_order(sources):
            why = _address_source_unusable(source, state, interfaces, root)
            if why is None:
                found["asked"].append(source)
                addresses, why = self._addresses_from(dom, source)
                if addresses:
                    if networks_by_mac is None and source in _guest_addresses.GUEST_REPORTED_SOURCES:
                        networks_by_mac = self._interface_networks(interfaces)
                    addresses, refused = _guest_addresses.vetted(addresses, source, networks_by_mac or {})
                    if addresses:
                        found.update(source=source, addresses=addresses)
                        break
                    why = "refused " + "; ".join(refused)
            found["skipped"][source] = why or "no address"
        return found

    def _interface_networks(self, interfaces: list[dict[str, Any]]) -> dict[str, list[Any]]:
        """{MAC: the IP networks its interface is attached to}, from the libvirt networks that
        this hypervisor defines: the one an interface of type network names, or the one whose
        bridge an interface of type bridge is on. Any other interface is on no network Berth
        knows of (its guest-reported addresses are refused)."""
        by_name: dict[str, list[Any]] = {}
        by_bridge: dict[str, list[Any]] = {}
        try:
            networks = self._call(self.conn.listAllNetworks, 0)
        except HypervisorError as exc:
            if _connection_lost(exc):
                raise
            networks = []  # not allowed or not supported here: no network vouches for an address
        for network in networks:
            try:
                root = ET.fromstring(self._call(network.XMLDesc, 0))
            except HypervisorError as exc:
                if _connection_lost(exc):
                    raise
                continue  # removed meanwhile: it has no interfaces to vouch for
            networks = _guest_addresses.parse_networks(
                (ip.get("address"), ip.get("prefix"), ip.get("netmask")) for ip in root.findall("ip"))
            by_name[root.findtext("name") or ""] = networks
            bridge = root.find("bridge")
            if bridge is not None and bridge.get("name"):
                by_bridge[bridge.get("name")] = networks
        known = {"network": by_name, "bridge": by_bridge}
        return {interface["mac"]: known.get(interface["type"], {}).get(interface["source"] or "", [])
                for interface in interfaces}

    def _addresses_from(self, dom: Any, source: str) -> tuple[list[dict[str, Any]], str | None]:
        """One source's addresses of a running domain, or ([], why) where it cannot answer."""
        kinds = {"lease": libvirt.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE,
                 "agent": libvirt.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT,
                 "arp": libvirt.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_ARP}
        try:
            found = self._call(dom.interfaceAddresses, kinds[source], 0) or {}
        except HypervisorError as exc:
            # The domain stopped meanwhile, the agent does not answer, the driver lacks the
            # source or fails at it (libvirt 9.0 cannot read some kernels' ARP table: "wrong
            # nlmsg len"): this source has nothing to say. A timeout or a lost connection is the
            # host's, and raises.
            if _connection_lost(exc):
                raise
            return [], str(exc).removeprefix(f"{self.host}: ")
        families = {libvirt.VIR_IP_ADDR_TYPE_IPV4: "ipv4", libvirt.VIR_IP_ADDR_TYPE_IPV6: "ipv6"}
        addresses = [
            {"interface": name, "mac": (details.get("hwaddr") or "").lower(),
             "type": families.get(item.get("type"), "unknown"), "address": item.get("addr"),
             "prefix": item.get("prefix")}
            for name, details in sorted(found.items())
            for item in details.get("addrs") or []
            if item.get("addr")
        ]
        return addresses, None

    def set_berth_metadata(self, uuid: str, fields: dict[str, Any] | None) -> None:
        """Write Berth's metadata element (uuid, name, flavor, and the ``metadata`` items) into a
        domain, or remove it (None).

        The running domain and its persistent definition both get it, so that the tracker
        attributes the domain to its instance now and after a restart.
        """
        dom = self._call(self.conn.lookupByUUIDString, uuid)
        flags = 0
        if self._call(dom.isActive):
            flags |= libvirt.VIR_DOMAIN_AFFECT_LIVE
        if self._call(dom.isPersistent):
            flags |= libvirt.VIR_DOMAIN_AFFECT_CONFIG
        element = None
        if fields is not None:
            root = ET.Element("instance")
            for key in ("uuid", "name", "flavor"):
                ET.SubElement(root, key).text = fields[key]
            for key, value in sorted((fields.get("metadata") or {}).items()):
                ET.SubElement(root, "meta", key=key).text = value
            element = ET.tostring(root, encoding="unicode")
        self._call(dom.setMetadata, libvirt.VIR_DOMAIN_METADATA_ELEMENT, element,
                   METADATA_PREFIX if element else None, METADATA_NAMESPACE, flags)

    def _device_flags(self, dom: Any) -> tuple[int, bool]:
        """AFFECT_CONFIG, with AFFECT_LIVE where the domain runs; and whether it runs."""
        live = bool(self._call(dom.isActive))
        return libvirt.VIR_DOMAIN_AFFECT_CONFIG | (libvirt.VIR_DOMAIN_AFFECT_LIVE if live else 0), live

    def attach_disk(self, uuid: str, disk_xml: str) -> bool:
        """Attach a disk to the definition, and hot-plug it where the domain runs (one call:
        libvirt applies both or neither)."""
        dom = self._call(self.conn.lookupByUUIDString, uuid)
        flags, live = self._device_flags(dom)
        self._call(dom.attachDeviceFlags, disk_xml, flags)
        return live

    def detach_disk(self, uuid: str, disk_xml: str) -> bool:
        """Detach a disk from the definition, and unplug it where the domain runs (the guest
        releases it: libvirt waits for it a few seconds)."""
        dom = self._call(self.conn.lookupByUUIDString, uuid)
        flags, live = self._device_flags(dom)
        self._call(dom.detachDeviceFlags, disk_xml, flags)
        return live

    def remove_domain(self, uuid: str, keep_nvram: bool = False) -> bool:
        """Stop and undefine a domain if it exists, with its NVRAM file unless ``keep_nvram``;
        True if one was removed."""
        try:
            dom = self._call(self.conn.lookupByUUIDString, uuid)
        except HypervisorError:
            return False
        if self._call(dom.isActive):
            self._call(dom.destroy)
        flags = libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE | (
            libvirt.VIR_DOMAIN_UNDEFINE_KEEP_NVRAM if keep_nvram else libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
        self._call(dom.undefineFlags, flags)
        return True


def _error_code(exc: HypervisorError) -> int | None:
    """libvirt's error code behind a HypervisorError (None for a timeout or a non-libvirt error)."""
    cause = exc.__cause__
    return cause.get_error_code() if isinstance(cause, libvirt.libvirtError) else None


def _error_message(exc: HypervisorError) -> str:
    """libvirt's own message behind a HypervisorError, without the host it already names."""
    cause = exc.__cause__
    return (cause.get_error_message() or str(cause)) if isinstance(cause, libvirt.libvirtError) else str(exc)


def _connection_lost(exc: HypervisorError) -> bool:
    """The call timed out, or libvirt lost the connection (an RPC or remote error), as opposed to
    an error of the call itself."""
    cause = exc.__cause__
    if not isinstance(cause, libvirt.libvirtError):
        return True
    return cause.get_error_domain() in (libvirt.VIR_FROM_RPC, libvirt.VIR_FROM_REMOTE) or \
        cause.get_error_code() in (libvirt.VIR_ERR_NO_CONNECT, libvirt.VIR_ERR_INVALID_CONN)


def _is_uuid(text: str) -> bool:
    try:
        uuidlib.UUID(text)
    except ValueError:
        return False
    return True


def daemon_pid(uri: str) -> int | None:
    """The PID of the libvirt daemon behind a local unix-socket URI (qemu:///system,
    qemu+unix:///system?socket=...), from the socket's peer credentials; None for any other URI
    or where the socket cannot be reached."""
    parts = urlsplit(uri)
    if parts.scheme not in ("qemu", "qemu+unix") or parts.netloc:
        return None
    socket_paths = parse_qs(parts.query).get("socket") or (SYSTEM_SOCKETS if parts.path == "/system" else [])
    for path in socket_paths:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(path)
                creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        except OSError:
            continue
        return struct.unpack("3i", creds)[0]
    return None


def _volume_xml(name: str, capacity_gb: int, backing: dict[str, str] | None, fmt: str = "qcow2",
                size_bytes: int | None = None) -> str:
    vol = ET.Element("volume")
    ET.SubElement(vol, "name").text = name
    if size_bytes is None:
        ET.SubElement(vol, "capacity", unit="G").text = str(int(capacity_gb))
    else:
        ET.SubElement(vol, "capacity", unit="bytes").text = str(int(size_bytes))
    ET.SubElement(vol, "allocation", unit="bytes").text = "0"
    target = ET.SubElement(vol, "target")
    ET.SubElement(target, "format", type=fmt)
    if backing:
        store = ET.SubElement(vol, "backingStore")
        ET.SubElement(store, "path").text = backing["path"]
        ET.SubElement(store, "format", type=backing["format"])
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
        "metadata": {
            item.get("key", ""): item.text or ""
            for item in node.findall(f"{{{METADATA_NAMESPACE}}}meta")
        },
    }


def _interfaces(root: ET.Element) -> list[dict[str, Any]]:
    """Each network interface of a domain: its type (network, bridge, user...), what it is
    attached to (the network or bridge name; None for user-mode) and its MAC address."""
    found = []
    for interface in root.findall("devices/interface"):
        source = interface.find("source")
        attached = None
        if source is not None:
            attached = source.get("network") or source.get("bridge") or source.get("dev")
        mac = interface.find("mac")
        found.append({"type": interface.get("type", ""), "source": attached,
                      "mac": (mac.get("address", "") if mac is not None else "").lower()})
    return found


def _address_source_unusable(source: str, state: str, interfaces: list[dict[str, Any]],
                             root: ET.Element) -> str | None:
    """Why ``source`` cannot know this domain's addresses (asking would only cost a call), or None."""
    if state != "running":
        return f"the domain is {state}"
    if not interfaces:
        return "the domain has no network interface"
    if all(interface["type"] == "user" for interface in interfaces):
        return "user-mode networking only: QEMU's own NAT, whose addresses libvirt cannot see"
    if source == "lease" and not any(interface["type"] == "network" for interface in interfaces):
        return "no interface on a libvirt network (only those have DHCP leases libvirt knows)"
    if source == "agent" and not any(channel.get("name") == GUEST_AGENT_CHANNEL
                                     for channel in root.findall("devices/channel/target")):
        return "the domain has no guest agent channel"
    return None


def _mib(kib: Any) -> int | None:
    return None if kib is None else int(kib) // _KIB_PER_MIB
