"""Data volumes (Cinder's, on a hypervisor's storage pool): create, attach, detach, delete. What
berth.fleet.volume does. Private to the collection.

The ledger is the record and the claim: a volume's row is written (and its disk claimed) before
the volume is made, and forgotten only after it is gone; an attachment is recorded before the
disk is plugged, and taken back when plugging fails. A run that dies halfway leaves a row whose
next run (the same task again) completes it.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from typing import Any, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils._guest import volume_devices
from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect, HypervisorDriver
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.limits import VOLUME_SIZE_GB
from ansible_collections.berth.fleet.plugins.module_utils.request import Request, dns_label
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import data_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import (
    AFTER_VOLUME_ATTACH_RECORD,
    AFTER_VOLUME_RECORD,
    AFTER_VOLUME_REMOVE,
    AFTER_VOLUME_UNPLUG,
    NO_HOOKS,
    Hooks,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ClaimConflict, Ledger, run_owner
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

PRESENT, ABSENT, ATTACHED, DETACHED = "present", "absent", "attached", "detached"
# The guest's disk bus of an instance without a recorded request (adopted): libvirt's default.
DEFAULT_DISK_BUS = "virtio"


def disk_bus(instance: Mapping[str, Any]) -> str:
    """The bus of the instance's own disks, which its volumes join."""
    if not instance.get("request"):
        return DEFAULT_DISK_BUS
    request, _built = Request.from_record(instance["request"])
    return str(request.guest.values["disk_bus"])


def disk_xml(path: str, target: str, bus: str, shared: bool = False) -> str:
    """The ``<disk>`` of an attached volume, as the domain template renders it. A ``shared``
    pool's goes uncached in the host (cache none): what libvirt requires to migrate it live
    without a copy (the destination must read what the source wrote, not its own page cache)."""
    disk = ET.Element("disk", type="file", device="disk")
    ET.SubElement(disk, "driver", name="qemu", type="qcow2", **({"cache": "none"} if shared else {}))
    ET.SubElement(disk, "source", file=path)
    ET.SubElement(disk, "target", dev=target, bus=bus)
    return ET.tostring(disk, encoding="unicode")


def reattach(hv: HypervisorDriver, uuid: str, attached: Sequence[Mapping[str, Any]], bus: str) -> None:
    """The data volumes ``attached`` (ledger rows) plugged into the domain ``uuid`` on ``hv``, on
    the devices the ledger gave them: a domain made anew (a rebuild, an evacuation) keeps them."""
    for volume in attached:
        path = os.path.join(hv.pool_path(volume["pool"]), data_volume_name(volume["name"]))
        hv.attach_disk(uuid, disk_xml(path, volume["target"], bus, volume["shared"]))


def has_target(domain_xml: str | None, target: str) -> bool:
    """Whether the definition ``domain_xml`` has a disk on ``target``."""
    if domain_xml is None:
        return False
    return any(item.get("dev") == target for item in ET.fromstring(domain_xml).findall("devices/disk/target"))


def volume_pool(pool: str | None, settings: Settings) -> tuple[str, bool]:
    """The pool a new volume is made in, and whether it is shared: ``pool`` where it names the
    operator's storage pool or one of the shared pools (berth_shared_pools), the storage pool
    where it is not given. A pool is never a requester's free choice: any other is refused."""
    if pool is None or pool == settings.storage_pool:
        return settings.storage_pool, settings.storage_pool in settings.shared_pools
    if pool not in settings.shared_pools:
        allowed = ", ".join([settings.storage_pool, *settings.shared_pools])
        raise InputError("pool", f"pool {pool!r} is neither the storage pool nor one of berth_shared_pools "
                                 f"(allowed: {allowed})")
    return pool, True


class Volume:
    """Bring the data volume ``args["name"]`` to ``args["state"]`` (berth.fleet.volume's
    validated options; ``settings`` the operator's: its storage pool and shared pools). ``connect``
    opens the hypervisors (libvirt's by default); ``hooks`` are told each step between the ledger
    and the host."""

    def __init__(self, args: Mapping[str, Any], settings: Settings, ledger: Ledger, check_mode: bool,
                 connect: Connect = Hypervisor, hooks: Hooks = NO_HOOKS) -> None:
        self.args, self.settings, self.ledger, self.check_mode, self.connect = args, settings, ledger, check_mode, connect
        self.hooks = hooks
        self.name = dns_label("name", args["name"])
        self.pool, self.shared = volume_pool(args.get("pool"), settings)

    def _open(self, host: str, uri: str | None) -> HypervisorDriver:
        if not uri:
            raise BerthError(f"{self.ledger.label} has no URI for {host}: run playbooks/gather.yml to sync it")
        return self.connect(host, uri, self.args["timeout"],
                            uri_policy=UriPolicy.from_settings(self.settings.uri_policy))

    def _uri(self, host: str) -> str | None:
        return next((hv["uri"] for hv in self.ledger.hypervisors() if hv["host"] == host), None)

    def run(self) -> dict[str, Any]:
        state = self.args["state"]
        if state == PRESENT:
            return self.create()
        if state == ABSENT:
            return self.delete()
        if state == ATTACHED:
            return self.attach()
        return self.detach()

    def _result(self, changed: bool, msg: str, volume: Mapping[str, Any] | None) -> dict[str, Any]:
        return {"changed": changed, "msg": msg, "name": self.name, "volume": dict(volume) if volume else None}

    # ---- create and delete ----------------------------------------------------------------------

    def create(self) -> dict[str, Any]:
        args = self.args
        if args.get("size_gb") is None:
            raise InputError("size_gb", "size_gb is required to create a volume (state=present)")
        size_gb = VOLUME_SIZE_GB.check(args["size_gb"])
        host = args.get("host")
        if not host:
            raise InputError("host", "host (the hypervisor whose storage pool holds the volume) is required to "
                                     "create a volume (state=present)")
        path_name = data_volume_name(self.name)
        try:
            # Recorded, and so claimed, before it is made: a run that dies next leaves a row that
            # the next run completes (or delete removes), never a volume that nothing counts.
            volume, new = self.ledger.create_volume(self.name, host, self.pool, size_gb, run_owner(),
                                                    dry_run=self.check_mode, shared=self.shared)
        except ClaimConflict as conflict:
            raise BerthError(f"cannot create volume {self.name} of {size_gb} GB on {host}: {conflict.reason}") \
                from conflict
        if self.check_mode:
            return self._result(new, f"would create volume {self.name} ({size_gb} GB) in storage pool {self.pool} on "
                                     f"{host}" if new else f"volume {self.name} exists", volume)
        may_be_there, adopted = False, False
        try:
            self.hooks.reached(AFTER_VOLUME_RECORD, host=volume["host"])
            with self._open(volume["host"], self._uri(volume["host"])) as hv:
                found = hv.volume(self.pool, path_name)
                if found is not None and new:
                    # Named as this volume but recorded by no ledger (this ledger's row is new):
                    # taken for it if it is what this run would make, else refused.
                    adopted = self._adoptable(found, path_name, size_gb, volume["host"])
                elif found is None:
                    try:
                        hv.create_volume(self.pool, path_name, size_gb)
                    except Exception:
                        # libvirt may have made it and its answer been lost (a timeout): the row,
                        # its claim, stays until the file is surely gone.
                        may_be_there = True
                        hv.delete_volume(self.pool, path_name)
                        may_be_there = False
                        raise
                    new = True
        except Exception:
            if new and not may_be_there:
                # Nothing half done: the claim goes with the volume that was not made.
                self.ledger.delete_volume(self.name)
            raise
        if adopted:
            return self._result(True, f"adopted volume {self.name} ({size_gb} GB) found in storage pool {self.pool} on "
                                      f"{volume['host']}, which no ledger recorded", volume)
        return self._result(new, f"created volume {self.name} ({size_gb} GB) in storage pool {self.pool} on "
                                 f"{volume['host']}" if new else f"volume {self.name} exists", volume)

    def _adoptable(self, found: Mapping[str, Any], path_name: str, size_gb: int, host: str) -> bool:
        """A volume file found where this volume goes, unrecorded: True if it is what a create
        makes (a qcow2 file of ``size_gb``); InputError naming it otherwise."""
        if (found.get("format"), found.get("capacity_mb")) != ("qcow2", size_gb * 1024):
            raise InputError("name", f"storage pool {self.pool} on {host} has a volume {path_name} that no ledger "
                                     f"recorded ({found.get('format')}, {found.get('capacity_mb')} MB), not the "
                                     f"{size_gb} GB qcow2 volume asked for: remove it, or name another volume")
        return True

    def delete(self) -> dict[str, Any]:
        found = self.ledger.volumes(name=self.name)
        if not found:
            return self._result(False, f"no volume {self.name}", None)
        volume = found[0]
        if volume["instance_uuid"] is not None:
            raise InputError("name", f"volume {self.name} is attached to {volume['instance']}: detach it first")
        if self.check_mode:
            return self._result(True, f"would delete volume {self.name} from {volume['host']}", volume)
        with self._open(volume["host"], self._uri(volume["host"])) as hv:
            if volume["shared"]:
                # Made through another host, maybe: its pool is refreshed to list it here.
                hv.volume(volume["pool"], data_volume_name(self.name))
            hv.delete_volume(volume["pool"], data_volume_name(self.name))
        self.hooks.reached(AFTER_VOLUME_REMOVE, host=volume["host"])
        # Forgotten (its disk given back) only once it is gone from the pool.
        self.ledger.delete_volume(self.name)
        return self._result(True, f"deleted volume {self.name} from {volume['host']}", volume)

    # ---- attach and detach ----------------------------------------------------------------------

    def _volume(self) -> dict[str, Any]:
        found = self.ledger.volumes(name=self.name)
        if not found:
            raise InputError("name", f"no volume named {self.name} in {self.ledger.label}")
        return found[0]

    def attach(self) -> dict[str, Any]:
        instance_name = self.args.get("instance")
        if not instance_name:
            raise InputError("instance", "instance is required to attach a volume (state=attached)")
        dns_label("instance", instance_name)
        rows = self.ledger.instances([instance_name])
        if not rows:
            raise InputError("instance", f"no instance named {instance_name} in {self.ledger.label}")
        instance = rows[0]
        bus = disk_bus(instance)
        devices = volume_devices(bus)
        if not devices:
            raise InputError("instance", f"{instance_name}'s disks are on the {bus} bus, which has no device left for "
                                         f"a data volume")
        volume, new = self.ledger.attach_volume(self.name, instance_name, devices,
                                                dry_run=self.check_mode)
        if self.check_mode:
            return self._result(new, f"would attach volume {self.name} to {instance_name} as {volume['target']}"
                                if new else f"volume {self.name} is attached to {instance_name}", volume)
        try:
            self.hooks.reached(AFTER_VOLUME_ATTACH_RECORD, host=instance["host"], instance=instance["uuid"])
            with self._open(instance["host"], instance["uri"]) as hv:
                # A run that died after the ledger recorded it finds the domain without it.
                plugged = not has_target(hv.domain_xml(instance["uuid"], inactive=True), volume["target"])
                live = False
                if plugged:
                    path = os.path.join(hv.pool_path(volume["pool"]), data_volume_name(self.name))
                    live = hv.attach_disk(instance["uuid"], disk_xml(path, volume["target"], bus, volume["shared"]))
        except Exception:
            if new:
                # Nothing half done: the ledger does not keep an attachment that was not made.
                self.ledger.detach_volume(self.name)
            raise
        how = " (hot-plugged)" if live else ""
        return self._result(new or plugged, f"attached volume {self.name} to {instance_name} as "
                                            f"{volume['target']}{how}" if new or plugged
                            else f"volume {self.name} is attached to {instance_name}", volume)

    def detach(self) -> dict[str, Any]:
        volume = self._volume()
        if volume["instance_uuid"] is None:
            return self._result(False, f"volume {self.name} is attached to no instance", volume)
        name = volume["instance"]
        if self.check_mode:
            return self._result(True, f"would detach volume {self.name} from {name}", volume)
        instance = self.ledger.instances([name])[0]
        live = False
        with self._open(instance["host"], instance["uri"]) as hv:
            if has_target(hv.domain_xml(instance["uuid"], inactive=True), volume["target"]):
                path = os.path.join(hv.pool_path(volume["pool"]), data_volume_name(self.name))
                try:
                    live = hv.detach_disk(instance["uuid"], disk_xml(path, volume["target"], disk_bus(instance),
                                                                     volume["shared"]))
                except HypervisorError as exc:
                    raise BerthError(f"cannot detach volume {self.name} from {name}: {exc}; it stays attached") \
                        from exc
        self.hooks.reached(AFTER_VOLUME_UNPLUG, host=instance["host"], instance=instance["uuid"])
        # Recorded as detached only once the definition no longer has it.
        self.ledger.detach_volume(self.name)
        how = " (unplugged from the running guest)" if live else ""
        detached = {**volume, "instance": None, "instance_uuid": None, "target": None}
        return self._result(True, f"detached volume {self.name} from {name}{how}", detached)
