"""Provisioning on one hypervisor: its session, the plan, and making and removing an instance's
volumes, seed and domain there; what berth.fleet.instance, berth.fleet.migrate and
berth.fleet.tracker_sync share. Private to the collection.

A task that builds several instances opens each hypervisor once (``HostSession``) and reads its
pool (path, images) and networks once, whatever the number of instances it builds there.

Everything a build makes on a hypervisor is listed by ``plan`` (its ``artefacts``), which the
instance action records in the ledger before ``make`` makes any of it: a volume made here must
be in that list, or a build that dies would leak it.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
from typing import Any, Callable, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils._guest import local_disks_vendor_data
from ansible_collections.berth.fleet.plugins.module_utils.errors import ControllerRefusal, HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.guest_cpu import guest_cpu
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect, HypervisorDriver
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.pool_images import pool_image
from ansible_collections.berth.fleet.plugins.module_utils.request import Image, Request
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import (
    data_volume_name,
    ephemeral_volume_name,
    instance_volume_names,
    nvram_volume_name,
    root_volume_name,
    seed_volume_name,
    swap_volume_name,
)
from ansible_collections.berth.fleet.plugins.plugin_utils._image_sources import open_image_source
from ansible_collections.berth.fleet.plugins.plugin_utils._progress import quiet
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import (
    AFTER_DEFINE,
    AFTER_ROOT_VOLUME,
    AFTER_SEED_VOLUME,
    AFTER_START,
    NO_HOOKS,
    Hooks,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.artefacts import ACTIVE_DOMAIN_STATES
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import DOMAIN, VOLUME
from ansible_collections.berth.fleet.plugins.plugin_utils.nocloud import network_config, seed_iso

# Shown in check mode, where the ledger has not assigned the instance its UUID yet.
PLANNED_UUID = "00000000-0000-0000-0000-000000000000"


def serial_log_file(instance_name: str) -> str:
    """The file name of an instance's serial console log in serial_log_dir: the domain template's
    <log file=...> and berth.fleet.console's read."""
    return f"{instance_name}.serial.log"


def mac_address(instance_uuid: str, index: int) -> str:
    """A stable locally administered MAC in QEMU's 52:54:00 range, from the instance UUID.

    Unique across the fleet as far as the UUIDs' hashes are: 24 bits per instance and interface.
    """
    digest = hashlib.sha256(f"{instance_uuid}/{index}".encode()).digest()
    return "52:54:00:" + ":".join(f"{byte:02x}" for byte in digest[:3])


def remove_instance(hv: HypervisorDriver, instance_uuid: str, pool: str) -> bool:
    """Remove an instance's domain and volumes from a host; True if anything was there."""
    removed = hv.remove_domain(instance_uuid)
    for volume in instance_volume_names(instance_uuid):
        removed = hv.delete_volume(pool, volume) or removed
    return removed


def remove_recorded(hv: HypervisorDriver, instance_uuid: str, items: Sequence[Mapping[str, Any]],
                    spare_running: bool) -> tuple[list[Mapping[str, Any]], bool]:
    """Remove what the ledger recorded of a build of ``instance_uuid`` on ``hv`` (artefact rows:
    kind, pool, name): its domain first, which holds its volumes, then its volumes.

    Returns the items that were there and are gone now, and whether its domain runs: with
    ``spare_running`` (a sync, which never stops a guest) a running domain is left with
    everything of its build, and nothing is removed."""
    if spare_running:
        found = hv.find_domain(instance_uuid)
        if found is not None and found["state"] in ACTIVE_DOMAIN_STATES:
            return [], True
    removed = []
    for item in sorted(items, key=lambda item: item["kind"] != DOMAIN):
        if item["kind"] == DOMAIN:
            # Its NVRAM goes where it is recorded (a volume item); where it is not, it may be on
            # a shared pool, where the instance's evacuated domain uses it.
            gone = hv.remove_domain(instance_uuid, keep_nvram=True)
        else:
            gone = hv.delete_volume(item["pool"], item["name"])
        if gone:
            removed.append(item)
    return removed, False


def domain_type(requested: str, offered: list[str]) -> str:
    """The domain type to build: the one asked for, else kvm where the host offers it, else
    plain QEMU emulation."""
    return requested or ("kvm" if "kvm" in offered else "qemu")


def attempt_targets(placement: Mapping[str, Any], max_attempts: int) -> list[dict[str, Any]]:
    """The hosts a build of ``placement`` (as the schedule gives it) tries, in order: the placed
    host, then its alternates that the ledger can reach (a URI and a host UUID), up to
    ``max_attempts`` hosts; each {host, uri, hypervisor_uuid, domain_types, cpu, cpu_shared_set}."""
    targets = [{"host": placement["host"], "uri": placement.get("uri"), "hypervisor_uuid": None,
                "domain_types": placement.get("domain_types") or [], "cpu": placement.get("cpu"),
                "cpu_shared_set": placement.get("cpu_shared_set")}]
    targets += [dict(target) for target in placement.get("targets") or []
                if target.get("uri") and target.get("hypervisor_uuid")]
    return targets[:max_attempts]


def controller_refusal(target: Mapping[str, Any], request: Request, uri_policy: UriPolicy) -> str | None:
    """Why this controller would refuse to build ``request`` on ``target`` (attempt_targets'),
    found without contacting it: the operator's URI policy refuses its URI, or the guest CPU its
    recorded settings give cannot be had as the domain type the request gets there. None if
    neither; the host may still fail the build."""
    refused = uri_policy.refusal(target.get("uri"))
    if refused:
        return f"its URI is refused by Berth's URI policy: {refused}"
    try:
        guest_cpu(target.get("cpu"), target["host"], domain_type(request.domain_type, target.get("domain_types") or []),
                  request.topology, request.guest.values["cpu_baseline"])
    except InputError as exc:
        return str(exc)
    return None


class HostSession:
    """One hypervisor for the length of one task: its connection, opened on first use through
    ``connect`` (hypervisor_driver.Connect; libvirt's by default), and what builds read of it
    (pool path, images, networks), read once. Builds on it may run in several threads (an
    instance and another's retry); the reads are shared under a lock."""

    def __init__(self, host: str, uri: str, timeout_s: float, uri_policy: UriPolicy,
                 connect: Connect = Hypervisor) -> None:
        self.host, self.uri, self.timeout_s, self.uri_policy = host, uri, timeout_s, uri_policy
        self.connect = connect
        self._hv: HypervisorDriver | None = None
        self._lock = threading.Lock()
        self._pool_paths: dict[str, str] = {}
        self._images: dict[tuple[str, str], dict[str, Any] | None] = {}
        self._digests: dict[tuple[str, str, str], str] = {}
        self._networks: list[str] | None = None

    @property
    def hv(self) -> HypervisorDriver:
        with self._lock:
            if self._hv is None:
                self._hv = self.connect(self.host, self.uri, self.timeout_s, uri_policy=self.uri_policy).__enter__()
            return self._hv

    def close(self) -> None:
        with self._lock:
            if self._hv is not None:
                self._hv.__exit__(None, None, None)
                self._hv = None

    def pool_path(self, pool: str) -> str:
        hv = self.hv
        with self._lock:
            if pool not in self._pool_paths:
                self._pool_paths[pool] = hv.pool_path(pool)
            return self._pool_paths[pool]

    def image(self, pool: str, name: str) -> dict[str, Any] | None:
        """The image volume (checked never to lead out of the pool), or None if the pool lacks it."""
        hv = self.hv
        with self._lock:
            if (pool, name) not in self._images:
                self._images[(pool, name)] = pool_image(hv, pool, name, self.host)
            return self._images[(pool, name)]

    def uploaded(self, pool: str, name: str) -> None:
        """An image was uploaded here: look it up again next time."""
        with self._lock:
            self._images.pop((pool, name), None)
            self._digests = {key: value for key, value in self._digests.items() if key[:2] != (pool, name)}

    def image_digest(self, pool: str, name: str, algorithm: str) -> str:
        """The digest of an image volume's bytes, read once per task."""
        hv = self.hv
        with self._lock:
            if (pool, name, algorithm) not in self._digests:
                self._digests[(pool, name, algorithm)] = hv.volume_digest(pool, name, algorithm)
            return self._digests[(pool, name, algorithm)]

    def networks(self) -> list[str]:
        hv = self.hv
        with self._lock:
            if self._networks is None:
                self._networks = hv.network_names()
            return self._networks


def local_disks(pool_path: str, instance_uuid: str, flavor: Any) -> dict[str, Any]:
    """The flavor's ephemeral and swap disks as the domain template takes them ({path, size};
    None for a size of 0), in ``pool_path``: what a build makes and a move defines again."""
    return {
        "ephemeral": ({"path": os.path.join(pool_path, ephemeral_volume_name(instance_uuid)),
                       "capacity_mb": flavor.ephemeral_gb * 1024} if flavor.ephemeral_gb else None),
        "swap": ({"path": os.path.join(pool_path, swap_volume_name(instance_uuid)), "capacity_mb": flavor.swap}
                 if flavor.swap else None),
    }


def plan(session: HostSession, name: str, uuid: str, request: Request, pool: str,
         render: Callable[[dict[str, Any]], str], volumes: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """What the build of instance ``name`` (``uuid``) will make on ``session``'s host in ``pool``,
    found with read-only calls: refuses unknown images and networks. ``render(plan)`` gives the
    domain XML. ``volumes``: the data volumes its launch makes with it (Request.volume_rows':
    name, size_gb, target), refused where the pool has a volume of that name already."""
    host = session.host
    pool_path = session.pool_path(pool)
    flavor, image = request.flavor, request.image
    result: dict[str, Any] = {
        "disk": {"path": os.path.join(pool_path, root_volume_name(uuid)), "backing": None},
        "seed": None, "nvram": None, "upload": None,
    }
    if image is not None:
        base, result["upload"] = image_base(session, pool, image)
        flavor_mb = flavor.root_gb * 1024
        if flavor_mb and flavor_mb < base["capacity_mb"]:
            raise InputError("flavor.root_gb", f"flavor.root_gb {flavor.root_gb} is smaller than "
                             f"image {image.name} ({base['capacity_mb']} MB)")
        result["disk"]["backing"] = {"path": base["path"], "format": base["format"]}
        result["disk"]["capacity_gb"] = max(flavor.root_gb, -(-base["capacity_mb"] // 1024))
    else:
        result["disk"]["capacity_gb"] = flavor.root_gb
    wanted = request.requested_networks
    if wanted:
        known = session.networks()
        for network in wanted:
            if network not in known:
                raise InputError("networks", f"network {network} is not defined on {host} "
                                 f"(networks there: {', '.join(known) or 'none'})")
    guest = request.guest.values
    if guest["firmware"] == "uefi":
        # libvirt copies OVMF's variable template there when the domain first starts.
        result["nvram"] = {"path": os.path.join(pool_path, nvram_volume_name(uuid))}
    result.update(local_disks(pool_path, uuid, flavor))
    result["volumes"] = []
    for volume in volumes:
        file_name = data_volume_name(volume["name"])
        if session.hv.volume(pool, file_name, False) is not None:
            raise InputError("volumes", f"storage pool {pool} on {host} has a volume {file_name} already, which "
                                        f"no volume of the ledger records: remove it, or name the volume otherwise")
        result["volumes"].append({"name": file_name, "path": os.path.join(pool_path, file_name),
                                  "size_gb": volume["size_gb"], "target": volume["target"], "shared": False})
    if request.wants_seed:
        vendor_data = local_disks_vendor_data(guest["disk_bus"], flavor.ephemeral_gb, flavor.swap,
                                              request.image_properties)
        macs = [mac_address(uuid, index) for index in range(len(request.networks))]
        result["seed"] = {
            "path": os.path.join(pool_path, seed_volume_name(uuid)),
            "data": seed_iso(uuid, name, request.user_data, public_keys=request.public_keys,
                             network_config=network_config([network.to_dict() for network in request.networks], macs),
                             vendor_data=vendor_data),
        }
    # Everything make() makes (an image upload is not the instance's: later builds share it).
    result["artefacts"] = [{"kind": VOLUME, "pool": pool, "name": root_volume_name(uuid)}]
    for disk, volume in (("ephemeral", ephemeral_volume_name), ("swap", swap_volume_name)):
        if result[disk]:
            result["artefacts"].append({"kind": VOLUME, "pool": pool, "name": volume(uuid)})
    if result["seed"]:
        result["artefacts"].append({"kind": VOLUME, "pool": pool, "name": seed_volume_name(uuid)})
    if result["nvram"]:  # libvirt makes it at the first start, which a dead build may have reached
        result["artefacts"].append({"kind": VOLUME, "pool": pool, "name": nvram_volume_name(uuid)})
    result["artefacts"] += [{"kind": VOLUME, "pool": pool, "name": volume["name"]} for volume in result["volumes"]]
    result["artefacts"].append({"kind": DOMAIN, "pool": None, "name": name})
    result["xml"] = render(result)
    return result


def image_base(session: HostSession, pool: str, image: Image) -> tuple[dict[str, Any], Image | None]:
    """The volume of ``pool`` on ``session``'s host that a disk made from ``image`` is backed by
    ({path, format, capacity_mb}), and the image to upload there first (None where the pool has
    it): refuses an image the pool lacks without a source, and one by URL whose name the pool
    has with other bytes."""
    base = session.image(pool, image.name)
    if base is None and not image.source:
        volumes = ", ".join(session.hv.volume_names(pool)) or "none"
        raise InputError("image", f"image {image.name} is not in storage pool {pool} on {session.host} "
                         f"and no image.source to upload it from (volumes there: {volumes})")
    if base is None:
        try:
            size_mb = os.path.getsize(image.source) // (1024 * 1024)
        except OSError as exc:
            raise ControllerRefusal(session.host, f"the controller cannot read image.source: {exc}") from exc
        return {"path": os.path.join(session.pool_path(pool), image.name), "format": image.format,
                "capacity_mb": size_mb}, image
    if image.checksum:
        same_image(session, pool, image)
    return base, None


def upload_image(session: HostSession, pool: str, image: Image, upload_dirs: Sequence[str], step: Any = quiet) -> None:
    """Upload ``image`` (image_base's second answer) into ``pool``, read only from ``upload_dirs``
    (the operator's, and the download cache)."""
    step(f"uploading image {image.name}")
    with open_image_source(image.source, upload_dirs) as handle:
        session.hv.upload_volume(pool, image.name, handle, os.fstat(handle.fileno()).st_size, image.format)
    session.uploaded(pool, image.name)


def same_image(session: HostSession, pool: str, image: Image) -> None:
    """An image by URL whose name the pool already has is used only if it is the same image: a
    volume of that name with other bytes is refused, never silently taken for it."""
    algorithm, expected = image.digest
    found = session.image_digest(pool, image.name, algorithm)
    if found != expected:
        raise InputError("image.checksum", f"storage pool {pool} on {session.host} has a volume {image.name} "
                         f"with checksum {algorithm}:{found}, not image.checksum {algorithm}:{expected}: give the "
                         f"new image another name, or delete the old volume")


class CleanupFailed(HypervisorError):
    """A build failed and what it had made could not be removed (the hypervisor stopped
    answering): whatever is there - a domain that may even run - is unknown until a sync reaches
    the host again."""


def make(session: HostSession, uuid: str, pool: str, planned: dict[str, Any], autostart: bool,
         upload_dirs: Sequence[str], step: Any = quiet, hooks: Hooks = NO_HOOKS) -> None:
    """Make what ``planned`` says on the host, or nothing: whatever fails, what was made is removed.
    An image to upload is read only from ``upload_dirs`` (the operator's, and the download cache).
    Each step done is told to ``step(what, detail=False)`` (see _progress.py), and to ``hooks``
    at its point (hooks.BUILD_POINTS)."""
    hv, host = session.hv, session.host
    # A domain left stopped by an interrupted build is rebuilt from scratch.
    remove_instance(hv, uuid, pool)
    # The launch's data volumes this call made (plan refused any of their names the pool had).
    made_volumes: list[str] = []
    try:
        if planned["upload"]:
            upload_image(session, pool, planned["upload"], upload_dirs, step)
        hv.create_volume(pool, root_volume_name(uuid), planned["disk"]["capacity_gb"], planned["disk"]["backing"])
        step("volume created", detail=True)
        hooks.reached(AFTER_ROOT_VOLUME, host=host, instance=uuid)
        for disk, volume in (("ephemeral", ephemeral_volume_name), ("swap", swap_volume_name)):
            if planned[disk]:
                hv.create_volume(pool, volume(uuid), 0, capacity_mb=planned[disk]["capacity_mb"])
                step(f"{disk} disk created", detail=True)
        for data_volume in planned.get("volumes", []):
            made_volumes.append(data_volume["name"])
            hv.create_volume(pool, data_volume["name"], data_volume["size_gb"])
            step(f"volume {data_volume['name']} created", detail=True)
        if planned["seed"]:
            seed = planned["seed"]["data"]
            hv.upload_volume(pool, seed_volume_name(uuid), io.BytesIO(seed), len(seed), "raw")
            step("seed written", detail=True)
            hooks.reached(AFTER_SEED_VOLUME, host=host, instance=uuid)
        hv.define(planned["xml"])
        step("defined", detail=True)
        hooks.reached(AFTER_DEFINE, host=host, instance=uuid)
        hv.start(uuid, autostart)
        step("started")
        hooks.reached(AFTER_START, host=host, instance=uuid)
    except Exception as exc:
        # Nothing half made stays behind, whatever failed: no domain, no volume.
        try:
            remove_instance(hv, uuid, pool)
            for made in made_volumes:
                hv.delete_volume(pool, made)
        except HypervisorError as cleanup:
            raise CleanupFailed(host, f"{exc}; cleanup failed too: {cleanup}") from exc
        if isinstance(exc, OSError):
            # The controller's file, not the host's doing.
            raise ControllerRefusal(host, f"the controller cannot read image.source: {exc}") from exc
        raise
