"""A launch: the request checked once into its type, the instances scheduled and claimed, then
built on their hosts with retries on the alternates. What berth.fleet.server does for named
instances; berth.fleet.instance_request and berth.fleet.instance share its check. Private to the
collection."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils._guest import Guest, volume_devices
from ansible_collections.berth.fleet.plugins.module_utils._public_keys import public_keys_spec
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.request import (
    Boot,
    Image,
    Network,
    Request,
    domain_type_option,
    ha_option,
    ha_priority_option,
    labels_option,
    metadata_spec,
    user_data_spec,
    volumes_option,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import DEFAULT_PROJECT_ID
from ansible_collections.berth.fleet.plugins.plugin_utils._flavors import flavor_option
from ansible_collections.berth.fleet.plugins.plugin_utils._image_download import fetch_image
from ansible_collections.berth.fleet.plugins.plugin_utils._image_sources import check_image_source, image_source_dirs
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import (
    refuse_idle_hints,
    request_spec,
    server_group_value,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import NO_HOOKS, Hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import Build
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.schedule import Schedule
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


def check_request(options: Mapping[str, Any], settings: Settings) -> Request:
    """A launch's request from the requester's ``options`` (a task's validated arguments) and the
    operator's ``settings``, every part checked against its limits before anything is scheduled:
    the flavor, image, networks (with their static settings), metadata, user data, SSH keys, boot
    paths, the guest's hardware and vCPU topology, HA and its priority, the data volumes to make with it, the zone,
    group, labels and hints (a hint no enabled filter reads is refused). An image by URL is downloaded into the controller's cache (in check
    mode too) and its checksum checked, last. Contacts no hypervisor. The one place a request is
    checked: everything after it takes the Request as it is."""
    if options.get("flavor") is None:
        raise InputError("flavor", "flavor is required to launch an instance (a name from the flavors file, or a dict "
                                   "of sizes)")
    flavor = flavor_option(options["flavor"], settings.flavors_file)
    image = check_image(options.get("image"), settings)
    request = Request(
        flavor=flavor, image=image,
        guest=Guest.from_options(options, image.properties if image is not None else None),
        networks=Network.from_option(options.get("networks")),
        key_name=options.get("key_name"),
        public_keys=tuple(public_keys_spec(options.get("ssh_authorized_keys"), options.get("key_name"),
                                           settings.key_pairs)),
        metadata=metadata_spec(options.get("metadata")), user_data=user_data_spec(options.get("user_data")),
        boot=Boot.from_option(settings.boot),
        availability_zone=limits.check_name("availability_zone", options.get("availability_zone")),
        server_group=server_group_value(options.get("server_group")),
        scheduler_hints=limits.check_mapping_size("scheduler_hints", options.get("scheduler_hints") or {}),
        labels=labels_option(options.get("labels")),
        project_id=limits.check_name("project_id", settings.project_id) or DEFAULT_PROJECT_ID,
        domain_type=domain_type_option(options.get("domain_type")), autostart=bool(options.get("autostart")),
        ha=ha_option(options.get("ha") or False), ha_priority=ha_priority_option(options.get("ha_priority") or 0),
        volumes=volumes_option(options.get("volumes")))
    devices = volume_devices(request.guest.values["disk_bus"])
    if len(request.volumes) > len(devices):
        raise InputError("volumes", f"a guest on disk bus {request.guest.values['disk_bus']} takes at most "
                                    f"{len(devices)} data volume(s), got {len(request.volumes)}: choose another disk_bus")
    refuse_idle_hints(request_spec(request, settings))
    # Last, after every cheap check: the download.
    return dataclasses.replace(request, image=fetched(image, settings))


# Beside an image a snapshot wrote into the operator's image directory (operations/snapshot.py):
# its record (format, checksum, properties), which lets a launch name the image alone.
IMAGE_RECORD_SUFFIX = ".berth-image.json"


def check_image(option: Any, settings: Settings) -> Image | None:
    """The requester's ``image`` option (a launch's, a rebuild's), checked: its name, format,
    URL and checksum, and a source file only inside the operator's image directories. A name
    alone that a snapshot wrote into one of those directories is that image, uploaded from
    there to the hosts that lack it, with the properties the snapshot recorded."""
    image = Image.from_option(option)
    if image is not None and isinstance(option, str):
        image = snapshot_image(image.name, settings) or image
    check_image_source(image, image_source_dirs(settings), settings.image_max_mb)
    return image


def image_name(option: Any) -> str:
    """A new image's name (a snapshot's option ``image``), checked as a launch checks an image's
    name: a volume name, no ``/``, no ``..``."""
    if not isinstance(option, str):
        raise InputError("image", f"image must be the new image's name, got {option!r}")
    image = Image.from_option(option)
    if image is None:
        raise InputError("image", "image must be the new image's name, got nothing")
    return image.name


def snapshot_image(name: str, settings: Settings) -> Image | None:
    """The image ``name`` a snapshot wrote into one of the operator's image directories (its
    record beside it), or None."""
    for directory in settings.image_source_dirs:
        record_path = os.path.join(directory, name + IMAGE_RECORD_SUFFIX)
        if not os.path.isfile(record_path):
            continue
        try:
            with open(record_path, encoding="utf-8") as record_file:
                record = json.load(record_file)
        except (OSError, ValueError) as exc:
            raise InputError("image", f"the record of image {name}, {record_path}, cannot be read: {exc}") from exc
        if not isinstance(record, dict):
            raise InputError("image", f"the record of image {name}, {record_path}, is not a mapping")
        return Image.from_option({"name": name, "format": record.get("format", "qcow2"),
                                  "source": os.path.join(directory, name), "properties": record.get("properties") or {}})
    return None


def fetched(image: Image | None, settings: Settings) -> Image | None:
    """An image by URL downloaded into the controller's cache (in check mode too) and its
    checksum checked; any other as it is."""
    return fetch_image(image, settings) if image is not None and image.url else image


class Launch:
    """Launch the instances ``names`` (those not there yet) from one checked request: schedule
    and claim them together, then build each on its host, retried on its alternates.
    ``ignore_hosts`` is the requester's list of hosts to avoid (not recorded: a move avoids its
    own source). ``connect`` opens the hypervisors the build reaches (libvirt's by default)."""

    def __init__(self, request: Request, settings: Settings, names: Sequence[str], launch_name: str,
                 ledger: Ledger | None, task_vars: Mapping[str, Any], template_path: str, check_mode: bool,
                 diff: bool, hooks: Hooks = NO_HOOKS, ignore_hosts: Sequence[str] = (), timeout_s: float = 30,
                 connect: Connect = Hypervisor) -> None:
        self.request, self.settings, self.names, self.launch_name = request, settings, list(names), launch_name
        self.ledger, self.task_vars, self.ignore_hosts, self.timeout_s = ledger, task_vars, list(ignore_hosts), timeout_s
        self.template_path, self.check_mode, self.diff, self.hooks = template_path, check_mode, diff, hooks
        self.connect = connect

    def run(self) -> dict[str, Any]:
        if self.request.volumes:
            if self.ledger is None and not self.check_mode:
                raise InputError("volumes", "volumes made with a launch are recorded in the ledger: launch with "
                                            "the ledger (berth_ledger), or make them later with berth.fleet.volume")
            for name in self.names:
                # Each instance's volume names, checked before anything is decided.
                self.request.volume_rows(name)
        schedule = Schedule(self.request, self.settings, self.names, self.launch_name, self.ledger, self.task_vars,
                            self.check_mode, self.hooks, ignore_hosts=self.ignore_hosts)
        planned = schedule.run()
        result: dict[str, Any] = {"schedule": planned, "changed": bool(planned["placements"]) and not self.check_mode}
        if planned.get("failed") or not planned["placements"]:
            result.update({key: planned[key] for key in ("failed", "msg") if key in planned})
            return result
        build = Build(self.settings, self.ledger, self.template_path, self.check_mode, self.diff, self.hooks,
                      self.timeout_s, self.connect)
        built = build.build(self.request, planned["placements"], exact=schedule.exact)
        result.update(build=built, changed=built["changed"] or result["changed"])
        result.update({key: built[key] for key in ("failed", "msg") if key in built})
        return result
