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
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ansible_collections.berth.fleet.plugins.module_utils.errors import (
    BerthError,
    HypervisorError,
    InputError,
    NotSupported,
)
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import HypervisorDriver
from ansible_collections.berth.fleet.plugins.module_utils.pool_images import pool_image
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import nvram_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils._power_states import OFF_STATES
from ansible_collections.berth.fleet.plugins.plugin_utils._progress import quiet
from ansible_collections.berth.fleet.plugins.plugin_utils._provisioning import remove_instance
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import AFTER_MOVE, NO_HOOKS, Hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import DOMAIN, VOLUME, Ledger, run_owner

Step = Callable[..., None]


def movable_volumes(src: HypervisorDriver, dst: HypervisorDriver, instance: dict[str, Any],
                    pool: str, xml: str | None = None, shared_paths: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """The volumes that move with the domain: its disks, then its CD-ROMs (Berth's seed) and
    Berth's UEFI variable store, all volumes of ``pool``. Refuses, before anything is
    touched, storage the move cannot carry (other pools, block or network disks, NVRAM
    outside the pool), a backing chain that leaves the pool, a volume that something else on
    the source still uses, and a name the destination has. ``xml``: the domain's inactive
    definition, as the caller read it (read here when not given). ``shared_paths``: the files of
    its volumes on shared pools, which both hosts see: they stay where they are, not moved."""
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
        if path and path in shared_paths:
            continue  # the destination sees the same file: re-attached there, never copied
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


def move(src: HypervisorDriver, dst: HypervisorDriver, uuid: str, name: str, mode: str, pool: str,
         address: str | None, disks: list[str], volumes: list[str], step: Step = quiet,
         hooks: Hooks = NO_HOOKS, definition: str | None = None, live_refused: str | None = None,
         shared_paths: Sequence[str] = ()) -> dict[str, Any]:
    """Move the domain live where ``mode`` (auto, live, cold) and both hosts allow, else cold.
    ``definition``: the domain XML the destination defines (see cold_move); None carries the
    source's. ``live_refused``: why it cannot go live, found before (the destination cannot run
    its CPU): cold at once. ``shared_paths``: its disks on shared pools, which QEMU does not copy."""
    domain = src.find_domain(uuid)
    if domain is None:
        raise HypervisorError(src.host, f"domain {uuid} is not there, though the ledger says so")
    running = domain["state"] == "running"
    ensure_base_images(src, dst, pool, volumes, step)
    if mode in ("auto", "live"):
        live_refused = live_refused or _live_refused(src, dst, running)
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
                src.live_migrate(uuid, dst, address, definition, shared_paths)
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


def _live_refused(src: HypervisorDriver, dst: HypervisorDriver, running: bool) -> str | None:
    if not running:
        return "the domain is not running"
    for hv in (src, dst):
        if not hv.can_live_migrate():
            return f"{hv.host} does not offer live migration in its capabilities"
    return None


# The parts of a guest's <cpu> that say what it needs of the host's CPU; the rest (NUMA cells,
# cache, its topology) is placement, not compatibility.
_CPU_PARTS = ("model", "vendor", "feature")
# Modes whose guest gets the host's own CPU whole: only another host's own CPU stands for it.
_WHOLE_HOST_MODES = ("host-passthrough", "maximum")


@dataclass(frozen=True)
class GuestCpu:
    """What a running guest needs of a live migration's destination CPU (read by guest_cpu()).

    ``compared``: (what, CPU XML) pairs, each compared on the destination with what its
    hypervisor gives a guest of ``domain_type`` and ``arch``; ``host_cpu``: the guest gets the
    source host's CPU whole (host-passthrough), which the destination's own CPU must hold;
    ``not_compared``: why nothing is compared, or None."""
    domain_type: str
    arch: str | None
    compared: tuple[tuple[str, str], ...] = field(default=())
    host_cpu: bool = False
    not_compared: str | None = None


def guest_cpu(live_xml: str, defined_xml: str | None) -> GuestCpu:
    """The CPU a live migration must find on its destination, from the running domain's XML
    (``live_xml``) and its persistent definition (``defined_xml``), both as the source's
    hypervisor gives them (parsed, never passed on: the CPU elements compared are built anew).

    - A guest under plain QEMU emulation (domain type qemu: TCG) is not compared, as Nova skips
      it: its CPU is QEMU's software, whatever the host's. libvirt's own model of a TCG CPU is
      no better a judge: it calls features TCG does emulate missing (x2apic, measured with
      libvirt 9.0).
    - The running CPU is the live XML's <cpu>: libvirt writes there what QEMU really gave the
      guest - a host-model guest's model and features expanded, features the host could not
      give disabled - so it is exactly what the destination must give.
    - A host-passthrough guest has the source host's CPU itself: that CPU is compared.
    - The CPU its definition asks for (a custom model; Nova's vcpu_model) is compared too where
      it asks for more than it got (a check='none' definition runs without what the host
      lacks): the destination keeps that definition and starts the guest from it next time."""
    live = ET.fromstring(live_xml)
    domain_type = live.get("type") or ""
    arch = live.find("os/type")
    arch_name = arch.get("arch") if arch is not None else None
    if domain_type == "qemu":
        return GuestCpu(domain_type, arch_name, not_compared=(
            "it runs under plain QEMU emulation (TCG): its CPU is emulated in software, not the host's (as Nova "
            "skips it)"))
    running = live.find("cpu")
    if running is not None and running.get("mode") in _WHOLE_HOST_MODES:
        return GuestCpu(domain_type, arch_name, host_cpu=True)
    compared = []
    running_cpu = _cpu_needs(running)
    if running_cpu is not None:
        compared.append(("its running CPU", running_cpu))
    defined = ET.fromstring(defined_xml).find("cpu") if defined_xml else None
    defined_cpu = _cpu_needs(defined) if defined is not None and defined.get("mode", "custom") == "custom" else None
    if defined_cpu is not None and _required(defined) - _required(running):
        compared.append(("the CPU its definition asks for", defined_cpu))
    if not compared:
        return GuestCpu(domain_type, arch_name, not_compared="its domain describes no CPU model")
    return GuestCpu(domain_type, arch_name, tuple(compared))


def _cpu_needs(cpu: ET.Element | None) -> str | None:
    """A <cpu> of a guest rebuilt from its model, vendor and features alone, or None without a model."""
    if cpu is None or not (cpu.findtext("model") or "").strip():
        return None
    needs = ET.Element("cpu", mode="custom", match=cpu.get("match") or "exact")
    for child in cpu:
        if child.tag in _CPU_PARTS:
            part = ET.SubElement(needs, child.tag, {key: value for key, value in child.attrib.items()
                                                    if key in ("name", "policy")})
            part.text = (child.text or "").strip() or None
    return ET.tostring(needs, encoding="unicode")


def _required(cpu: ET.Element | None) -> set[str]:
    """The model and the features a <cpu> requires (a feature without policy is required)."""
    if cpu is None:
        return set()
    wanted = {f"model {(cpu.findtext('model') or '').strip()}"}
    return wanted | {feature.get("name", "") for feature in cpu.findall("feature")
                     if feature.get("policy", "require") in ("require", "force")}


def cpu_refusal(src: HypervisorDriver, dst: HypervisorDriver, guest: GuestCpu) -> tuple[str | None, str | None]:
    """Whether ``dst`` can run ``guest``'s CPU: (why not, None) when it cannot - libvirt's
    reason, naming the features -, (None, a note) when nothing was compared, else (None, None).
    A failed comparison (an unknown feature, a lost connection) raises HypervisorError: the
    host is not known to fit."""
    if guest.not_compared:
        return None, f"CPU not compared: {guest.not_compared}"
    try:
        if guest.host_cpu:
            why = dst.compare_cpu(src.host_cpu_xml(), host_kind=True)
            return (None, None) if why is None else (f"its host-passthrough CPU (the CPU of {src.host}): {why}", None)
        for what, cpu_xml in guest.compared:
            why = dst.compare_cpu(cpu_xml, guest.domain_type, guest.arch)
            if why is not None:
                return f"{what}: {why}", None
    except NotSupported as exc:
        # As Nova: a driver that cannot compare lets the migration go on, and libvirt's own
        # check at the destination's start of the guest is what remains.
        return None, f"CPU not compared: {exc}"
    return None, None


def ensure_base_images(src: HypervisorDriver, dst: HypervisorDriver, pool: str, volumes: list[str],
                       step: Step = quiet) -> None:
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


def _copy(src: HypervisorDriver, dst: HypervisorDriver, pool: str, name: str, empty: bool = False) -> None:
    if empty:
        # Live migration copies the disk's contents itself: the target needs an empty overlay.
        dst.create_volume_like(src, pool, name)
    else:
        src.copy_volume_to(dst, pool, name)


def power_off(hv: HypervisorDriver, uuid: str) -> bool:
    """A cold move's default way to stop the domain: powered off at once (HypervisorDriver.stop)."""
    return hv.stop(uuid)


def cold_move(src: HypervisorDriver, dst: HypervisorDriver, uuid: str, pool: str, volumes: list[str], running: bool,
              step: Step = quiet, stop: Callable[[HypervisorDriver, str], Any] = power_off,
              rewrite: Callable[[str], str] | None = None,
              before_start: Callable[[HypervisorDriver], None] | None = None,
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


def _check_copies(dst: HypervisorDriver, pool: str, volumes: list[str]) -> None:
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


def _moved_anyway(src: HypervisorDriver, dst: HypervisorDriver, uuid: str) -> bool:
    """Whether a migration that reported an error (a timeout at the very end) moved the domain
    all the same: then the destination's copy is the only one, and must not be cleaned up."""
    try:
        arrived = dst.find_domain(uuid)
        return arrived is not None and arrived["state"] == "running" and src.find_domain(uuid) is None
    except HypervisorError:
        return False


def _clear_source(src: HypervisorDriver, uuid: str, pool: str, volumes: list[str],
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


def remove_moved(hv: HypervisorDriver, uuid: str, pool: str, volumes: list[str]) -> None:
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
