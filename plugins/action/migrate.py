"""berth.fleet.migrate: move an instance to another hypervisor (controller side)."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.request import dns_label, nvram_volume_name, pool_image
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec, schedule
from ansible_collections.berth.fleet.plugins.plugin_utils._build import remove_instance
from ansible_collections.berth.fleet.plugins.plugin_utils._placement import (
    DEFAULT_SERVICE_DOWN_TIME_S,
    SOURCES,
    failure_message,
    read_fleet,
    without_gc,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import LEDGER_ARGS, BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    ACTIVE,
    ClaimConflict,
    Ledger,
    instance_flavor,
    run_owner,
)


class ActionModule(BerthAction):
    ARGUMENT_SPEC = {
        "name": {"type": "str", "required": True},
        "to_host": {"type": "str"},
        "mode": {"type": "str", "choices": ["auto", "cold", "live"], "default": "auto"},
        "source": {"type": "str", "choices": list(SOURCES), "default": "ledger"},
        "hypervisor_group": {"type": "str", "default": "hypervisors"},
        "service_down_time": {"type": "int", "default": DEFAULT_SERVICE_DOWN_TIME_S},
        "storage_pool": {"type": "str", "default": "default"},
        "timeout": {"type": "float", "default": 120},
        "transfer_timeout": {"type": "float", "default": 3600},
        **LEDGER_ARGS,
    }
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        with without_gc():
            return self._run(args, task_vars)

    def _run(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        dns_label("name", args["name"])
        ledger = Ledger(args["ledger_url"]).open()
        rows = ledger.instances([args["name"]])
        if not rows:
            raise InputError("name", f"no instance named {args['name']} in the ledger")
        instance = rows[0]
        if instance["state"] != ACTIVE:
            raise InputError("name", f"{args['name']} is {instance['state']}, only ACTIVE instances migrate")
        source = instance["host"]
        target = self._destination(args, task_vars, ledger, instance)
        result: dict[str, Any] = {"changed": True, "name": args["name"], "uuid": instance["uuid"],
                                  "from_host": source, "to_host": target["host"], "why": target["why"]}
        if not instance["uri"]:
            raise BerthError(f"the ledger has no URI for {source}: run playbooks/gather.yml to sync it")
        connect = {"timeout_s": args["timeout"], "transfer_timeout_s": args["transfer_timeout"]}
        with Hypervisor(source, instance["uri"], **connect) as src, \
                Hypervisor(target["host"], target["uri"], **connect) as dst:
            disks, volumes = self._volumes(src, dst, instance, args["storage_pool"])
            if self._task.check_mode:
                result["msg"] = f"would migrate {args['name']} from {source} to {target['host']} ({target['why']})"
                return result
            try:
                claim = ledger.claim_move(instance["uuid"], target["hypervisor_uuid"], run_owner())
            except ClaimConflict as conflict:
                raise BerthError(f"cannot claim {target['host']} for {args['name']}: {conflict.reason}") from conflict
            try:
                hostvars = task_vars.get("hostvars", {})
                address = (hostvars.get(target["host"]) or {}).get(
                    "berth_migration_address", task_vars.get("berth_migration_address"))
                result.update(self._move(src, dst, instance["uuid"], args, address, disks, volumes))
            except Exception:
                # The domain runs on the source again: the destination's claim goes back.
                ledger.release_claim(claim["id"])
                raise
        # The source is released only now that the domain is gone from it.
        ledger.finish_move(instance["uuid"], claim["id"])
        return result

    def _destination(self, args: dict[str, Any], task_vars: dict[str, Any], ledger: Ledger,
                     instance: dict[str, Any]) -> dict[str, Any]:
        """The named host, checked; else the scheduler's pick among the others (never the
        source), decided on the ledger's host states with their claims as usage (a drain moves
        instances one after the other: each migration moved its claim). Returns the build
        target ({host, hypervisor_uuid, uri, ...}) with why it was chosen."""
        source = instance["host"]
        spec = RequestSpec(flavor=instance_flavor(instance), count=1, ignore_hosts=[source],
                           service_down_time=args["service_down_time"])
        fleet = read_fleet({**args, "hosts": None}, task_vars, spec, ledger, sync=False)
        names = list(fleet.hosts.column("host"))
        if args["to_host"]:
            target = args["to_host"]
            if target == source:
                raise InputError("to_host", f"{args['name']} already runs on {source}: name another host")
            if target not in names:
                raise InputError("to_host", f"unknown host {target} (hypervisors: {', '.join(sorted(names))})")
            state = fleet.hosts[names.index(target)]
            if not state.service_up:
                raise BerthError(f"{target} does not answer: {state.down_reason or 'down'}")
            chosen, why = state, "named by to_host"
        else:
            decision = schedule(fleet.hosts, spec)
            if not decision.ok:
                raise BerthError(f"cannot migrate {args['name']}: {failure_message(decision)}")
            chosen = fleet.hosts[names.index(decision.placements[0].host)]
            why = f"chosen by the scheduler: {decision.summary}"
        if fleet.uris:
            offered = sorted({triple[1] for triple in chosen.supported_instances if len(triple) > 1})
            target_info = {"host": chosen.host, "hypervisor_uuid": chosen.uuid, "uri": fleet.uris.get(chosen.host),
                           "domain_types": offered}
        else:
            target_info = ledger.build_targets([chosen.uuid])[chosen.uuid]
        if not target_info.get("uri"):
            raise BerthError(f"no URI known for {chosen.host}: run playbooks/gather.yml to sync it")
        return {**target_info, "why": why}

    @staticmethod
    def _volumes(src: Hypervisor, dst: Hypervisor, instance: dict[str, Any],
                 pool: str) -> tuple[list[str], list[str]]:
        """The volumes that move with the domain: its disks, then its CD-ROMs (Berth's seed) and
        Berth's UEFI variable store, all volumes of ``pool``. Refuses, before anything is
        touched, storage the move cannot carry (other pools, block or network disks, NVRAM
        outside the pool), a backing chain that leaves the pool, a volume that something else on
        the source still uses, and a name the destination has."""
        uuid, name = instance["uuid"], instance["name"]
        xml = src.domain_xml(uuid, inactive=True)
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

    def _move(self, src: Hypervisor, dst: Hypervisor, uuid: str, args: dict[str, Any],
              address: str | None, disks: list[str], volumes: list[str]) -> dict[str, Any]:
        pool = args["storage_pool"]
        domain = src.find_domain(uuid)
        if domain is None:
            raise HypervisorError(src.host, f"domain {uuid} is not there, though the ledger says so")
        running = domain["state"] == "running"
        self._ensure_base_images(src, dst, pool, volumes)
        live_refused = None
        if args["mode"] in ("auto", "live"):
            live_refused = self._live_refused(src, dst, running)
            if live_refused is None:
                try:
                    for name in volumes:
                        # QEMU copies a disk's own layer during the migration; a CD-ROM and the
                        # NVRAM are copied here. (libvirt 9.0 would make the NVRAM from OVMF's
                        # template, and QEMU writes the flash it migrated into it as the guest
                        # resumes; copied first, it is a pool volume that a failed move's cleanup
                        # finds like the disks. The source's file stays behind: removed below.)
                        self._copy(src, dst, pool, name, empty=name in disks)
                    src.live_migrate(uuid, dst, address)
                except HypervisorError as exc:
                    if not _moved_anyway(src, dst, uuid):
                        _remove_moved(dst, uuid, pool, volumes)
                        live_refused = f"live migration failed: {exc}"
                if live_refused is None:
                    _remove_moved(src, uuid, pool, volumes)
                    return {"mode": "live"}
            if args["mode"] == "live":
                raise BerthError(f"cannot live-migrate {args['name']}: {live_refused}")
        return {"mode": "cold", "live_refused": live_refused, **self._cold(src, dst, uuid, pool, volumes, running)}

    @staticmethod
    def _live_refused(src: Hypervisor, dst: Hypervisor, running: bool) -> str | None:
        if not running:
            return "the domain is not running"
        for hv in (src, dst):
            if not hv.can_live_migrate():
                return f"{hv.host} does not offer live migration in its capabilities"
        return None

    @staticmethod
    def _ensure_base_images(src: Hypervisor, dst: Hypervisor, pool: str, volumes: list[str]) -> None:
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
                    src.copy_volume_to(dst, pool, base)

    @staticmethod
    def _copy(src: Hypervisor, dst: Hypervisor, pool: str, name: str, empty: bool = False) -> None:
        if empty:
            # Live migration copies the disk's contents itself: the target needs an empty overlay.
            dst.create_volume_like(src, pool, name)
        else:
            src.copy_volume_to(dst, pool, name)

    @staticmethod
    def _cold(src: Hypervisor, dst: Hypervisor, uuid: str, pool: str, volumes: list[str],
              running: bool) -> dict[str, Any]:
        xml = src.domain_xml(uuid, inactive=True)
        src.stop(uuid)
        try:
            for name in volumes:
                src.copy_volume_to(dst, pool, name)
            dst.define(_repoint_disks(xml, src.pool_path(pool), dst.pool_path(pool)))
            if running:
                dst.start(uuid, src.autostart(uuid))
        except Exception:
            _remove_moved(dst, uuid, pool, volumes)
            if running:
                src.start(uuid, src.autostart(uuid))
            raise
        _remove_moved(src, uuid, pool, volumes)
        return {"restarted": running}


def _moved_anyway(src: Hypervisor, dst: Hypervisor, uuid: str) -> bool:
    """Whether a migration that reported an error (a timeout at the very end) moved the domain
    all the same: then the destination's copy is the only one, and must not be cleaned up."""
    try:
        arrived = dst.find_domain(uuid)
        return arrived is not None and arrived["state"] == "running" and src.find_domain(uuid) is None
    except HypervisorError:
        return False


def _remove_moved(hv: Hypervisor, uuid: str, pool: str, volumes: list[str]) -> None:
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
