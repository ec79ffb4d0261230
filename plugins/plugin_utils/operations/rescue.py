"""Rescue and unrescue: an instance booted from a rescue image with its own root disk as its
second disk, and booted from its own disk again afterwards, as Nova's ``server rescue`` and
``server unrescue`` (its libvirt driver's legacy rescue: the rescue disk first, the instance's
own disk second, the config drive kept, its other disks and volumes not attached meanwhile).
What berth.fleet.rescue does. Private to the collection.

A rescue, in order, so that nothing is changed for one that cannot happen, and a run that dies
half way leaves the instance saying so:

1. the rescue image checked as a launch checks an image (operations/launch.check_image; by
   default the image the instance was launched with, as Nova's), and the instance's host asked
   whether it would take the instance with it (operations/rebuild.refuse_image:
   ImagePropertiesFilter, PoolImageFilter...); its domain must be as Berth defined it, since
   the unrescue defines that again;
2. the ledger: RESCUED, "rescuing with image ... by ...: if this stays, the rescue died" - its
   claim stays, and a sync leaves a RESCUED instance alone; a second rescue run finishes it,
   an unrescue undoes it (a rescue that fails says so, and leaves the same choice);
3. on its host: the guest shut down (gracefully, within ``shutdown_timeout``), the rescue disk
   made from the image (berth-<uuid>-rescue.qcow2, a qcow2 overlay on the image's volume),
   the rescue definition defined (Berth's own definition of the instance with the rescue disk
   on the root disk's device and the root disk on the next one) and started;
4. the ledger: RESCUED, "rescued with image ...".

An unrescue: the guest powered off, Berth's own definition of the instance defined again, the
rescue disk removed, the guest started, and the ledger ACTIVE. Each step can be run again, so an
unrescue that died is finished by running it again.
"""

from __future__ import annotations

import copy
import os
import xml.etree.ElementTree as ET
from typing import Any, Mapping

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect, HypervisorDriver
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import rescue_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils._image_sources import image_source_dirs
from ansible_collections.berth.fleet.plugins.plugin_utils._power_states import OFF_STATES, shut_down
from ansible_collections.berth.fleet.plugins.plugin_utils._progress import Progress
from ansible_collections.berth.fleet.plugins.plugin_utils._provisioning import HostSession, image_base, upload_image
from ansible_collections.berth.fleet.plugins.plugin_utils._transfer import foreign_parts
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import (
    AFTER_RESCUE_DEFINE,
    AFTER_RESCUE_DISK,
    AFTER_UNRESCUE_DEFINE,
    NO_HOOKS,
    Hooks,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import PLACED_STATES, RESCUED, Ledger, run_owner
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import (
    DEFAULT_TEMPLATE,
    DomainTemplate,
    recorded_definition,
    shared_pool_paths,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.move import known_instance
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.rebuild import refuse_image, with_image
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

# The reason a RESCUED instance carries while its rescue is under way (and after one died), and
# once it runs from the rescue image.
RESCUING = "rescuing with image"
RESCUED_WITH = "rescued with image"
STATES = ("rescued", "unrescued")


def rescue_definition(definition: str, rescue_path: str) -> str:
    """``definition`` (Berth's own, rendered from the instance's record) for a rescue: the
    rescue disk at ``rescue_path`` on the root disk's device, which the guest boots from, the
    root disk on the next device of its bus, and no other disk (the ephemeral and swap disks
    and the data volumes wait for the unrescue, as in Nova's legacy rescue); CD-ROMs (the seed)
    are kept."""
    domain = ET.fromstring(definition)
    devices = domain.find("devices")
    disks = [disk for disk in devices.findall("disk") if disk.get("device") == "disk"] if devices is not None else []
    if not disks:
        raise InputError("template", "the domain template defines no disk: there is no root disk to rescue")
    root, others = disks[0], disks[1:]
    for disk in others:
        devices.remove(disk)
    for address in root.findall("address"):  # the devices change: libvirt gives both disks addresses anew
        root.remove(address)
    rescue = copy.deepcopy(root)
    rescue.find("source").set("file", rescue_path)
    target = root.find("target")
    device = target.get("dev")
    target.set("dev", device[:-1] + chr(ord(device[-1]) + 1))
    devices.insert(list(devices).index(root), rescue)
    return ET.tostring(domain, encoding="unicode")


class Rescue:
    """berth.fleet.rescue (``args``: its validated options - ``name``, ``state``, ``image``,
    ``timeout``, ``shutdown_timeout``, ``template``; ``settings``: the operator's). In check
    mode, what it would do: the image checked, the host asked, nothing changed. ``connect``
    opens the instance's host."""

    def __init__(self, args: Mapping[str, Any], settings: Settings, ledger: Ledger, task_vars: Mapping[str, Any],
                 check_mode: bool, hooks: Hooks = NO_HOOKS, connect: Connect = Hypervisor) -> None:
        self.args, self.settings, self.ledger, self.task_vars = args, settings, ledger, task_vars
        self.check_mode, self.hooks, self.connect = check_mode, hooks, connect
        self.progress = Progress()

    def run(self) -> dict[str, Any]:
        name, wanted = self.args["name"], self.args.get("state") or "rescued"
        if wanted not in STATES:
            raise InputError("state", f"state must be one of {', '.join(STATES)}, got {wanted!r}")
        instance = known_instance(self.ledger, name)
        if not instance.get("uri") or instance["hypervisor_uuid"] is None:
            raise BerthError(f"{name} is not placed on a host the ledger knows ({instance['state']})")
        result: dict[str, Any] = {"name": name, "uuid": instance["uuid"], "host": instance["host"]}
        if wanted == "unrescued":
            return {**result, **self._unrescue(instance)}
        return {**result, **self._rescue(instance)}

    def _rescue(self, instance: Mapping[str, Any]) -> dict[str, Any]:
        name, host, state = instance["name"], instance["host"], instance["state"]
        reason = instance.get("failure_reason") or ""
        if state == RESCUED and reason.startswith(RESCUED_WITH):
            return {"changed": False, "state": RESCUED,
                    "msg": f"{name} is in rescue already ({reason}): unrescue it first to rescue it with another image"}
        if state != RESCUED and state not in PLACED_STATES:
            raise BerthError(f"{name} cannot be rescued while it is {state}: only an instance placed on a host "
                             f"({', '.join(PLACED_STATES)}) is")
        request = with_image(instance, self.args.get("image"), self.settings, "the rescue image")
        refuse_image(self.ledger, self.settings, self.task_vars, instance, request, "rescued with")
        image = request.image
        said = f"{name} on {host} from image {image.name}, its own root disk as its second disk"
        target = self.ledger.build_targets([instance["hypervisor_uuid"]])[instance["hypervisor_uuid"]]
        pool = self.settings.storage_pool
        step = self.progress.of(name, host)
        session = HostSession(host, instance["uri"], self.args["timeout"],
                              UriPolicy.from_settings(self.settings.uri_policy), self.connect)
        try:
            hv = session.hv
            own = self._own_definition(hv, instance, target)
            if state != RESCUED:  # a rescue that died has defined the rescue domain already
                self._as_berth_defined(hv, instance, own)
            base, upload = image_base(session, pool, image)
            if self.check_mode:
                return {"changed": True, "image": image.name, "state": state,
                        "msg": f"would rescue {said}" + (f", uploading image {image.name} there first" if upload else "")}
            self.ledger.rescue(instance["uuid"], f"{RESCUING} {image.name} by {run_owner()}: if this stays, the "
                                                 f"rescue died; run the rescue again to finish it, or unrescue it")
            try:
                self._boot_rescue(hv, session, instance, image, base, upload, own, step)
            except Exception as exc:  # what it made stays for the unrescue, which removes it
                why = str(exc) or type(exc).__name__
                self.ledger.rescue(instance["uuid"], f"rescue with image {image.name} failed: {why}; unrescue it to "
                                                     f"boot it from its own disk, or rescue it again")
                raise BerthError(f"{name}: rescue with image {image.name} on {host} failed (RESCUED, its claim kept; "
                                 f"unrescue it, or rescue it again): {why}") from exc
        finally:
            session.close()
        done = self.ledger.rescue(instance["uuid"], f"{RESCUED_WITH} {image.name}: unrescue it to boot from its "
                                                    f"own disk again")
        step(f"running from rescue image {image.name}")
        return {"changed": True, "image": image.name, "state": done["state"], "msg": f"rescued {said}"}

    def _boot_rescue(self, hv: HypervisorDriver, session: HostSession, instance: Mapping[str, Any], image: Any,
                     base: Mapping[str, Any], upload: Any, own: str, step: Any) -> None:
        uuid, pool = instance["uuid"], self.settings.storage_pool
        if hv.domain_state(uuid) not in OFF_STATES:
            shut_down(hv, uuid, self.args["shutdown_timeout"], step)
        if upload is not None:
            upload_image(session, pool, upload, image_source_dirs(self.settings), step)
        volume = rescue_volume_name(uuid)
        hv.delete_volume(pool, volume)  # one a rescue that died made: made anew
        hv.create_volume(pool, volume, max(1, -(-base["capacity_mb"] // 1024)),
                         {"path": base["path"], "format": base["format"]})
        step(f"rescue disk made from image {image.name}", detail=True)
        self.hooks.reached(AFTER_RESCUE_DISK, host=hv.host, instance=uuid)
        hv.define(rescue_definition(own, os.path.join(session.pool_path(pool), volume)))
        step("rescue definition defined", detail=True)
        self.hooks.reached(AFTER_RESCUE_DEFINE, host=hv.host, instance=uuid)
        hv.start(uuid, None)

    def _unrescue(self, instance: Mapping[str, Any]) -> dict[str, Any]:
        name, host, uuid = instance["name"], instance["host"], instance["uuid"]
        if instance["state"] != RESCUED:
            return {"changed": False, "state": instance["state"], "msg": f"{name} is not in rescue ({instance['state']})"}
        said = f"{name} on {host}: booted from its own disk again"
        if self.check_mode:
            return {"changed": True, "state": RESCUED, "msg": f"would unrescue {said}"}
        target = self.ledger.build_targets([instance["hypervisor_uuid"]])[instance["hypervisor_uuid"]]
        pool = self.settings.storage_pool
        step = self.progress.of(name, host)
        policy = UriPolicy.from_settings(self.settings.uri_policy)
        with self.connect(host, instance["uri"], self.args["timeout"], uri_policy=policy) as hv:
            own = self._own_definition(hv, instance, target)
            hv.stop(uuid)  # the rescue guest has nothing to keep; the disk it rescued is not its own
            hv.define(own)
            step("its own definition defined again", detail=True)
            self.hooks.reached(AFTER_UNRESCUE_DEFINE, host=host, instance=uuid)
            hv.delete_volume(pool, rescue_volume_name(uuid))
            hv.start(uuid, None)
        done = self.ledger.mark_active(uuid)
        step("running from its own disk")
        return {"changed": True, "state": done["state"], "msg": f"unrescued {said}"}

    def _own_definition(self, hv: HypervisorDriver, instance: Mapping[str, Any], target: Mapping[str, Any]) -> str:
        """Berth's definition of the instance on its host ``hv``, from its record: what it had
        before the rescue and has again after."""
        assignment = next((claim["assignment"] for claim in self.ledger.claims(instance["uuid"])
                           if claim["hypervisor_uuid"] == instance["hypervisor_uuid"]), None)
        template = DomainTemplate(self.args.get("template") or DEFAULT_TEMPLATE)
        attached = self.ledger.volumes(instance_uuid=instance["uuid"])
        return recorded_definition(instance, template, hv.pool_path(self.settings.storage_pool),
                                   list(target.get("domain_types") or []), self.settings.serial_log_dir,
                                   assignment=assignment, shared_cpus=target.get("cpu_shared_set"),
                                   volumes=attached, pool_paths=shared_pool_paths(hv, attached))

    @staticmethod
    def _as_berth_defined(hv: HypervisorDriver, instance: Mapping[str, Any], own: str) -> None:
        """Refuse a domain with what Berth did not define: the unrescue defines Berth's again,
        which would lose it."""
        actual = hv.domain_xml(instance["uuid"], inactive=True)
        if actual is None:
            raise BerthError(f"{instance['name']} has no domain on {instance['host']}: run playbooks/gather.yml to "
                             f"see why")
        foreign = foreign_parts(actual, own)
        if foreign:
            raise BerthError(f"{instance['name']}'s domain on {instance['host']} has what Berth did not define there: "
                             f"{'; '.join(foreign)}. Its unrescue would define it as Berth does, losing that: "
                             f"nothing was changed")
