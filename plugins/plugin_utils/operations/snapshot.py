"""Snapshot: an instance's root disk written as a standalone image into the operator's image
directory, which later launches use by name, as Nova's ``server image create``. What
berth.fleet.snapshot does. Private to the collection.

The order:

1. the image's name checked as a launch checks an image's (a volume name: no ``/``, no ``..``),
   the operator's image directory (the first of ``berth_image_source_dirs``) known, and no
   image of that name there already (one is never overwritten);
2. the guest made consistent, where it runs: its file systems frozen through its QEMU guest
   agent where one answers, else - ``berth_snapshot_consistency`` - paused (``pause``, the
   default) or refused until it is stopped (``stopped``);
3. on its host, a standalone copy of its root disk made in its pool, the qcow2 overlay and its
   base image read through into one file - by QEMU (a block copy ended before any pivot) where
   the guest runs, else by libvirt's createXMLFrom (qemu-img convert) - then the guest thawed or
   resumed at once: it waits for the copy on its own host only, never for the transfer;
4. the copy downloaded through libvirt into ``<directory>/<name>.part``, its SHA-256 computed on
   the way, renamed to ``<name>`` and described by ``<name>.berth-image.json`` (format,
   checksum, the instance's image properties, where it came from), which is what makes a later
   launch's ``image: <name>`` upload it from there (operations/launch.check_image);
5. the copy in the pool removed. Whatever fails removes what this run made (the copy, the
   partial file) and thaws or resumes the guest; the instance and the ledger are never changed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from typing import Any, Mapping

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import root_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils._progress import Progress
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import PLACED_STATES, Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import IMAGE_RECORD_SUFFIX, image_name
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

CONSISTENCY_MODES = ("pause", "stopped")


class Snapshot:
    """berth.fleet.snapshot (``args``: its validated options - ``name``, ``image``, ``timeout``,
    ``transfer_timeout``; ``settings``: the operator's). In check mode, what it would do;
    nothing is touched. ``connect`` opens the instance's host."""

    def __init__(self, args: Mapping[str, Any], settings: Settings, ledger: Ledger, check_mode: bool,
                 connect: Connect = Hypervisor) -> None:
        self.args, self.settings, self.ledger, self.check_mode, self.connect = args, settings, ledger, check_mode, connect
        self.progress = Progress()

    def run(self) -> dict[str, Any]:
        name = self.args["name"]
        if self.settings.snapshot_consistency not in CONSISTENCY_MODES:
            raise InputError("snapshot_consistency", f"snapshot_consistency (berth_snapshot_consistency) must be one "
                                                     f"of {', '.join(CONSISTENCY_MODES)}, got "
                                                     f"{self.settings.snapshot_consistency!r}")
        name_of_image = image_name(self.args["image"])
        if not self.settings.image_source_dirs:
            raise InputError("image_source_dirs", "a snapshot is written into the operator's image directory, the "
                                                  "first of image_source_dirs (berth_image_source_dirs), and none is set")
        directory = self.settings.image_source_dirs[0]
        path = os.path.join(directory, name_of_image)
        if os.path.lexists(path) or os.path.lexists(path + IMAGE_RECORD_SUFFIX):
            raise InputError("image", f"{path} exists already: a snapshot never overwrites an image; choose another name")
        [instance] = self.ledger.instances([name]) or [None]
        if instance is None:
            raise InputError("name", f"no instance named {name!r} in {self.ledger.label}")
        if instance["state"] not in PLACED_STATES or not instance.get("uri"):
            raise BerthError(f"{name} cannot be snapshotted while it is {instance['state']}: only an instance placed "
                             f"on a host (ACTIVE, STOPPED or PAUSED) is")
        result: dict[str, Any] = {"name": name, "host": instance["host"], "image": name_of_image, "path": path}
        if self.check_mode:
            return {**result, "changed": True, "msg": f"would write {name}'s root disk as image {path}"}
        return {**result, "changed": True, **self._take(instance, name_of_image, path)}

    def _take(self, instance: Mapping[str, Any], image_name: str, path: str) -> dict[str, Any]:
        name, uuid, host = instance["name"], instance["uuid"], instance["host"]
        step = self.progress.of(name, host)
        pool = self.settings.storage_pool
        copy = f"berth-{uuid}-snapshot.qcow2"
        policy = UriPolicy.from_settings(self.settings.uri_policy)
        with self.connect(host, instance["uri"], self.args["timeout"], uri_policy=policy,
                          transfer_timeout_s=self.args["transfer_timeout"]) as hv:
            found = hv.find_domain(uuid)
            if found is None:
                raise BerthError(f"{name} has no domain on {host}: run playbooks/gather.yml to see why")
            how = self._consistent(hv, name, uuid, found["state"])
            try:
                hv.flatten_volume(pool, root_volume_name(uuid), copy,
                                  running=uuid if found["state"] in ("running", "paused") else None)
            except Exception:
                hv.delete_volume(pool, copy)
                raise
            finally:
                self._release(hv, uuid, how)
            step(f"root disk copied on {host} ({how}); downloading")
            digest = hashlib.sha256()
            partial = path + ".part"
            try:
                with open(partial, "xb") as out:
                    def write(chunk: bytes) -> None:
                        digest.update(chunk)
                        out.write(chunk)
                    hv.download_volume(pool, copy, write)
                os.replace(partial, path)
            except BaseException:
                if os.path.lexists(partial):
                    os.unlink(partial)
                raise
            finally:
                hv.delete_volume(pool, copy)
        record = {"format": "qcow2", "checksum": f"sha256:{digest.hexdigest()}",
                  "properties": dict(instance.get("image_properties") or {}), "from_instance": name,
                  "from_image": instance.get("image"), "consistency": how,
                  "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
        with open(path + IMAGE_RECORD_SUFFIX, "x", encoding="utf-8") as out:
            json.dump(record, out, indent=2, sort_keys=True)
        step(f"image {image_name} written: {path}")
        return {"checksum": record["checksum"], "consistency": how, "properties": record["properties"],
                "msg": f"{name}'s root disk written as image {image_name} ({path}, {record['checksum']}; {how}); "
                       f"launch it with image={image_name}"}

    def _consistent(self, hv: Any, name: str, uuid: str, state: str) -> str:
        """Make the guest's disk consistent for the copy; returns how."""
        if state != "running":
            return f"the guest was {state}"
        why_not = hv.fs_freeze(uuid)
        if why_not is None:
            return "file systems frozen by the guest agent"
        if self.settings.snapshot_consistency == "stopped":
            raise BerthError(f"{name} runs and its guest agent cannot freeze its file systems ({why_not}); "
                             f"berth_snapshot_consistency=stopped: stop it first (playbooks/power.yml) and snapshot "
                             f"it again")
        hv.suspend(uuid)
        return f"paused for the copy (no guest agent froze it: {why_not})"

    @staticmethod
    def _release(hv: Any, uuid: str, how: str) -> None:
        if how.startswith("file systems frozen"):
            hv.fs_thaw(uuid)
        elif how.startswith("paused for the copy"):
            hv.resume(uuid)
