"""An in-memory hypervisor for the operations' unit tests: module_utils/hypervisor_driver.py's
HypervisorDriver, kept in dictionaries (domains with their XML, storage pools with their
volumes, networks, files), with faults to inject.

``connect_to(hv1, hv2, ...)`` is the ``connect`` an operation is given: it hands out these
hypervisors by host name. Each hypervisor is one object whatever the number of connections to
it, so what one connection did the next sees, as on a real host.

Behaviour follows libvirt where the operations rely on it: a domain is named by its UUID, a
volume by its pool and name; a lookup of something missing answers None where libvirt_host
does, and raises HypervisorError where it does; a live migration needs the disks' volumes made
on the destination first and takes the domain off the source (UNDEFINE_SOURCE); a copy between
hypervisors needs the backing image in the destination pool.
"""

from __future__ import annotations

import copy
import hashlib
import os
import uuid as uuidlib
import xml.etree.ElementTree as ET
from typing import Any, BinaryIO, Callable, Sequence

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError
from ansible_collections.berth.fleet.plugins.module_utils.host_devices import domain_holdings
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import METADATA_NAMESPACE
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import nvram_volume_name

POOL = "default"
POOL_PATH = "/var/lib/libvirt/images"
_UNITS_MIB = {"kib": 1 / 1024, "k": 1 / 1024, "mib": 1, "m": 1, "gib": 1024, "g": 1024}
_OFF = ("shutoff", "crashed")


def domain_xml(name: str, uuid: str, disks: tuple[str, ...] = (), vcpus: int = 1, memory_mib: int = 96,
               domain_type: str = "qemu", pool_path: str = POOL_PATH) -> str:
    """A plain domain definition, as an operator would write one: its disks are files of the pool."""
    sources = "".join(f"<disk type='file' device='disk'><driver name='qemu' type='qcow2'/>"
                      f"<source file='{pool_path}/{disk}'/><target dev='vd{chr(ord('a') + index)}' bus='virtio'/>"
                      f"</disk>" for index, disk in enumerate(disks))
    return (f"<domain type='{domain_type}'><name>{name}</name><uuid>{uuid}</uuid>"
            f"<memory unit='MiB'>{memory_mib}</memory><vcpu>{vcpus}</vcpu>"
            f"<os><type arch='x86_64'>hvm</type></os><devices>{sources}</devices></domain>")


def synced_state(name: str, uuid: str) -> dict[str, Any]:
    """The host state of hypervisor ``name`` as a tracker sync gives it to the ledger
    (Ledger.sync_hypervisors): 8 vCPUs, 8 GiB, 100 GB, up, reached at qemu+ssh://NAME/system."""
    return {
        "host": name, "nodename": name, "uuid": uuid, "uri": f"qemu+ssh://{name}/system", "service_up": True,
        "disabled": False, "vcpus_total": 8, "vcpus_used": 0, "total_usable_ram_mb": 8192, "free_ram_mb": 0,
        "total_usable_disk_gb": 100, "free_disk_mb": 0, "num_instances": 0, "num_io_ops": 0,
        "cpu_allocation_ratio": 4.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
        "reserved_host_memory_mb": 0, "reserved_host_disk_mb": 0, "domains": [],
        "supported_instances": [["x86_64", "qemu", "hvm"]], "availability_zone": None, "aggregates": [],
    }


class FakeHypervisor:
    """One hypervisor in memory (see the module's docstring).

    ``faults``: {method name: exception} raised when that method is called; ``after``: {method
    name: callable} run once the method has done its work (another run acting meanwhile).
    ``calls`` lists every method called, in order; ``snapshot()`` is what a run may change."""

    def __init__(self, host: str, pools: dict[str, str] | None = None, networks: tuple[str, ...] = ("default",),
                 live_migration: bool = True, vcpus_total: int = 8, memory_mb: int = 16384,
                 pool_capacity_mb: int = 100 * 1024) -> None:
        self.host, self.uri = host, f"fake://{host}/system"
        self.pools: dict[str, dict[str, Any]] = {
            name: {"path": path, "volumes": {}} for name, path in (pools or {POOL: POOL_PATH}).items()}
        self.networks = list(networks)
        self.domains: dict[str, dict[str, Any]] = {}
        self.files: dict[str, bytes] = {}
        self.live_migration, self.vcpus_total, self.memory_mb = live_migration, vcpus_total, memory_mb
        self.pool_capacity_mb = pool_capacity_mb
        self.cpu = "<cpu><arch>x86_64</arch><model>Haswell</model><vendor>Intel</vendor></cpu>"
        self.cpu_refusal: str | None = None  # what compare_cpu answers
        # What the sync records as libvirt's host-model CPU per domain type ({} : none), and the
        # model baseline_cpu gives CPUs of different models.
        self.host_model: dict[str, dict[str, Any]] = {}
        self.baseline_model = "qemu64"
        self.baseline_calls: list[dict[str, Any]] = []
        self.guest_obeys_shutdown = True
        self.unreachable: str | None = None  # why a connection is refused
        self.faults: dict[str, BaseException] = {}
        self.after: dict[str, Callable[[], Any]] = {}
        self.calls: list[str] = []
        self.connections: list[dict[str, Any]] = []
        self.is_open = False
        self.migrations: list[dict[str, Any]] = []
        self.agent = False
        self.frozen: set[str] = set()

    # ---- what a test sets up and looks at ---------------------------------------------------

    def add_volume(self, name: str, capacity_mb: int = 1024, pool: str = POOL, fmt: str = "qcow2",
                   backing: str | None = None, data: bytes = b"") -> str:
        path = os.path.join(self.pools[pool]["path"], name)
        self.pools[pool]["volumes"][name] = {"format": fmt, "capacity_mb": capacity_mb, "backing": backing,
                                             "type": "file", "link": False, "data": data}
        return path

    def add_domain(self, xml: str, state: str = "running", persistent: bool = True, autostart: bool = False) -> str:
        root = ET.fromstring(xml)
        uuid = root.findtext("uuid") or str(uuidlib.uuid4())
        self.domains[uuid] = {"xml": xml, "state": state, "persistent": persistent, "autostart": autostart}
        return uuid

    def volume_names_of(self, pool: str = POOL) -> set[str]:
        return set(self.pools[pool]["volumes"])

    def snapshot(self) -> dict[str, Any]:
        """Everything a run may change here: domains (definition, state) and volumes."""
        return copy.deepcopy({"domains": self.domains, "pools": self.pools})

    def metadata(self, uuid: str) -> dict[str, Any] | None:
        """The domain's Berth metadata as {uuid, name, flavor, metadata}, or None."""
        found = _berth(ET.fromstring(self.domains[uuid]["xml"]))
        return None if found is None else {"uuid": found["instance_uuid"], "name": found["name"],
                                           "flavor": found["flavor"], "metadata": found["metadata"]}

    # ---- the connection -----------------------------------------------------------------------

    def _call(self, method: str) -> None:
        self.calls.append(method)
        if method in self.faults:
            raise self.faults[method]

    def _done(self, method: str) -> None:
        if method in self.after:
            self.after.pop(method)()

    def __enter__(self) -> FakeHypervisor:
        if self.unreachable:
            raise HypervisorError(self.host, self.unreachable)
        self.is_open = True
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.is_open = False

    # ---- the host ---------------------------------------------------------------------------

    def facts(self, pool_name: str) -> dict[str, Any]:
        self._call("facts")
        if pool_name not in self.pools:
            raise HypervisorError(self.host, f"storage pool {pool_name!r} not found")
        return {
            "nodename": self.host, "uuid": str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, self.host)),
            "vcpus_total": self.vcpus_total, "hypervisor_type": "QEMU", "hypervisor_version": 7002000,
            "libvirt_version": 9000000,
            "cpu_info": {"arch": "x86_64", "model": "Haswell", "vendor": "Intel", "features": [],
                         "topology": {"sockets": 1, "cores": self.vcpus_total, "threads": 1}, "mhz": 2400},
            "numa_topology": {"cells": []}, "pci_devices": [],
            "pci_devices_skipped": {"beyond_limit": 0, "unreadable": 0},
            "supported_instances": [["x86_64", "qemu", "hvm"], ["x86_64", "kvm", "hvm"]],
            "domain_capabilities": {domain_type: {"modes": {"host-model": True}, "host_model": dict(model),
                                                  "models": {}} for domain_type, model in self.host_model.items()},
            "memory": {"total_mb": self.memory_mb, "free_mb": None, "buffers_mb": None, "cached_mb": None},
            "cpu_times": {},
            "pools": [{"name": name, "active": True, "capacity_mb": self.pool_capacity_mb,
                       "allocation_mb": sum(v["capacity_mb"] for v in pool["volumes"].values()),
                       "available_mb": self.pool_capacity_mb} for name, pool in sorted(self.pools.items())],
            "storage_pool": pool_name, "volumes": sorted(self.pools[pool_name]["volumes"]),
            "networks": sorted(self.networks),
            "domains": sorted((self._shown(uuid) for uuid in self.domains), key=lambda dom: dom["name"]),
        }

    def readiness(self) -> dict[str, Any]:
        self._call("readiness")
        return {"libvirt_version": 9000000, "hypervisor_type": "QEMU", "domain_types": ["kvm", "qemu"],
                "pools": [{"name": name, "active": True, "autostart": True, "capacity_mb": self.pool_capacity_mb}
                          for name in sorted(self.pools)],
                "networks": [{"name": name, "active": True, "autostart": True} for name in sorted(self.networks)]}

    def network_names(self) -> list[str]:
        self._call("network_names")
        return sorted(self.networks)

    def can_live_migrate(self) -> bool:
        self._call("can_live_migrate")
        return self.live_migration

    def host_cpu_xml(self) -> str:
        self._call("host_cpu_xml")
        return self.cpu

    def compare_cpu(self, cpu_xml: str, domain_type: str | None = None, arch: str | None = None,
                    host_kind: bool = False) -> str | None:
        self._call("compare_cpu")
        return self.cpu_refusal

    def baseline_cpu(self, cpu_xmls: list[str], domain_type: str, arch: str) -> str:
        """As libvirt for CPUs of one model: that model with the features all of them require;
        CPUs of different models get the fake's ``baseline_model`` (libvirt picks the newest
        model all can run)."""
        self._call("baseline_cpu")
        self.baseline_calls.append({"cpus": list(cpu_xmls), "domain_type": domain_type, "arch": arch})
        cpus = [ET.fromstring(xml) for xml in cpu_xmls]
        models = {cpu.findtext("model") for cpu in cpus}
        common = set.intersection(*({feature.get("name") for feature in cpu.findall("feature")
                                     if feature.get("policy", "require") == "require"} for cpu in cpus))
        model = models.pop() if len(models) == 1 else self.baseline_model
        features = "".join(f"<feature policy='require' name='{name}'/>" for name in sorted(common))
        return f"<cpu mode='custom' match='exact'><model fallback='forbid'>{model}</model>{features}</cpu>"

    def guest_cpu_refusal(self, domain_xml: str, domain_type: str) -> str | None:
        self._call("guest_cpu_refusal")
        cpu = ET.fromstring(domain_xml).find("cpu")
        return self.cpu_refusal if cpu is not None and cpu.get("mode") == "custom" else None

    # ---- domains ----------------------------------------------------------------------------

    def _domain(self, uuid: str) -> dict[str, Any]:
        if uuid not in self.domains:
            raise HypervisorError(self.host, f"Domain not found: no domain with matching uuid '{uuid}'")
        return self.domains[uuid]

    def _shown(self, uuid: str) -> dict[str, Any]:
        domain = self.domains[uuid]
        root = ET.fromstring(domain["xml"])
        memory = root.find("memory")
        unit = _UNITS_MIB[(memory.get("unit") or "KiB").lower()] if memory is not None else 1
        disks = []
        for source in root.findall("devices/disk/source"):
            path = source.get("file")
            if path:
                found = self._volume_at(path)
                disks.append({"path": path, "capacity_mb": found[1]["capacity_mb"] if found else 0,
                              "pool": found[0] if found else None})
        return {"name": root.findtext("name") or "", "uuid": uuid, "state": domain["state"],
                "vcpus": int(root.findtext("vcpu") or 1),
                "memory_mb": int(int(memory.text or 0) * unit) if memory is not None else 0,
                "disks": disks, "berth": _berth(root), "holds": domain_holdings(root)}

    def find_domain(self, uuid: str) -> dict[str, Any] | None:
        self._call("find_domain")
        return self._shown(uuid) if uuid in self.domains else None

    def find_domain_named(self, key: str) -> dict[str, Any] | None:
        self._call("find_domain_named")
        for uuid, domain in self.domains.items():
            if key in (uuid, ET.fromstring(domain["xml"]).findtext("name")):
                return {**self._shown(uuid), "persistent": domain["persistent"]}
        return None

    def domain_state(self, uuid: str) -> str | None:
        self._call("domain_state")
        return self.domains[uuid]["state"] if uuid in self.domains else None

    def domain_xml(self, uuid: str, inactive: bool = False) -> str | None:
        self._call("domain_xml")
        return self.domains[uuid]["xml"] if uuid in self.domains else None

    def autostart(self, uuid: str) -> bool:
        self._call("autostart")
        return bool(self._domain(uuid)["autostart"])

    def define(self, domain_xml: str) -> str:
        self._call("define")
        root = ET.fromstring(domain_xml)
        uuid = root.findtext("uuid") or str(uuidlib.uuid4())
        before = self.domains.get(uuid, {"state": "shutoff", "autostart": False})
        self.domains[uuid] = {"xml": domain_xml, "state": before["state"], "persistent": True,
                              "autostart": before["autostart"]}
        self._done("define")
        return uuid

    def start(self, uuid: str, autostart: bool | None = False) -> None:
        self._call("start")
        domain = self._domain(uuid)
        if domain["state"] not in _OFF:
            raise HypervisorError(self.host, "Requested operation is not valid: domain is already running")
        if autostart is not None:
            domain["autostart"] = bool(autostart)
        domain["state"] = "running"
        self._done("start")

    def stop(self, uuid: str) -> bool:
        self._call("stop")
        domain = self._domain(uuid)
        if domain["state"] in _OFF:
            return False
        domain["state"] = "shutoff"
        return True

    def shutdown(self, uuid: str) -> None:
        self._call("shutdown")
        domain = self._domain(uuid)
        if domain["state"] != "running":
            raise HypervisorError(self.host, "Requested operation is not valid: domain is not running")
        if self.guest_obeys_shutdown:
            domain["state"] = "shutoff"

    def suspend(self, uuid: str) -> None:
        self._call("suspend")
        self._domain(uuid)["state"] = "paused"

    def resume(self, uuid: str) -> None:
        self._call("resume")
        self._domain(uuid)["state"] = "running"

    def remove_domain(self, uuid: str, keep_nvram: bool = False) -> bool:
        self._call("remove_domain")
        if not keep_nvram:  # as libvirt's VIR_DOMAIN_UNDEFINE_NVRAM: the variables file goes too
            for pool in self.pools.values():
                pool["volumes"].pop(nvram_volume_name(uuid), None)
        return self.domains.pop(uuid, None) is not None

    def set_berth_metadata(self, uuid: str, fields: dict[str, Any] | None) -> None:
        self._call("set_berth_metadata")
        domain = self._domain(uuid)
        root = ET.fromstring(domain["xml"])
        metadata = root.find("metadata")
        if metadata is None:
            metadata = ET.SubElement(root, "metadata")
        for old in metadata.findall(f"{{{METADATA_NAMESPACE}}}instance"):
            metadata.remove(old)
        if fields is not None:
            node = ET.SubElement(metadata, f"{{{METADATA_NAMESPACE}}}instance")
            for key in ("uuid", "name", "flavor"):
                ET.SubElement(node, f"{{{METADATA_NAMESPACE}}}{key}").text = fields[key]
            for key, value in sorted((fields.get("metadata") or {}).items()):
                ET.SubElement(node, f"{{{METADATA_NAMESPACE}}}meta", key=key).text = value
        domain["xml"] = ET.tostring(root, encoding="unicode")
        self._done("set_berth_metadata")

    def attach_disk(self, uuid: str, disk_xml: str) -> bool:
        """libvirt refuses a target the domain has, and a source file that is not there."""
        self._call("attach_disk")
        domain = self._domain(uuid)
        root, disk = ET.fromstring(domain["xml"]), ET.fromstring(disk_xml)
        dev = disk.find("target").get("dev")
        if any(target.get("dev") == dev for target in root.findall("devices/disk/target")):
            raise HypervisorError(self.host, f"Requested operation is not valid: target {dev} already exists")
        if self._volume_at(disk.find("source").get("file")) is None:
            raise HypervisorError(self.host, f"Cannot access storage file '{disk.find('source').get('file')}'")
        devices = root.find("devices")
        if devices is None:
            devices = ET.SubElement(root, "devices")
        devices.append(disk)
        domain["xml"] = ET.tostring(root, encoding="unicode")
        self._done("attach_disk")
        return domain["state"] not in _OFF

    def detach_disk(self, uuid: str, disk_xml: str) -> bool:
        self._call("detach_disk")
        domain = self._domain(uuid)
        root, dev = ET.fromstring(domain["xml"]), ET.fromstring(disk_xml).find("target").get("dev")
        devices = root.find("devices")
        found = [disk for disk in root.findall("devices/disk") if disk.find("target").get("dev") == dev]
        if not found:
            raise HypervisorError(self.host, f"operation failed: disk {dev} not found")
        devices.remove(found[0])
        domain["xml"] = ET.tostring(root, encoding="unicode")
        self._done("detach_disk")
        return domain["state"] not in _OFF

    def live_migrate(self, uuid: str, target: Any, address: str | None = None,
                     definition: str | None = None, shared_paths: Sequence[str] = ()) -> None:
        self._call("live_migrate")
        domain = self._domain(uuid)
        if domain["state"] != "running":
            raise HypervisorError(self.host, "Requested operation is not valid: domain is not running")
        for source in ET.fromstring(domain["xml"]).findall("devices/disk/source"):
            found = self._volume_at(source.get("file") or "")
            if found and target.volume(found[0], os.path.basename(source.get("file")), False) is None:
                raise HypervisorError(self.host, f"Storage source {source.get('file')} does not exist on the target")
        target.domains[uuid] = {"xml": definition or domain["xml"], "state": "running", "persistent": True,
                                "autostart": domain["autostart"]}
        del self.domains[uuid]
        moved = {"uuid": uuid, "to": target.host, "address": address}
        self.migrations.append({**moved, "shared_paths": list(shared_paths)} if shared_paths else moved)
        self._done("live_migrate")

    # ---- storage ----------------------------------------------------------------------------

    def _pool(self, pool_name: str) -> dict[str, Any]:
        if pool_name not in self.pools:
            raise HypervisorError(self.host, f"Storage pool not found: no storage pool with matching name '{pool_name}'")
        return self.pools[pool_name]

    def _volume_at(self, path: str) -> tuple[str, dict[str, Any]] | None:
        for name, pool in self.pools.items():
            if os.path.dirname(path) == pool["path"] and os.path.basename(path) in pool["volumes"]:
                return name, pool["volumes"][os.path.basename(path)]
        return None

    def _new_volume(self, pool_name: str, name: str, fmt: str, capacity_mb: int, backing: str | None) -> str:
        pool = self._pool(pool_name)
        if name in pool["volumes"]:
            raise HypervisorError(self.host, f"storage volume '{name}' exists already")
        pool["volumes"][name] = {"format": fmt, "capacity_mb": capacity_mb, "backing": backing, "type": "file",
                                 "link": False, "data": b""}
        return os.path.join(pool["path"], name)

    def pool_path(self, pool_name: str) -> str:
        self._call("pool_path")
        return self._pool(pool_name)["path"]

    def volume(self, pool_name: str, name: str, refresh: bool = True) -> dict[str, Any] | None:
        self._call("volume")
        pool = self._pool(pool_name)
        found = pool["volumes"].get(name)
        if found is None:
            return None
        return {"name": name, "path": os.path.join(pool["path"], name), "type": found["type"],
                "format": found["format"], "capacity_mb": found["capacity_mb"], "link": found["link"],
                "backing": found["backing"]}

    def volume_names(self, pool_name: str) -> list[str]:
        self._call("volume_names")
        return sorted(self._pool(pool_name)["volumes"])

    def volume_users(self, pool_name: str, path: str, domain_uuid: str) -> list[str]:
        self._call("volume_users")
        users = [f"domain {ET.fromstring(domain['xml']).findtext('name')}" for uuid, domain in self.domains.items()
                 if uuid != domain_uuid and path in (source.get("file") for source in
                                                     ET.fromstring(domain["xml"]).findall("devices/disk/source"))]
        return users + [f"volume {name}" for name, volume in sorted(self._pool(pool_name)["volumes"].items())
                        if volume["backing"] == path]

    def volume_digest(self, pool_name: str, name: str, algorithm: str) -> str:
        self._call("volume_digest")
        return hashlib.new(algorithm, self._pool(pool_name)["volumes"][name]["data"]).hexdigest()

    def download_volume(self, pool_name: str, name: str, write: Callable[[bytes], Any]) -> None:
        self._call("download_volume")
        write(self._pool(pool_name)["volumes"][name]["data"])

    def flatten_volume(self, pool_name: str, name: str, new_name: str, running: str | None = None) -> str:
        """The copy holds what the guest reads: the volume's own bytes, else its backing image's."""
        self._call("flatten_volume")
        volumes = self._pool(pool_name)["volumes"]
        source = volumes[name]
        data = source["data"] or (volumes[os.path.basename(source["backing"])]["data"] if source["backing"] else b"")
        path = self._new_volume(pool_name, new_name, "qcow2", source["capacity_mb"], None)
        volumes[new_name]["data"] = data
        return path

    def fs_freeze(self, uuid: str) -> str | None:
        """``self.agent``: whether a guest agent answers (the tests' choice)."""
        self._call("fs_freeze")
        if not self.agent:
            return "QEMU guest agent is not connected"
        self.frozen.add(uuid)
        return None

    def fs_thaw(self, uuid: str) -> None:
        self._call("fs_thaw")
        self.frozen.discard(uuid)

    def create_volume(self, pool_name: str, name: str, capacity_gb: int,
                      backing: dict[str, str] | None = None, capacity_mb: int | None = None) -> str:
        self._call("create_volume")
        made = self._new_volume(pool_name, name, "qcow2", capacity_mb if capacity_mb is not None else capacity_gb * 1024,
                                backing["path"] if backing else None)
        self._done("create_volume")
        return made

    def upload_volume(self, pool_name: str, name: str, reader: BinaryIO, size_bytes: int, fmt: str) -> str:
        self._call("upload_volume")
        data = reader.read(size_bytes)
        if len(data) < size_bytes:
            raise HypervisorError(self.host, f"upload of {name}: the file ended {size_bytes - len(data)} bytes short")
        path = self._new_volume(pool_name, name, fmt, -(-size_bytes // (1024 * 1024)), None)
        self.pools[pool_name]["volumes"][name]["data"] = data
        return path

    def resize_volume(self, pool_name: str, name: str, capacity_mb: int, shrink: bool = False) -> None:
        self._call("resize_volume")
        volume = self._pool(pool_name)["volumes"][name]
        if capacity_mb < volume["capacity_mb"] and not shrink:
            raise HypervisorError(self.host, "invalid argument: can't shrink capacity below existing allocation")
        volume["capacity_mb"] = capacity_mb

    def delete_volume(self, pool_name: str, name: str) -> bool:
        self._call("delete_volume")
        return self._pool(pool_name)["volumes"].pop(name, None) is not None

    def copy_volume_to(self, target: Any, pool_name: str, name: str) -> None:
        self._call("copy_volume_to")
        data = self._pool(pool_name)["volumes"][name]["data"]
        target.create_volume_like(self, pool_name, name)
        target.pools[pool_name]["volumes"][name]["data"] = data
        self._done("copy_volume_to")

    def create_volume_like(self, source: Any, pool_name: str, name: str) -> Any:
        self._call("create_volume_like")
        original = source.pools[pool_name]["volumes"][name]
        backing = None
        if original["backing"]:
            base = self.volume(pool_name, os.path.basename(original["backing"]))
            if base is None:
                raise HypervisorError(self.host, f"base image of {name} is not in pool {pool_name}")
            backing = base["path"]
        return self._new_volume(pool_name, name, original["format"], original["capacity_mb"], backing)

    def read_file_tail(self, directory: str, file_name: str, max_bytes: int) -> tuple[bytes, int] | None:
        self._call("read_file_tail")
        data = self.files.get(os.path.join(directory, file_name))
        return None if data is None else (data[-max_bytes:], len(data))


def _berth(root: ET.Element) -> dict[str, Any] | None:
    node = root.find(f"metadata/{{{METADATA_NAMESPACE}}}instance")
    if node is None:
        return None
    return {"instance_uuid": node.findtext(f"{{{METADATA_NAMESPACE}}}uuid") or "",
            "name": node.findtext(f"{{{METADATA_NAMESPACE}}}name") or "",
            "flavor": node.findtext(f"{{{METADATA_NAMESPACE}}}flavor") or "",
            "metadata": {item.get("key", ""): item.text or ""
                         for item in node.findall(f"{{{METADATA_NAMESPACE}}}meta")}}


def connect_to(*hypervisors: FakeHypervisor) -> Callable[..., FakeHypervisor]:
    """The ``connect`` of an operation (hypervisor_driver.Connect) over these hypervisors, by host
    name: each connection is recorded on its hypervisor (``connections``: uri, timeout_s and the
    rest); an unknown host raises HypervisorError as an unreachable one would."""
    by_host = {hv.host: hv for hv in hypervisors}

    def connect(host: str, uri: str, timeout_s: float = 10.0, **connection: Any) -> FakeHypervisor:
        if host not in by_host:
            raise HypervisorError(host, "no such hypervisor in this test")
        hv = by_host[host]
        hv.uri = uri  # as libvirt's: the driver is the URI it was opened with
        hv.connections.append({"uri": uri, "timeout_s": timeout_s, **connection})
        return hv

    return connect
