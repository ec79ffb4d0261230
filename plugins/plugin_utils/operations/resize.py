"""A resize: an instance given another flavor, on its own host where it still fits (the
domain redefined, its root disk grown), else moved cold through the one move path onto the
host the scheduler picks. What berth.fleet.resize does. Private to the collection."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from typing import Any, Callable, Mapping

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect, HypervisorDriver
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import METADATA_NAMESPACE, Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import ephemeral_volume_name, swap_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils._power_states import OFF_STATES, shut_down
from ansible_collections.berth.fleet.plugins.plugin_utils._progress import Progress
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import (
    BEFORE_RESIZE_START,
    NO_HOOKS,
    Hooks,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    ACTIVE,
    STOPPED,
    ClaimConflict,
    Ledger,
    instance_flavor,
    run_owner,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import (
    DEFAULT_TEMPLATE,
    DomainTemplate,
    recorded_definition,
    shared_pool_paths,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.move import (
    Move,
    connections,
    destination,
    placed_instance,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

# As Nova: a running or a stopped instance is resized (a paused one would need its memory kept).
RESIZABLE_STATES = (ACTIVE, STOPPED)
_SIZES = tuple(limits.FLAVOR_SIZES)


class Resize:
    """Resize the instance ``args["name"]`` to ``new`` (its flavor, resolved by the caller).
    ``args`` are berth.fleet.resize's validated options; ``connect`` opens the hypervisors
    (hypervisor_driver.Connect; libvirt's by default)."""

    def __init__(self, args: Mapping[str, Any], settings: Settings, new: Flavor, ledger: Ledger, task_vars: Mapping[str, Any],
                 check_mode: bool, hooks: Hooks = NO_HOOKS, connect: Connect = Hypervisor) -> None:
        self.args, self.settings, self.new, self.ledger, self.task_vars = args, settings, new, ledger, task_vars
        self.check_mode, self.hooks, self.connect = check_mode, hooks, connect

    def run(self) -> dict[str, Any]:
        args, task_vars, ledger, new = self.args, self.task_vars, self.ledger, self.new
        instance = placed_instance(ledger, args["name"], RESIZABLE_STATES, "are resized")
        name, uuid, source = instance["name"], instance["uuid"], instance["host"]
        old = instance_flavor(instance)
        result: dict[str, Any] = {"changed": False, "name": name, "uuid": uuid, "from_flavor": old.name,
                                  "to_flavor": new.name, "from_host": source, "to_host": source}
        if old.name == new.name and _sizes(old) == _sizes(new):
            result["msg"] = f"{name} has flavor {new.name} already"
            return result
        refuse_shrinking(name, old, new)
        if not instance["uri"]:
            raise BerthError(f"{ledger.label} has no URI for {source}: run playbooks/gather.yml to sync it")
        target = destination(args, self.settings, task_vars, ledger, instance, new)
        same_host = target["host"] == source
        result.update(changed=True, to_host=target["host"], same_host=same_host, why=target["why"])
        if target["warnings"]:
            result["warnings"] = list(target["warnings"])
        pool = self.settings.storage_pool
        with self.connect(source, instance["uri"], **connections(args, self.settings)) as src:
            xml = src.domain_xml(uuid, inactive=True)
            if xml is None:
                raise HypervisorError(source, f"domain {uuid} of {name} is not there, though the ledger says so")
            # Whatever the resize would refuse is refused now, before anything is claimed or stopped.
            resized_domain_xml(xml, new)
            root = root_volume(xml, src.pool_path(pool))
            if new.root_gb > old.root_gb and root is None:
                raise InputError("flavor", f"{name}'s root disk is not a volume of storage pool {pool}: Berth "
                                           f"cannot grow it to {new.root_gb} GB")
            plan = f"{name} from {old.name} to {new.name} on {target['host']} ({target['why']})"
            if same_host:
                if self.check_mode:
                    return {**result, "msg": f"would resize {plan}"}
                result.update(self._in_place(src, ledger, instance, old, new, xml, root, args))
            else:
                move = Move(args, self.settings, ledger, instance, target, self.hooks, new_flavor=new,
                            rewrite=lambda moved_xml: resized_domain_xml(moved_xml, new))
                with self.connect(target["host"], target["uri"], **connections(args, self.settings)) as dst:
                    move.plan(src, dst, xml)
                    if self.check_mode:
                        return {**result, "msg": f"would resize {plan}, moving it there cold"}
                    moved = self._elsewhere(src, dst, move, new, root)
                    warnings = result.pop("warnings", []) + moved.pop("warnings", [])
                    result.update(moved, **({"warnings": warnings} if warnings else {}))
        result["msg"] = f"resized {plan}"
        return result

    def _in_place(self, hv: HypervisorDriver, ledger: Ledger, instance: dict[str, Any], old: Flavor, new: Flavor,
                  xml: str, root: str | None, args: dict[str, Any]) -> dict[str, Any]:
        """On its own host: the claim resized (re-checked under lock), the domain shut down,
        redefined with the new size, its root disk grown, started again if it ran. Any failure
        puts back the old definition, disk size and claim, and starts the old size again."""
        name, uuid, pool = instance["name"], instance["uuid"], self.settings.storage_pool
        step = Progress().of(name, hv.host)
        try:
            claim = ledger.resize_claim(uuid, new, run_owner(), self.settings.lease_seconds)
        except ClaimConflict as conflict:
            raise BerthError(f"cannot resize {name} on {hv.host}: {conflict.reason}") from conflict
        step(f"claim resized for {new.name}")
        running = hv.domain_state(uuid) not in OFF_STATES
        done: dict[str, Any] = {"shutdown": "off already"}
        try:
            if running:
                done["shutdown"] = shut_down(hv, uuid, args["shutdown_timeout"], step)
            resized = resized_domain_xml(xml, new)
            if has_local_disks(instance):
                resized = with_local_disks(resized, self._definition(instance, new, hv, pool))
            hv.define(resized)
            done["redefined"] = True
            step(f"redefined with {new.vcpus} vCPU(s) and {new.memory_mb} MB", detail=True)
            done["root_was_mb"] = grow_root(hv, pool, root, new, step)
            if has_local_disks(instance):
                done["local_disks"] = resize_local_disks(hv, pool, uuid, old, new, step)
            self.hooks.reached(BEFORE_RESIZE_START, host=hv.host, instance=uuid)
            if running:
                hv.start(uuid, None)
                step(f"started with {new.name}")
        except Exception as exc:
            problems = _undo_in_place(hv, uuid, pool, xml, root, done, running, old)
            ledger.restore_claim(claim["id"], old)
            step(f"FAILED: {exc}; back to {old.name}")
            raise BerthError(f"resize of {name} failed and it has {old.name} again{problems}: {exc}") from exc
        return {"shutdown": done["shutdown"], "instance": ledger.finish_move(uuid, claim["id"], new)}

    def _definition(self, instance: Mapping[str, Any], flavor: Flavor, hv: HypervisorDriver, pool: str) -> str:
        """What Berth would define for ``instance`` with ``flavor`` on ``hv`` (rendered from its build record)."""
        template = DomainTemplate(self.args.get("template") or DEFAULT_TEMPLATE)
        attached = self.ledger.volumes(instance_uuid=instance["uuid"])
        return recorded_definition(instance, template, hv.pool_path(pool), [], self.settings.serial_log_dir,
                                   flavor=flavor, volumes=attached, pool_paths=shared_pool_paths(hv, attached))

    def _elsewhere(self, src: HypervisorDriver, dst: HypervisorDriver, move: Move, new: Flavor,
                   root: str | None) -> dict[str, Any]:
        """On another host: the one move path (operations/move.py), claimed there for the new
        flavor first, moved cold with its definition resized and its root disk grown on the way;
        the source's claim goes only once the domain is gone from it. Any failure leaves the
        domain on the source, started again if it ran, and gives the destination back."""
        uuid, pool = move.instance["uuid"], self.settings.storage_pool
        done: dict[str, Any] = {"shutdown": "off already"}

        def stop(hv: HypervisorDriver, domain_uuid: str) -> None:
            done["shutdown"] = shut_down(hv, domain_uuid, self.args["shutdown_timeout"], move.step)

        def before_start(hv: HypervisorDriver) -> None:
            grow_root(hv, pool, root, new, move.step)
            if has_local_disks(move.instance):
                # A failure from here on removes every volume of the instance from the destination.
                resize_local_disks(hv, pool, uuid, instance_flavor(move.instance), new, move.step)
            self.hooks.reached(BEFORE_RESIZE_START, host=hv.host, instance=uuid)

        move.stop, move.before_start = stop, before_start
        moved = move.run(src, dst)
        left = {"source_left": moved["source_left"], "warnings": moved["warnings"]} if moved["warnings"] else {}
        return {"shutdown": done["shutdown"], "instance": moved["instance"], **left}


def _sizes(flavor: Flavor) -> tuple[int, ...]:
    return tuple(getattr(flavor, size) for size in _SIZES)


def refuse_shrinking(name: str, old: Flavor, new: Flavor) -> None:
    """A disk is never made smaller, as Nova's libvirt driver refuses it: the guest's file
    systems fill it."""
    for size in ("root_gb", "ephemeral_gb"):
        if getattr(new, size) < getattr(old, size):
            raise InputError(f"flavor.{size}", f"flavor {new.name} has {size} {getattr(new, size)}, less than "
                                               f"{name}'s {getattr(old, size)} ({old.name}): a disk is never shrunk")


def resized_domain_xml(domain_xml: str, flavor: Flavor) -> str:
    """The domain's definition with ``flavor``'s vCPUs and memory (and its flavor's name in
    Berth's metadata). Refuses (InputError) what it cannot resize without guessing: per-vCPU
    settings, NUMA cells, memory above the hotplug maximum."""
    root = ET.fromstring(domain_xml)
    if root.find("vcpus") is not None or root.find("cpu/numa") is not None:
        raise InputError("flavor", f"domain {root.findtext('name')} sets vCPUs one by one or has NUMA cells: "
                                   f"Berth does not resize it")
    memory_kib = flavor.memory_mb * 1024
    hotplug = root.find("maxMemory")
    if hotplug is not None and _kib(hotplug) < memory_kib:
        raise InputError("flavor", f"{flavor.memory_mb} MB is more than domain {root.findtext('name')}'s memory "
                                   f"hotplug maximum ({_kib(hotplug) // 1024} MB)")
    for tag in ("memory", "currentMemory"):
        element = root.find(tag)
        if element is not None:
            element.attrib = {key: value for key, value in element.attrib.items() if key != "unit"}
            element.set("unit", "KiB")
            element.text = str(memory_kib)
    vcpu = root.find("vcpu")
    if vcpu is None:
        vcpu = ET.SubElement(root, "vcpu")
    vcpu.attrib.pop("current", None)  # every vCPU online, as the flavor says
    vcpu.text = str(flavor.vcpus)
    topology = root.find("cpu/topology")
    if topology is not None:
        # As Nova's default topology: one core of one thread per socket.
        topology.attrib.update(sockets=str(flavor.vcpus), cores="1", threads="1")
        if "dies" in topology.attrib:
            topology.set("dies", "1")
    named = root.find(f"metadata/{{{METADATA_NAMESPACE}}}instance/{{{METADATA_NAMESPACE}}}flavor")
    if named is not None:
        named.text = flavor.name
    return ET.tostring(root, encoding="unicode")


def _kib(element: ET.Element) -> int:
    units = {"b": 1 / 1024, "bytes": 1 / 1024, "k": 1, "kib": 1, "kb": 1000 / 1024, "m": 1024, "mib": 1024,
             "mb": 1000 * 1000 / 1024, "g": 1024 ** 2, "gib": 1024 ** 2, "gb": 1000 ** 3 / 1024}
    return int(int(element.text or 0) * units.get(element.get("unit", "KiB").lower(), 1))


def root_volume(domain_xml: str, pool_path: str) -> str | None:
    """The volume name of the domain's first disk when it is a file of the storage pool (the
    root disk, vda in Berth's template), else None."""
    for disk in ET.fromstring(domain_xml).findall("devices/disk"):
        if disk.get("device", "disk") != "disk":
            continue
        source = disk.find("source")
        path = source.get("file") if source is not None and disk.get("type") == "file" else None
        return os.path.basename(path) if path and os.path.dirname(path) == pool_path else None
    return None


def grow_root(hv: HypervisorDriver, pool: str, root: str | None, flavor: Flavor,
              step: Callable[..., None]) -> int | None:
    """Grow the root volume to the flavor's root_gb where it is smaller; returns its size
    before, in MB, or None if it was left as it was."""
    if root is None:
        return None
    volume = hv.volume(pool, root, refresh=False)
    wanted_mb = flavor.root_gb * 1024
    if volume is None or volume["capacity_mb"] >= wanted_mb:
        return None
    hv.resize_volume(pool, root, wanted_mb)
    step(f"root disk grown from {volume['capacity_mb']} to {wanted_mb} MB", detail=True)
    return int(volume["capacity_mb"])


def has_local_disks(instance: Mapping[str, Any]) -> bool:
    """Whether the instance's build made its flavor's ephemeral and swap disks (its build record
    says so; instances launched before Berth built them have none, and get none by a resize)."""
    built = (instance.get("request") or {}).get("build")
    return isinstance(built, Mapping) and built.get("local_disks") is True


def with_local_disks(domain_xml: str, expected_xml: str) -> str:
    """``domain_xml`` with its ephemeral and swap disks as ``expected_xml`` (Berth's definition of
    the resized instance, from the template) has them: a disk the new flavor adds appears, one
    it drops goes. Every other part of ``domain_xml`` stays as it is."""
    root, expected = ET.fromstring(domain_xml), ET.fromstring(expected_xml)
    uuid = root.findtext("uuid") or ""
    local = {ephemeral_volume_name(uuid), swap_volume_name(uuid)}

    def is_local(disk: ET.Element) -> bool:
        source = disk.find("source")
        return (disk.get("device", "disk") == "disk" and source is not None
                and os.path.basename(source.get("file") or "") in local)

    devices = root.find("devices")
    if devices is None:
        raise InputError("name", f"domain {root.findtext('name')} has no devices")
    for disk in [disk for disk in devices.findall("disk") if is_local(disk)]:
        devices.remove(disk)
    disks = devices.findall("disk")
    # After the root disk, as the template puts them.
    at = list(devices).index(disks[0]) + 1 if disks else 0
    for offset, disk in enumerate(disk for disk in expected.findall("devices/disk") if is_local(disk)):
        devices.insert(at + offset, disk)
    return ET.tostring(root, encoding="unicode")


def resize_local_disks(hv: HypervisorDriver, pool: str, uuid: str, old: Flavor, new: Flavor,
                       step: Callable[..., None]) -> dict[str, Any]:
    """The flavor's ephemeral and swap disks made as ``new`` says, as Nova's resize does: the
    ephemeral disk grown (made where ``old`` had none; a smaller one was refused before), the
    swap disk made anew at its new size (gone where it is 0; the guest makes it swap space
    again). Returns what it changed, for ``_undo_in_place``."""
    done: dict[str, Any] = {}
    ephemeral, swap = ephemeral_volume_name(uuid), swap_volume_name(uuid)
    if new.ephemeral_gb > old.ephemeral_gb:
        volume = hv.volume(pool, ephemeral)
        if volume is None:
            hv.create_volume(pool, ephemeral, 0, capacity_mb=new.ephemeral_gb * 1024)
            done["ephemeral_made"] = True
            step(f"ephemeral disk of {new.ephemeral_gb} GB made", detail=True)
        else:
            hv.resize_volume(pool, ephemeral, new.ephemeral_gb * 1024)
            done["ephemeral_was_mb"] = int(volume["capacity_mb"])
            step(f"ephemeral disk grown from {volume['capacity_mb']} to {new.ephemeral_gb * 1024} MB", detail=True)
    if new.swap != old.swap:
        hv.delete_volume(pool, swap)
        done["swap_replaced"] = True
        if new.swap:
            hv.create_volume(pool, swap, 0, capacity_mb=new.swap)
        step(f"swap disk made anew with {new.swap} MB", detail=True)
    return done


def _undo_in_place(hv: HypervisorDriver, uuid: str, pool: str, xml: str, root: str | None, done: dict[str, Any],
                   running: bool, old: Flavor) -> str:
    """Put back what a failed resize on the instance's own host changed, each step tried
    whatever the others did; returns what could not be put back, as text (empty if all)."""
    problems = []
    steps: list[tuple[str, Callable[[], Any]]] = []
    if done.get("redefined"):
        steps.append(("its old definition", lambda: hv.define(xml)))
    if done.get("root_was_mb") is not None and root is not None:
        # Nothing ran on the grown part: giving it back loses nothing.
        steps.append(("its root disk's old size", lambda: hv.resize_volume(pool, root, done["root_was_mb"],
                                                                           shrink=True)))
    local = done.get("local_disks") or {}
    if local.get("ephemeral_made"):
        steps.append(("removing its new ephemeral disk", lambda: hv.delete_volume(pool, ephemeral_volume_name(uuid))))
    if local.get("ephemeral_was_mb") is not None:
        steps.append(("its ephemeral disk's old size",
                      lambda: hv.resize_volume(pool, ephemeral_volume_name(uuid), local["ephemeral_was_mb"], shrink=True)))
    if local.get("swap_replaced"):
        steps.append(("its old swap disk", lambda: _swap_again(hv, pool, uuid, old.swap)))
    if running:
        steps.append(("a start", lambda: hv.domain_state(uuid) in OFF_STATES and hv.start(uuid, None)))
    for what, undo in steps:
        try:
            undo()
        except HypervisorError as exc:
            problems.append(f"{what} failed: {exc}")
    return f" (but {'; '.join(problems)})" if problems else ""


def _swap_again(hv: HypervisorDriver, pool: str, uuid: str, swap_mb: int) -> None:
    hv.delete_volume(pool, swap_volume_name(uuid))
    if swap_mb:
        hv.create_volume(pool, swap_volume_name(uuid), 0, capacity_mb=swap_mb)
