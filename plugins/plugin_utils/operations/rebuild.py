"""Rebuild: an instance's disks made anew from an image (the same or another) on its own host,
keeping its name, UUID, MAC addresses, static addresses, keys, user data and claim, as Nova's
``server rebuild``. What berth.fleet.rebuild does. Private to the collection.

The order, so that nothing is removed for a rebuild that cannot happen, and nothing is left
unknown by one that dies half way:

1. the new image checked as a launch checks it (operations/launch.check_image: its name, URL,
   checksum, a source file only inside the operator's image directories), and downloaded where
   it is given by URL;
2. the instance's host checked with the scheduler's filters on the request with the new image,
   the instance's own claim given back as a resize on its own host does: ImagePropertiesFilter
   (the image's architecture, hypervisor type and version against the host), the aggregates'
   image isolation, PoolImageFilter (the image volume there, unless it is uploaded), the host up.
   A host that refuses names the filter's reason and nothing changes;
3. the ledger: ERROR "rebuilding ... " (start_rebuild) - its claim stays, and a sync leaves an
   ERROR instance alone; a rebuild that dies from here on leaves the instance saying so, and
   running the rebuild again finishes it;
4. the old domain and every volume of the instance removed from its host;
5. the instance built anew there from its recorded request with the new image, as an
   evacuation rebuilds (Build.rebuild), its seed made again with its keys, network settings and
   user data; anything that fails is removed from the host again (the instance stays ERROR);
6. the ledger: its request, image and image properties replaced, ACTIVE (finish_rebuild).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.request import Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_IMAGE_MISSING,
    REASON_IMAGE_PROPERTIES,
    REASON_IMAGE_REFUSED,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.server_group import server_group_from_dict
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import read_fleet
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import request_spec
from ansible_collections.berth.fleet.plugins.plugin_utils._progress import Progress
from ansible_collections.berth.fleet.plugins.plugin_utils._provisioning import remove_instance
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import AFTER_REBUILD_REMOVE, NO_HOOKS, Hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ERROR, PLACED_STATES, Ledger, run_owner
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import DEFAULT_TEMPLATE, Build
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.evacuate import rebuildable_request
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import check_image, fetched
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.move import known_instance, own_host_refusal
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.volume import disk_bus, reattach
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

# The reason an instance carries while its disks are being made anew (and after a rebuild died).
REBUILDING = "rebuilding from image"
# The host's refusals that the image given causes (its properties, its absence from the pool, its
# name): bad input, named as the image field.
IMAGE_REASONS = frozenset({REASON_IMAGE_PROPERTIES, REASON_IMAGE_MISSING, REASON_IMAGE_REFUSED})


def with_image(instance: Mapping[str, Any], given: Any, settings: Settings, wanted: str) -> Request:
    """The instance's recorded request with the image option ``given`` (checked as a launch's,
    and downloaded where it is given by URL), or with the image it records where none is given;
    InputError naming the image where it has none either (``wanted`` says what to give)."""
    recorded = rebuildable_request(instance)
    image = check_image(given, settings) if given is not None else recorded.image
    if image is None:
        raise InputError("image", f"{instance['name']} was launched without an image: give {wanted}")
    return dataclasses.replace(recorded, image=fetched(image, settings))


def refuse_image(ledger: Ledger, settings: Settings, task_vars: Mapping[str, Any], instance: Mapping[str, Any],
                 request: Request, verb: str) -> None:
    """Refuse where the instance's host would not take it with ``request`` (its recorded
    request with another image: a rebuild's, a rescue's), as the scheduler says it, with its own
    claim given back (as a resize on its own host): InputError naming the image where the image
    is what the host refuses, else BerthError; the message says it cannot be ``verb`` (e.g.
    "rebuilt from") that image there, and that nothing was changed."""
    group = ledger.moving_member_group(instance["uuid"])
    spec = request_spec(request, settings, 1, server_group_from_dict(dict(group)) if group else None,
                        image_volume=request.image_volume)
    fleet = read_fleet(settings, task_vars, spec, ledger, sync=False)
    held = [claim for claim in ledger.claims(instance["uuid"]) if claim["hypervisor_uuid"] == instance["hypervisor_uuid"]]
    refusal, reason = own_host_refusal(fleet, instance, held, spec)
    if refusal is None:
        return
    message = (f"{instance['name']} cannot be {verb} image {request.image.name} on {instance['host']}: {refusal}. "
               f"Nothing was changed")
    if reason in IMAGE_REASONS:
        raise InputError("image", message)  # the image given is what the host refuses
    raise BerthError(message)


class Rebuild:
    """berth.fleet.rebuild (``args``: its validated options - ``name``, ``image``, ``timeout``,
    ``template``; ``settings``: the operator's). In check mode, the plan: the image checked,
    the host's answer, nothing removed or recorded. ``connect`` opens the instance's host."""

    def __init__(self, args: Mapping[str, Any], settings: Settings, ledger: Ledger, task_vars: Mapping[str, Any],
                 check_mode: bool, hooks: Hooks = NO_HOOKS, connect: Connect = Hypervisor) -> None:
        self.args, self.settings, self.ledger, self.task_vars = args, settings, ledger, task_vars
        self.check_mode, self.hooks, self.connect = check_mode, hooks, connect
        self.progress = Progress()

    def run(self) -> dict[str, Any]:
        name = self.args["name"]
        instance = known_instance(self.ledger, name)
        if instance["state"] not in (*PLACED_STATES, ERROR) or instance["hypervisor_uuid"] is None:
            raise BerthError(f"{name} cannot be rebuilt while it is {instance['state']}: only an instance placed on a "
                             f"host (ACTIVE, STOPPED, PAUSED, or ERROR there) is")
        request = with_image(instance, self.args.get("image"), self.settings, "the image to rebuild it from")
        image = request.image
        host = instance["host"]
        refuse_image(self.ledger, self.settings, self.task_vars, instance, request, "rebuilt from")
        said = f"{name} on {host}: root disk made anew from image {image.name}"
        result: dict[str, Any] = {"name": name, "uuid": instance["uuid"], "host": host, "image": image.name,
                                  "previous_image": instance["image"], "changed": True}
        if self.check_mode:
            return {**result, "msg": f"would rebuild {said} (its other disks too; name, UUID, MAC addresses, "
                                     f"network settings, keys and claim kept)"}
        return {**result, "instance": self._rebuild(instance, request), "msg": said}

    def _rebuild(self, instance: Mapping[str, Any], request: Request) -> dict[str, Any]:
        name, uuid, host = instance["name"], instance["uuid"], instance["host"]
        step = self.progress.of(name, host)
        target = self.ledger.build_targets([instance["hypervisor_uuid"]])[instance["hypervisor_uuid"]]
        [claim] = [claim for claim in self.ledger.claims(uuid) if claim["hypervisor_uuid"] == instance["hypervisor_uuid"]]
        self.ledger.start_rebuild(uuid, f"{REBUILDING} {request.image.name} by {run_owner()}: if this stays, the "
                                        f"rebuild died; run it again to finish it")
        try:
            policy = UriPolicy.from_settings(self.settings.uri_policy)
            with self.connect(host, target["uri"], self.args["timeout"], uri_policy=policy) as hv:
                remove_instance(hv, uuid, self.settings.storage_pool)
            step("old domain and disks removed")
            self.hooks.reached(AFTER_REBUILD_REMOVE, host=host, instance=uuid)
            build = Build(self.settings, self.ledger, self.args.get("template") or DEFAULT_TEMPLATE, check_mode=False,
                          diff=False, hooks=self.hooks, timeout_s=self.args["timeout"], connect=self.connect)
            made = build.rebuild(request, target, name, uuid, claim["assignment"])
            self._reattach(instance, target)
        except Exception as exc:  # the build removed what it made; the instance says why
            why = str(exc) or type(exc).__name__
            self.ledger.start_rebuild(uuid, f"rebuild from image {request.image.name} failed: {why}; run it again")
            raise BerthError(f"{name}: rebuild from image {request.image.name} on {host} failed (ERROR, its claim "
                             f"kept; run it again): {why}") from exc
        record = {**request.to_record(), "build": made["built"]}
        image_properties = request_spec(request, self.settings).image_properties
        done = self.ledger.finish_rebuild(uuid, record, request.image.name, image_properties)
        step(f"running from image {request.image.name}")
        return done

    def _reattach(self, instance: Mapping[str, Any], target: Mapping[str, Any]) -> None:
        """Its data volumes (berth.fleet.volume), which a rebuild keeps, plugged into the new
        domain on the devices the ledger gave them."""
        attached = self.ledger.volumes(instance_uuid=instance["uuid"])
        if not attached:
            return
        policy = UriPolicy.from_settings(self.settings.uri_policy)
        with self.connect(instance["host"], target["uri"], self.args["timeout"], uri_policy=policy) as hv:
            reattach(hv, instance["uuid"], attached, disk_bus(instance))
