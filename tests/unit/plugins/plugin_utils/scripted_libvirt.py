"""A libvirt connection that answers from a script, for reading a hypervisor's answers with
Berth's own code (module_utils/libvirt_host.Hypervisor and the parsers beneath it) without a
daemon: ``honest_answers(number)`` is what a small, sane host answers, as a plain dict a test
may mangle; ``ScriptedConnection(answers)`` answers libvirt's calls from it.

Where the fake hypervisor (fake_hypervisor.py) stands in for the whole driver and answers
already-read facts, this stands in for libvirt only: every XML text, node info list and count is
read by Berth, as it reads a real host's.

``connect_to(answers_by_host)`` is the ``connect`` a sync is given (libvirt_host.Hypervisor over
these connections); ``open_auth(answers_by_uri)`` stands in for libvirt.openAuth where a plugin
builds its own Hypervisor.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import METADATA_NAMESPACE, Hypervisor

POOL = "default"
POOL_PATH = "/var/lib/libvirt/images"
_KIB = 1024
_GIB_BYTES = 1024 ** 3


def host_uuid(number: int) -> str:
    return f"6a1c0000-0000-4000-8000-{number:012d}"


def domain_uuid(number: int, index: int) -> str:
    return f"d0000000-{number:04d}-4000-8000-{index:012d}"


def capabilities_xml(number: int) -> str:
    """Two NUMA cells of two cores with two threads each, 4 KiB and 2 MiB pages, kvm and qemu."""
    cells = []
    for cell in (0, 1):
        cpus = "".join(
            f"<cpu id='{cpu}' socket_id='{cell}' die_id='0' core_id='{cpu // 2}' "
            f"siblings='{cpu - cpu % 2}-{cpu - cpu % 2 + 1}'/>" for cpu in range(4 * cell, 4 * cell + 4))
        cells.append(f"<cell id='{cell}'><memory unit='KiB'>{8 * 1024 * 1024}</memory>"
                     f"<pages unit='KiB' size='4'>2097152</pages><pages unit='KiB' size='2048'>64</pages>"
                     f"<distances><sibling id='0' value='10'/><sibling id='1' value='21'/></distances>"
                     f"<cpus num='4'>{cpus}</cpus></cell>")
    return (f"<capabilities><host><uuid>{host_uuid(number)}</uuid>"
            "<cpu><arch>x86_64</arch><model>Haswell-noTSX</model><vendor>Intel</vendor>"
            "<topology sockets='2' dies='1' cores='2' threads='2'/>"
            "<feature name='vmx'/><feature name='pdpe1gb'/></cpu>"
            f"<topology><cells num='2'>{''.join(cells)}</cells></topology></host>"
            "<guest><os_type>hvm</os_type><arch name='x86_64'><wordsize>64</wordsize>"
            "<domain type='qemu'/><domain type='kvm'/></arch></guest></capabilities>")


def domain_capabilities_xml() -> str:
    return ("<domainCapabilities><arch>x86_64</arch><cpu>"
            "<mode name='host-passthrough' supported='yes'/>"
            "<mode name='host-model' supported='yes'><model fallback='forbid'>Haswell-noTSX</model>"
            "<vendor>Intel</vendor><feature policy='require' name='ss'/><feature policy='disable' name='rtm'/></mode>"
            "<mode name='custom' supported='yes'><model usable='yes'>Haswell-noTSX</model>"
            "<model usable='no'>Skylake-Server</model><model usable='unknown'>EPYC</model></mode>"
            "</cpu></domainCapabilities>")


def domain_xml(number: int, index: int, berth: bool) -> str:
    """A guest with a disk of the pool, pinned vCPUs, a PCI host device, and (``berth``) Berth's metadata."""
    metadata = ""
    if berth:
        metadata = (f"<metadata><berth:instance xmlns:berth='{METADATA_NAMESPACE}'>"
                    f"<berth:uuid>1a000000-{number:04d}-4000-8000-{index:012d}</berth:uuid>"
                    f"<berth:name>web-{index}</berth:name><berth:flavor>m1.tiny</berth:flavor>"
                    "<berth:meta key='role'>web</berth:meta></berth:instance></metadata>")
    return (f"<domain type='kvm'><name>guest{index}</name><uuid>{domain_uuid(number, index)}</uuid>"
            f"<memory unit='KiB'>524288</memory><vcpu placement='static'>2</vcpu>{metadata}"
            f"<cputune><vcpupin vcpu='0' cpuset='{2 + index}'/><vcpupin vcpu='1' cpuset='4-5'/>"
            "<emulatorpin cpuset='1'/></cputune>"
            "<os><type arch='x86_64'>hvm</type></os><devices>"
            f"<disk type='file' device='disk'><driver name='qemu' type='qcow2'/>"
            f"<source file='{POOL_PATH}/guest{index}.qcow2'/><target dev='vda' bus='virtio'/></disk>"
            "<disk type='file' device='cdrom'><source file='/srv/iso/seed.iso'/><target dev='sda'/></disk>"
            f"<interface type='network'><mac address='52:54:00:00:{number:02x}:{index:02x}'/>"
            "<source network='default'/></interface>"
            "<hostdev mode='subsystem' type='pci'><source>"
            f"<address domain='0x0000' bus='0x3b' slot='0x02' function='{index}'/></source></hostdev>"
            "</devices></domain>")


def volume_xml(name: str, backing: str | None = None) -> str:
    store = f"<backingStore><path>{backing}</path><format type='qcow2'/></backingStore>" if backing else ""
    return (f"<volume type='file'><name>{name}</name><capacity unit='bytes'>{10 * _GIB_BYTES}</capacity>"
            f"<target><path>{POOL_PATH}/{name}</path><format type='qcow2'/></target>{store}</volume>")


def node_device_xml(name: str, bus: int, slot: int, kind: str) -> str:
    """A PCI node device: a physical function with one VF, that VF, or a GPU offering mdev types."""
    inner = ""
    if kind == "pf":
        inner = ("<capability type='virt_functions' maxCount='8'>"
                 "<address domain='0x0000' bus='0x3b' slot='0x02' function='0x0'/></capability>")
    elif kind == "vf":
        inner = ("<capability type='phys_function'>"
                 "<address domain='0x0000' bus='0x3b' slot='0x00' function='0x0'/></capability>")
    elif kind == "gpu":
        inner = ("<capability type='mdev_types'><type id='nvidia-222'><name>GRID T4-1B</name>"
                 "<deviceAPI>vfio-pci</deviceAPI><availableInstances>16</availableInstances></type></capability>")
    return (f"<device><name>{name}</name><parent>computer</parent><driver><name>vfio-pci</name></driver>"
            f"<capability type='pci'><class>0x020000</class><domain>0</domain><bus>{bus}</bus><slot>{slot}</slot>"
            f"<function>0</function><product id='0x1572'>X710</product><vendor id='0x8086'>Intel</vendor>"
            f"{inner}<numa node='1'/></capability></device>")


def honest_answers(number: int) -> dict[str, Any]:
    """Everything host ``hv<number>`` answers a tracker sync, as libvirt's Python binding gives it."""
    volumes = {name: {"xml": volume_xml(name, backing), "info": [0, 10 * _GIB_BYTES, _GIB_BYTES],
                      "path": f"{POOL_PATH}/{name}"}
               for name, backing in (("debian-12.qcow2", None), ("guest0.qcow2", f"{POOL_PATH}/debian-12.qcow2"),
                                     ("guest1.qcow2", f"{POOL_PATH}/debian-12.qcow2"))}
    return {
        "hostname": f"hv{number}.example", "type": "QEMU", "version": 7002000, "lib_version": 9000000,
        "capabilities": capabilities_xml(number),
        "domain_capabilities": {"kvm": domain_capabilities_xml(), "qemu": domain_capabilities_xml()},
        # getInfo(): [model, memory MiB, cpus, mhz, nodes, sockets, cores, threads]
        "node_info": ["x86_64", 16384, 8, 2400, 2, 2, 2, 2],
        # KiB, as virNodeGetMemoryStats counts
        "memory_stats": {"total": 16 * 1024 * _KIB, "free": 8 * 1024 * _KIB, "buffers": 512 * _KIB,
                         "cached": 2048 * _KIB},
        "cpu_stats": {"kernel": 10 ** 12, "user": 4 * 10 ** 12, "idle": 9 * 10 ** 13, "iowait": 10 ** 11},
        "free_pages": {0: {4: 1048576, 2048: 64}, 1: {4: 1048576, 2048: 32}},
        "pools": {POOL: {"info": [2, 100 * _GIB_BYTES, 20 * _GIB_BYTES, 80 * _GIB_BYTES], "active": 1,
                         "volumes": volumes}},
        "networks": ["default"], "defined_networks": ["isolated"],
        "domains": [{"name": f"guest{index}", "uuid": domain_uuid(number, index),
                     "info": [1, 524288, 524288, 2, 10 ** 9], "xml": domain_xml(number, index, berth=index == 0)}
                    for index in (0, 1)],
        "node_devices": [{"name": "pci_0000_3b_00_0", "xml": node_device_xml("pci_0000_3b_00_0", 0x3b, 0, "pf")},
                         {"name": "pci_0000_3b_02_0", "xml": node_device_xml("pci_0000_3b_02_0", 0x3b, 2, "vf")},
                         {"name": "pci_0000_86_00_0", "xml": node_device_xml("pci_0000_86_00_0", 0x86, 0, "gpu")}],
    }


class ScriptedConnection:
    """libvirt's virConnect as Hypervisor.facts() and interface_addresses() call it, answering
    from ``answers`` (honest_answers' shape); an answer that is a BaseException is raised."""

    def __init__(self, answers: Mapping[str, Any]) -> None:
        self.answers = answers

    def _answer(self, key: str) -> Any:
        value = self.answers[key]
        if isinstance(value, BaseException):
            raise value
        return value

    def setKeepAlive(self, interval: int, count: int) -> int:  # noqa: N802 - libvirt's names
        return 0

    def close(self) -> int:
        return 0

    def getCapabilities(self) -> str:  # noqa: N802
        return self._answer("capabilities")

    def getInfo(self) -> list[Any]:  # noqa: N802
        return list(self._answer("node_info"))

    def getHostname(self) -> str:  # noqa: N802
        return self._answer("hostname")

    def getType(self) -> str:  # noqa: N802
        return self._answer("type")

    def getVersion(self) -> int:  # noqa: N802
        return self._answer("version")

    def getLibVersion(self) -> int:  # noqa: N802
        return self._answer("lib_version")

    def getFreePages(self, sizes: list[int], start: int, cells: int) -> dict[int, dict[int, int]]:  # noqa: N802
        return self._answer("free_pages")

    def getDomainCapabilities(self, emulator: Any, arch: str, machine: Any, kind: str, flags: int) -> str:  # noqa: N802
        return self._answer("domain_capabilities")[kind]

    def getMemoryStats(self, cell: int, flags: int) -> dict[str, int]:  # noqa: N802
        return self._answer("memory_stats")

    def getCPUStats(self, cpu: int, flags: int) -> dict[str, int]:  # noqa: N802
        return self._answer("cpu_stats")

    def listAllDevices(self, flags: int) -> list[Any]:  # noqa: N802
        return [_Device(device) for device in self._answer("node_devices")]

    def listAllStoragePools(self, flags: int) -> list[Any]:  # noqa: N802
        return [_Pool(name, pool) for name, pool in self._answer("pools").items()]

    def storagePoolLookupByName(self, name: str) -> Any:  # noqa: N802
        return _Pool(name, self._answer("pools")[name])

    def storageVolLookupByPath(self, path: str) -> Any:  # noqa: N802
        for name, pool in self._answer("pools").items():
            for volume_name, volume in pool["volumes"].items():
                if volume["path"] == path:
                    return _Volume(volume_name, volume, _Pool(name, pool))
        raise _no_such("storage volume", path)

    def listNetworks(self) -> list[str]:  # noqa: N802
        return list(self._answer("networks"))

    def listDefinedNetworks(self) -> list[str]:  # noqa: N802
        return list(self._answer("defined_networks"))

    def listAllNetworks(self, flags: int) -> list[Any]:  # noqa: N802
        return []

    def listAllDomains(self, flags: int) -> list[Any]:  # noqa: N802
        return [_Domain(domain) for domain in self._answer("domains")]

    def lookupByUUIDString(self, uuid: str) -> Any:  # noqa: N802
        for domain in self._answer("domains"):
            if domain["uuid"] == uuid:
                return _Domain(domain)
        raise _no_such("domain", uuid)


class _Device:
    def __init__(self, device: Mapping[str, Any]) -> None:
        self.device = device

    def name(self) -> str:
        return self.device["name"]

    def XMLDesc(self, flags: int) -> str:  # noqa: N802
        return self.device["xml"]


class _Pool:
    def __init__(self, name: str, pool: Mapping[str, Any]) -> None:
        self._name, self.pool = name, pool

    def name(self) -> str:
        return self._name

    def info(self) -> list[int]:
        return list(self.pool["info"])

    def isActive(self) -> int:  # noqa: N802
        return self.pool["active"]

    def refresh(self, flags: int) -> int:
        return 0

    def listVolumes(self) -> list[str]:  # noqa: N802
        return list(self.pool["volumes"])

    def storageVolLookupByName(self, name: str) -> Any:  # noqa: N802
        if name not in self.pool["volumes"]:
            raise _no_such("storage volume", name)
        return _Volume(name, self.pool["volumes"][name], self)


class _Volume:
    def __init__(self, name: str, volume: Mapping[str, Any], pool: _Pool) -> None:
        self._name, self.volume, self.pool = name, volume, pool

    def name(self) -> str:
        return self._name

    def XMLDesc(self, flags: int) -> str:  # noqa: N802
        return self.volume["xml"]

    def info(self) -> list[int]:
        return list(self.volume["info"])

    def path(self) -> str:
        return self.volume["path"]

    def storagePoolLookupByVolume(self) -> _Pool:  # noqa: N802
        return self.pool


class _Domain:
    def __init__(self, domain: Mapping[str, Any]) -> None:
        self.domain = domain

    def name(self) -> str:
        return self.domain["name"]

    def UUIDString(self) -> str:  # noqa: N802
        return self.domain["uuid"]

    def info(self) -> list[int]:
        return list(self.domain["info"])

    def state(self, flags: int) -> list[int]:
        return [self.domain["info"][0], 0]

    def XMLDesc(self, flags: int) -> str:  # noqa: N802
        return self.domain["xml"]

    def interfaceAddresses(self, source: int, flags: int) -> dict[str, Any]:  # noqa: N802
        return self.domain.get("addresses") or {}


def _no_such(what: str, key: str) -> Exception:
    import libvirt

    error = libvirt.libvirtError(f"no {what} with matching key {key!r}")
    codes = {"domain": libvirt.VIR_ERR_NO_DOMAIN, "storage volume": libvirt.VIR_ERR_NO_STORAGE_VOL}
    error.err = (codes[what], libvirt.VIR_FROM_NONE, str(error), 2, None, None, None, 0, 0)
    return error


class ScriptedHypervisor(Hypervisor):
    """libvirt_host.Hypervisor over a ScriptedConnection: opening it asks no daemon; everything
    after that is Hypervisor's own code."""

    def __init__(self, connection: ScriptedConnection, host: str, uri: str, timeout_s: float = 10.0,
                 **options: Any) -> None:
        super().__init__(host, uri, timeout_s, **options)
        self._scripted = connection

    def __enter__(self) -> ScriptedHypervisor:
        self.conn = self._scripted
        return self


def connect_to(answers_by_host: Mapping[str, Mapping[str, Any]]) -> Callable[..., ScriptedHypervisor]:
    """The ``connect`` (hypervisor_driver.Connect) of a sync over these hosts' scripted answers,
    read afresh at each connection (a test may change them between syncs)."""
    def connect(host: str, uri: str, timeout_s: float, **options: Any) -> ScriptedHypervisor:
        return ScriptedHypervisor(ScriptedConnection(answers_by_host[host]), host, uri, timeout_s, **options)
    return connect


def open_auth(answers_by_uri: Mapping[str, Mapping[str, Any]]) -> Callable[..., ScriptedConnection]:
    """A stand-in for libvirt.openAuth that opens these URIs' scripted connections (whatever
    parameters the caller added to them, such as the inventory's no_tty=1)."""
    def opened(uri: str, _auth: Any, _flags: int) -> ScriptedConnection:
        return ScriptedConnection(answers_by_uri[uri.split("?", 1)[0]])
    return opened
