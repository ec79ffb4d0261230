"""berth.fleet.resize: give an instance another flavor, on its own host where it still fits,
else on the host the scheduler picks (controller side)."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from typing import Any, Callable

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import METADATA_NAMESPACE, Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils.request import dns_label
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils import _move
from ansible_collections.berth.fleet.plugins.plugin_utils._placement import (
    build_target,
    failure_message,
    flavor_option,
    move_request,
    read_fleet,
    without_gc,
)
from ansible_collections.berth.fleet.plugins.plugin_utils._power import OFF_STATES, check_shutdown_timeout, shut_down
from ansible_collections.berth.fleet.plugins.plugin_utils._progress import Progress
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    ACTIVE,
    STOPPED,
    ClaimConflict,
    Ledger,
    instance_flavor,
    run_owner,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.operations import hooks

# As Nova: a running or a stopped instance is resized (a paused one would need its memory kept).
RESIZABLE_STATES = (ACTIVE, STOPPED)
_SIZES = tuple(limits.FLAVOR_SIZES)


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        with without_gc():
            return self._run(args, task_vars)

    def _run(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        dns_label("name", args["name"])
        new = flavor_option(args)
        check_shutdown_timeout(args["shutdown_timeout"])
        ledger = Ledger(args["ledger_url"]).open()
        rows = ledger.instances([args["name"]])
        if not rows:
            raise InputError("name", f"no instance named {args['name']} in the ledger")
        instance = rows[0]
        name, uuid, source = instance["name"], instance["uuid"], instance["host"]
        if instance["state"] not in RESIZABLE_STATES:
            raise InputError("name", f"{name} is {instance['state']}, only {' and '.join(RESIZABLE_STATES)} "
                                     f"instances are resized")
        old = instance_flavor(instance)
        result: dict[str, Any] = {"changed": False, "name": name, "uuid": uuid, "from_flavor": old.name,
                                  "to_flavor": new.name, "from_host": source, "to_host": source}
        if old.name == new.name and _sizes(old) == _sizes(new):
            result["msg"] = f"{name} has flavor {new.name} already"
            return result
        refuse_shrinking(name, old, new)
        if not instance["uri"]:
            raise BerthError(f"the ledger has no URI for {source}: run playbooks/gather.yml to sync it")
        target = destination(args, task_vars, ledger, instance, new)
        same_host = target["host"] == source
        result.update(changed=True, to_host=target["host"], same_host=same_host, why=target["why"])
        pool = args["storage_pool"]
        connect = {"timeout_s": args["timeout"], "transfer_timeout_s": args["transfer_timeout"]}
        with Hypervisor(source, instance["uri"], **connect) as src:
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
                if self._task.check_mode:
                    return {**result, "msg": f"would resize {plan}"}
                result.update(self._in_place(src, ledger, instance, old, new, xml, root, args))
            else:
                with Hypervisor(target["host"], target["uri"], **connect) as dst:
                    _disks, volumes = _move.movable_volumes(src, dst, instance, pool)
                    if self._task.check_mode:
                        return {**result, "msg": f"would resize {plan}, moving it there cold"}
                    result.update(self._elsewhere(src, dst, ledger, instance, target, new, root, volumes, args))
        result["msg"] = f"resized {plan}"
        return result

    def _in_place(self, hv: Hypervisor, ledger: Ledger, instance: dict[str, Any], old: Flavor, new: Flavor,
                  xml: str, root: str | None, args: dict[str, Any]) -> dict[str, Any]:
        """On its own host: the claim resized (re-checked under lock), the domain shut down,
        redefined with the new size, its root disk grown, started again if it ran. Any failure
        puts back the old definition, disk size and claim, and starts the old size again."""
        name, uuid, pool = instance["name"], instance["uuid"], args["storage_pool"]
        step = Progress().of(name, hv.host)
        try:
            claim = ledger.resize_claim(uuid, new, run_owner(), args["lease_seconds"])
        except ClaimConflict as conflict:
            raise BerthError(f"cannot resize {name} on {hv.host}: {conflict.reason}") from conflict
        step(f"claim resized for {new.name}")
        running = hv.domain_state(uuid) not in OFF_STATES
        done: dict[str, Any] = {"shutdown": "off already"}
        try:
            if running:
                done["shutdown"] = shut_down(hv, uuid, args["shutdown_timeout"], step)
            hv.define(resized_domain_xml(xml, new))
            done["redefined"] = True
            step(f"redefined with {new.vcpus} vCPU(s) and {new.memory_mb} MB", detail=True)
            done["root_was_mb"] = grow_root(hv, pool, root, new, step)
            hooks.installed().reached(hooks.BEFORE_RESIZE_START, host=hv.host, instance=uuid)
            if running:
                hv.start(uuid, None)
                step(f"started with {new.name}")
        except Exception as exc:
            problems = _undo_in_place(hv, uuid, pool, xml, root, done, running)
            ledger.restore_claim(claim["id"], old)
            step(f"FAILED: {exc}; back to {old.name}")
            raise BerthError(f"resize of {name} failed and it has {old.name} again{problems}: {exc}") from exc
        return {"shutdown": done["shutdown"], "instance": ledger.finish_move(uuid, claim["id"], new)}

    def _elsewhere(self, src: Hypervisor, dst: Hypervisor, ledger: Ledger, instance: dict[str, Any],
                   target: dict[str, Any], new: Flavor, root: str | None, volumes: list[str],
                   args: dict[str, Any]) -> dict[str, Any]:
        """On another host: claimed there for the new flavor first (as a migration does), then a
        cold move that redefines the domain with the new size and grows its root disk on the
        way; the source's claim goes only once the domain is gone from it. Any failure leaves
        the domain on the source, started again if it ran, and gives the destination back."""
        name, uuid, pool = instance["name"], instance["uuid"], args["storage_pool"]
        step = Progress().of(name, src.host)
        try:
            claim = ledger.claim_move(uuid, target["hypervisor_uuid"], run_owner(), args["lease_seconds"], flavor=new)
        except ClaimConflict as conflict:
            raise BerthError(f"cannot claim {dst.host} to resize {name}: {conflict.reason}") from conflict
        step(f"claimed {dst.host} for {new.name}")
        running = src.domain_state(uuid) not in OFF_STATES
        done: dict[str, Any] = {"shutdown": "off already"}

        def stop(hv: Hypervisor, domain_uuid: str) -> None:
            done["shutdown"] = shut_down(hv, domain_uuid, args["shutdown_timeout"], step)

        def before_start(hv: Hypervisor) -> None:
            grow_root(hv, pool, root, new, step)
            hooks.installed().reached(hooks.BEFORE_RESIZE_START, host=hv.host, instance=uuid)

        try:
            _move.ensure_base_images(src, dst, pool, volumes, step)
            moved = _move.cold_move(src, dst, uuid, pool, volumes, running, step, stop=stop,
                                    rewrite=lambda xml: resized_domain_xml(xml, new), before_start=before_start,
                                    hooks=hooks.installed())
        except Exception as exc:
            ledger.release_claim(claim["id"])
            step(f"FAILED: {exc}; stays here with {instance['flavor']}")
            raise BerthError(f"resize of {name} onto {dst.host} failed, it stays on {src.host} with "
                             f"{instance['flavor']}: {exc}") from exc
        step(f"moved to {dst.host} with {new.name}")
        resized, warnings = _move.finish(ledger, instance, claim["id"], moved, pool, volumes, new)
        left = {"source_left": moved["source_left"], "warnings": warnings} if warnings else {}
        return {"shutdown": done["shutdown"], "instance": resized, **left}


def destination(args: dict[str, Any], task_vars: dict[str, Any], ledger: Ledger, instance: dict[str, Any],
                new: Flavor) -> dict[str, Any]:
    """Where to resize: the instance's own host where the new flavor passes every filter there
    with the instance's own claim given back (Nova's allow_resize_to_same_host, preferred here:
    nothing moves); else the scheduler's pick among the others. Decided on the ledger's host
    states, as a launch is. Returns {host, hypervisor_uuid, uri, why}."""
    source, name = instance["host"], instance["name"]
    spec = move_request(instance, new, args["service_down_time"])
    fleet = read_fleet({**args, "hosts": None}, task_vars, spec, ledger, sync=False)
    names = list(fleet.hosts.column("host"))
    if source in names:
        here = fleet.hosts[names.index(source)].copy()
        for claim in ledger.claims(instance["uuid"]):
            if claim["hypervisor_uuid"] == instance["hypervisor_uuid"]:
                here.release(claim["vcpus"], claim["memory_mb"], claim["disk_mb"])
        decision = schedule([here], spec)
        if decision.ok:
            return {"host": source, "hypervisor_uuid": instance["hypervisor_uuid"], "uri": instance["uri"],
                    "why": f"{source} still has room for it (its own host is preferred)"}
        rejections = decision.rejections or []
        why_not = rejections[0].message() if rejections else decision.summary
    else:
        why_not = "not among the ledger's hypervisors"
    decision = schedule(fleet.hosts, move_request(instance, new, args["service_down_time"], [source]))
    if not decision.ok:
        raise BerthError(f"cannot resize {name} to {new.name}: its host {source} has no room ({why_not}), and "
                         f"elsewhere {failure_message(decision)}")
    chosen = fleet.hosts[names.index(decision.placements[0].host)]
    return {**build_target(fleet, ledger, chosen),
            "why": f"{source} has no room ({why_not}); chosen by the scheduler: {decision.summary}"}


def _sizes(flavor: Flavor) -> tuple[int, ...]:
    return tuple(getattr(flavor, size) for size in _SIZES)


def refuse_shrinking(name: str, old: Flavor, new: Flavor) -> None:
    """A disk is never made smaller, as Nova's libvirt driver refuses it: the guest's file
    systems fill it."""
    for size in ("root_gb", "ephemeral_gb"):
        if getattr(new, size) < getattr(old, size):
            raise InputError("flavor", f"flavor {new.name} has {size} {getattr(new, size)}, less than {name}'s "
                                       f"{getattr(old, size)} ({old.name}): a disk is never shrunk")


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


def grow_root(hv: Hypervisor, pool: str, root: str | None, flavor: Flavor, step: Callable[..., None]) -> int | None:
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


def _undo_in_place(hv: Hypervisor, uuid: str, pool: str, xml: str, root: str | None, done: dict[str, Any],
                   running: bool) -> str:
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
    if running:
        steps.append(("a start", lambda: hv.domain_state(uuid) in OFF_STATES and hv.start(uuid, None)))
    for what, undo in steps:
        try:
            undo()
        except HypervisorError as exc:
            problems.append(f"{what} failed: {exc}")
    return f" (but {'; '.join(problems)})" if problems else ""
