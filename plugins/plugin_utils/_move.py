"""Moving an instance's domain and volumes from one hypervisor to another: what berth.fleet.migrate
and berth.fleet.resize share (a resize onto another host is a cold move that redefines the
domain with the new size on the way). Private to the collection.

Every step is told to ``step(what, detail=False)``, a progress callback (see _progress.py); the
moment the domain runs on the destination, before the source's copy goes, to ``hooks``
(hooks.AFTER_MOVE, with the source host).
"""

from __future__ import annotations

import collections
import os
import xml.etree.ElementTree as ET
from typing import Any, Callable

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.request import nvram_volume_name, pool_image
from ansible_collections.berth.fleet.plugins.plugin_utils._build import remove_instance
from ansible_collections.berth.fleet.plugins.plugin_utils._power import OFF_STATES
from ansible_collections.berth.fleet.plugins.plugin_utils._progress import quiet
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import DOMAIN, VOLUME, Ledger, run_owner
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.hooks import AFTER_MOVE, NO_HOOKS, Hooks

Step = Callable[..., None]


def movable_volumes(src: Hypervisor, dst: Hypervisor, instance: dict[str, Any],
                    pool: str, xml: str | None = None) -> tuple[list[str], list[str]]:
    """The volumes that move with the domain: its disks, then its CD-ROMs (Berth's seed) and
    Berth's UEFI variable store, all volumes of ``pool``. Refuses, before anything is
    touched, storage the move cannot carry (other pools, block or network disks, NVRAM
    outside the pool), a backing chain that leaves the pool, a volume that something else on
    the source still uses, and a name the destination has. ``xml``: the domain's inactive
    definition, as the caller read it (read here when not given)."""
    uuid, name = instance["uuid"], instance["name"]
    xml = xml or src.domain_xml(uuid, inactive=True)
    if xml is None:
        raise HypervisorError(src.host, f"domain {uuid} is not there, though the ledger says so")
    root = ET.fromstring(xml)
    pool_path = src.pool_path(pool)
    disks, cdroms, stuck = [], [], []
    for disk in root.findall("devices/disk"):
        source = disk.find("source")
        if source is None:
            continue  # an empty CD-ROM drive
        path = source.get("file") if disk.get("type") == "file" else None
        device = disk.get("device", "disk")
        if path and os.path.dirname(path) == pool_path and src.volume(pool, os.path.basename(path)):
            (disks if device == "disk" else cdroms).append(os.path.basename(path))
        else:
            target = disk.find("target")
            where = path or f"a {disk.get('type')} source"
            stuck.append(f"{device} {target.get('dev') if target is not None else '?'} ({where})")
    nvram = root.findtext("os/nvram")
    if nvram and nvram == os.path.join(pool_path, nvram_volume_name(uuid)):
        if src.volume(pool, nvram_volume_name(uuid)):
            cdroms.append(nvram_volume_name(uuid))  # copied whole, like a CD-ROM
        # else: never started yet; libvirt makes it from OVMF's template on the destination
    elif nvram:
        stuck.append(f"NVRAM ({nvram})")
    if stuck:
        raise InputError("name", f"{name} has storage a move cannot carry, only volumes of storage pool {pool} "
                                 f"move: {', '.join(stuck)}")
    volumes = disks + cdroms
    for volume in volumes:
        pool_image(src, pool, volume, src.host)
        if volume.startswith(f"berth-{uuid}-"):
            continue  # Berth's own: nothing else uses them, and a leftover on the destination is ours
        users = src.volume_users(pool, os.path.join(pool_path, volume), uuid)
        if users:
            raise InputError("name", f"{name}'s volume {volume} on {src.host} is also used by {', '.join(users)}; "
                                     f"moving it would break them")
        if dst.volume(pool, volume) is not None:
            raise InputError("name", f"{dst.host} already has a volume {volume} in storage pool {pool}; the move "
                                     f"would overwrite it (rename one of them first)")
    return disks, volumes


def move(src: Hypervisor, dst: Hypervisor, uuid: str, name: str, mode: str, pool: str,
         address: str | None, disks: list[str], volumes: list[str], step: Step = quiet,
         hooks: Hooks = NO_HOOKS, definition: str | None = None) -> dict[str, Any]:
    """Move the domain live where ``mode`` (auto, live, cold) and both hosts allow, else cold.
    ``definition``: the domain XML the destination defines (see cold_move); None carries the
    source's."""
    domain = src.find_domain(uuid)
    if domain is None:
        raise HypervisorError(src.host, f"domain {uuid} is not there, though the ledger says so")
    running = domain["state"] == "running"
    ensure_base_images(src, dst, pool, volumes, step)
    live_refused = None
    if mode in ("auto", "live"):
        live_refused = _live_refused(src, dst, running)
        if live_refused is None:
            try:
                for volume in volumes:
                    # QEMU copies a disk's own layer during the migration; a CD-ROM and the
                    # NVRAM are copied here. (libvirt 9.0 would make the NVRAM from OVMF's
                    # template, and QEMU writes the flash it migrated into it as the guest
                    # resumes; copied first, it is a pool volume that a failed move's cleanup
                    # finds like the disks. The source's file stays behind: removed below.)
                    _copy(src, dst, pool, volume, empty=volume in disks)
                _check_copies(dst, pool, volumes)
                step(f"migrating live to {dst.host}")
                src.live_migrate(uuid, dst, address, definition)
            except HypervisorError as exc:
                if not _moved_anyway(src, dst, uuid):
                    remove_moved(dst, uuid, pool, volumes)
                    live_refused = f"live migration failed: {exc}"
            if live_refused is None:
                return {"mode": "live", **_clear_source(src, uuid, pool, volumes, hooks)}
        if mode == "live":
            raise BerthError(f"cannot live-migrate {name}: {live_refused}")
    if live_refused:
        step(f"moving cold: {live_refused}")
    return {"mode": "cold", "live_refused": live_refused,
            **cold_move(src, dst, uuid, pool, volumes, running, step, hooks=hooks, definition=definition)}


def _live_refused(src: Hypervisor, dst: Hypervisor, running: bool) -> str | None:
    if not running:
        return "the domain is not running"
    for hv in (src, dst):
        if not hv.can_live_migrate():
            return f"{hv.host} does not offer live migration in its capabilities"
    return None


def ensure_base_images(src: Hypervisor, dst: Hypervisor, pool: str, volumes: list[str], step: Step = quiet) -> None:
    """An overlay needs its backing chain in the destination pool (by name, as a launch finds
    its image): the members missing there are copied, the deepest first."""
    for name in volumes:
        chain = []
        current = src.volume(pool, name)
        while current is not None and current["backing"]:
            chain.append(os.path.basename(current["backing"]))
            current = src.volume(pool, chain[-1])
        for base in reversed(chain):
            if pool_image(dst, pool, base, dst.host) is None:
                step(f"copying base image {base} to {dst.host}")
                src.copy_volume_to(dst, pool, base)


def _copy(src: Hypervisor, dst: Hypervisor, pool: str, name: str, empty: bool = False) -> None:
    if empty:
        # Live migration copies the disk's contents itself: the target needs an empty overlay.
        dst.create_volume_like(src, pool, name)
    else:
        src.copy_volume_to(dst, pool, name)


def cold_move(src: Hypervisor, dst: Hypervisor, uuid: str, pool: str, volumes: list[str], running: bool,
              step: Step = quiet, stop: Callable[[Hypervisor, str], Any] = Hypervisor.stop,
              rewrite: Callable[[str], str] | None = None,
              before_start: Callable[[Hypervisor], None] | None = None,
              hooks: Hooks = NO_HOOKS, definition: str | None = None) -> dict[str, Any]:
    """Stop the domain (``stop``: powered off by default), copy its volumes and check the copies
    as images, define it on the destination, call ``before_start`` with the destination, start it
    there if it ran, and remove it from the source. On any failure the destination is cleaned up
    and the domain started again on the source, if it ran.

    The destination defines ``definition`` as it is (what Berth would define there); without it,
    the source's own definition is carried (the operator's opt-in), its disks pointed at the
    destination's pool and passed through ``rewrite`` if given."""
    autostart = src.autostart(uuid)
    try:
        stop(src, uuid)
        for name in volumes:
            step(f"copying volume {name} to {dst.host}")
            src.copy_volume_to(dst, pool, name)
        _check_copies(dst, pool, volumes)
        if definition is None:
            carried = _repoint_disks(src.domain_xml(uuid, inactive=True), src.pool_path(pool), dst.pool_path(pool))
            definition = rewrite(carried) if rewrite else carried
        dst.define(definition)
        step(f"defined on {dst.host}", detail=True)
        if before_start is not None:
            before_start(dst)
        if running:
            dst.start(uuid, autostart)
            step(f"started on {dst.host}")
    except Exception:
        remove_moved(dst, uuid, pool, volumes)
        if running and src.domain_state(uuid) in OFF_STATES:
            src.start(uuid, autostart)
            step(f"started again on {src.host}")
        raise
    return {"restarted": running, **_clear_source(src, uuid, pool, volumes, hooks)}


def _check_copies(dst: Hypervisor, pool: str, volumes: list[str]) -> None:
    """Each copied volume checked on the destination as a launch checks an image there (a file of
    the pool, its backing chain in the pool) before any domain uses it."""
    for name in volumes:
        pool_image(dst, pool, name, dst.host)


# What libvirt adds to every definition by itself, each harmless: buses and their controllers,
# the memory balloon, a video card and its audio, PS/2 or USB input without a host source.
_LIBVIRT_ADDED = ("controller", "memballoon", "video", "audio", "input")


def foreign_parts(actual_xml: str, expected_xml: str, running: bool = False) -> list[str]:
    """What the domain ``actual_xml`` (as a hypervisor gives it) has that Berth's own definition
    of it (``expected_xml``, from its record) does not, each named: a device Berth did not put
    there (a host directory, a host device, a serial port writing to a file...) and every element
    of another namespace (QEMU's own arguments). Empty when the domain is as Berth defined it.
    ``running``: ``actual_xml`` is a running domain's, whose character devices and interfaces
    carry what libvirt assigned them at start (a pty, a socket, a tap device): those are not
    compared, its disks' sources and every device it has are."""
    actual, expected = ET.fromstring(actual_xml), ET.fromstring(expected_xml)
    found = [f"{_qualified(child.tag)} (arguments or settings passed to QEMU as they are)"
             for child in actual if child.tag.startswith("{")]
    wanted = collections.Counter(_device_key(device, running) for device in _devices(expected))
    for device in _devices(actual):
        key = _device_key(device, running)
        if wanted[key]:
            wanted[key] -= 1
        elif device.tag not in _LIBVIRT_ADDED or device.find("source") is not None:
            found.append(_described(device))
    return found


def _devices(root: ET.Element) -> list[ET.Element]:
    devices = root.find("devices")
    return [device for device in devices if device.tag != "emulator"] if devices is not None else []


# The devices whose host resources libvirt assigns when the domain starts: compared without them
# in a running domain's definition.
_STARTED_SOURCES = ("serial", "console", "channel", "parallel", "interface", "graphics")


def _device_key(device: ET.Element, running: bool = False) -> tuple[Any, ...]:
    """A device's identity, without what libvirt adds when it defines one (addresses, aliases,
    models and drivers it fills in): its kind and type, and every host resource it names."""
    target = device.find("target")
    mac = device.find("mac")
    # Its own host resources only: a running disk's backing chain (backingStore) is the image's,
    # and libvirt numbers a running disk's sources (index).
    sources = tuple(sorted(item for element in device if element.tag in ("source", "log", "listen")
                           for item in element.attrib.items() if item[0] not in ("mode", "append", "type", "index")))
    target_key = None if target is None else (target.get("dev"), target.get("port"), target.get("name"))
    if device.tag == "console" and target is not None and target.get("type") == "serial":
        # The console of a serial port is that port seen again: libvirt copies the port's source
        # and log into it, and refuses one that differs. The serial port itself is compared.
        sources = ()
    if running and device.tag in _STARTED_SOURCES:
        sources = ()
        if device.tag == "interface":
            target_key = None  # the tap device libvirt made
    return (device.tag, device.get("type"), device.get("device"), sources, target_key,
            None if mac is None else mac.get("address"))


def _described(device: ET.Element) -> str:
    """A device as an operator finds it in ``virsh dumpxml``: its element, type and host sources."""
    kind = " ".join(filter(None, (device.tag, device.get("type") and f"type={device.get('type')}",
                                  device.get("device") and f"device={device.get('device')}")))
    named = [f"{key}={value}" for element in device if element.tag in ("source", "log")
             for key, value in element.attrib.items()]
    return f"{kind} ({', '.join(named)})" if named else kind


def _qualified(tag: str) -> str:
    namespace, _brace, local = tag[1:].partition("}")
    return f"{local} of namespace {namespace}"


def _moved_anyway(src: Hypervisor, dst: Hypervisor, uuid: str) -> bool:
    """Whether a migration that reported an error (a timeout at the very end) moved the domain
    all the same: then the destination's copy is the only one, and must not be cleaned up."""
    try:
        arrived = dst.find_domain(uuid)
        return arrived is not None and arrived["state"] == "running" and src.find_domain(uuid) is None
    except HypervisorError:
        return False


def _clear_source(src: Hypervisor, uuid: str, pool: str, volumes: list[str],
                  hooks: Hooks = NO_HOOKS) -> dict[str, Any]:
    """Remove the source's copy once the domain runs on the destination. The move has happened
    whatever this does, so a failure (the source's daemon went away) is returned as
    ``source_left`` (why), never raised: the caller's ledger must follow the domain."""
    hooks.reached(AFTER_MOVE, host=src.host, instance=uuid)
    try:
        remove_moved(src, uuid, pool, volumes)
    except HypervisorError as exc:
        return {"source_left": str(exc)}
    return {}


def finish(ledger: Ledger, instance: dict[str, Any], claim_id: int, moved: dict[str, Any], pool: str,
           volumes: list[str], flavor: Any = None) -> tuple[dict[str, Any], list[str]]:
    """The ledger follows the domain to the destination of claim ``claim_id`` (``finish_move``,
    with the new ``flavor`` of a resize). Where the source's copy could not be removed
    (``moved["source_left"]``), its domain and volumes are first recorded there as artefacts of
    the instance - while it still holds its claim there -, which the next tracker sync that
    reaches the source removes. Returns the instance and the warnings to show."""
    warnings = []
    if moved.get("source_left"):
        left = [{"kind": DOMAIN, "pool": None, "name": instance["name"]}]
        left += [{"kind": VOLUME, "pool": pool, "name": name} for name in volumes]
        ledger.record_artefacts(instance["uuid"], instance["host"], left, run_owner())
        warnings.append(f"{instance['name']} moved, but its copy on {instance['host']} could not be removed "
                        f"({moved['source_left']}): recorded, the next gather.yml that reaches {instance['host']} "
                        f"removes it")
    return ledger.finish_move(instance["uuid"], claim_id, flavor), warnings


def remove_moved(hv: Hypervisor, uuid: str, pool: str, volumes: list[str]) -> None:
    """The instance's domain and the volumes that moved with it, gone from one side of a move."""
    remove_instance(hv, uuid, pool)
    for name in volumes:
        hv.delete_volume(pool, name)


def _repoint_disks(domain_xml: str, source_pool_path: str, target_pool_path: str) -> str:
    """The same definition with disk and NVRAM paths in the destination's pool directory."""
    root = ET.fromstring(domain_xml)
    for source in root.findall("devices/disk/source"):
        path = source.get("file")
        if path and os.path.dirname(path) == source_pool_path:
            source.set("file", os.path.join(target_pool_path, os.path.basename(path)))
    nvram = root.find("os/nvram")
    if nvram is not None and nvram.text and os.path.dirname(nvram.text) == source_pool_path:
        nvram.text = os.path.join(target_pool_path, os.path.basename(nvram.text))
    return ET.tostring(root, encoding="unicode")
