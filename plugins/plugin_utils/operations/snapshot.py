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

A run that is killed (nothing of it runs any more) cannot do that. So each run holds, in the image
directory, a journal per instance (``.berth-snapshot-<uuid>.json``): its lock, which the kernel
lets go of when the run dies, and what the run holds so far - the guest frozen or paused, the
partial file, the image not yet described. The next snapshot of that instance (of any image name)
takes the lock first, undoes what a dead run's journal says and removes the copy from the pool,
and says so; while a live run holds the lock another snapshot of the instance is refused.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import os
from typing import Any, Mapping

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import root_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils._progress import Progress
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import (
    AFTER_SNAPSHOT_COPY,
    NO_HOOKS,
    SNAPSHOT_CONSISTENT,
    Hooks,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import PLACED_STATES, Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import IMAGE_RECORD_SUFFIX, image_name
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.move import known_instance
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

CONSISTENCY_MODES = ("pause", "stopped")
# A run's journal in the image directory: .berth-snapshot-<instance uuid>.json (see above).
JOURNAL_PREFIX = ".berth-snapshot-"
# What the journal says the run holds of the guest, which the next run gives back.
FROZEN, PAUSED = "frozen", "paused"


def copy_volume_name(uuid: str) -> str:
    """The standalone copy of the instance's root disk that a snapshot makes in its pool."""
    return f"berth-{uuid}-snapshot.qcow2"


class Journal:
    """The lock of snapshots of one instance, and what the run that holds it holds so far (see
    the module's docstring). ``left`` is what the journal said when it was taken: a dead run's."""

    def __init__(self, directory: str, uuid: str, name: str) -> None:
        self.path = os.path.join(directory, f"{JOURNAL_PREFIX}{uuid}.json")
        self.name = name
        self.fd = -1
        self.left: dict[str, Any] = {}
        self.now: dict[str, Any] = {}

    def __enter__(self) -> "Journal":
        while True:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(self.fd)
                raise BerthError(f"another snapshot of {self.name} is running (it holds {self.path}): "
                                 f"one at a time") from None
            # A run that finished removes its journal as it lets go of it: locked, that file is
            # this run's only if the name still leads to it.
            try:
                if os.stat(self.path).st_ino == os.fstat(self.fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(self.fd)
        text = os.read(self.fd, 1 << 16).decode("utf-8", errors="replace")
        try:
            self.left = json.loads(text) if text.strip() else {}
        except ValueError:
            self.left = {}
        # Kept until undone (Snapshot._undo): a run that fails before leaves it for the next.
        self.now = dict(self.left)
        return self

    def write(self, **entries: Any) -> None:
        """Record ``entries`` (None removes one) before the step they stand for is taken."""
        self.now = {key: value for key, value in {**self.now, **entries}.items() if value is not None}
        data = json.dumps(self.now, sort_keys=True).encode() if self.now else b""
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)
        os.fsync(self.fd)

    def __exit__(self, *exc: Any) -> None:
        if not self.now:
            os.unlink(self.path)  # nothing held: no trace left in the image directory
        os.close(self.fd)  # the lock goes with it


class Snapshot:
    """berth.fleet.snapshot (``args``: its validated options - ``name``, ``image``, ``timeout``,
    ``transfer_timeout``; ``settings``: the operator's). In check mode, what it would do;
    nothing is touched. ``connect`` opens the instance's host."""

    def __init__(self, args: Mapping[str, Any], settings: Settings, ledger: Ledger, check_mode: bool,
                 connect: Connect = Hypervisor, hooks: Hooks = NO_HOOKS) -> None:
        self.args, self.settings, self.ledger, self.check_mode, self.connect = args, settings, ledger, check_mode, connect
        self.hooks = hooks
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
        if self.check_mode:
            # (A run checks it once it holds the journal: a dead run's unfinished image is gone by then.)
            refuse_existing(path)
        instance = known_instance(self.ledger, name)
        if instance["state"] not in PLACED_STATES or not instance.get("uri"):
            raise BerthError(f"{name} cannot be snapshotted while it is {instance['state']}: only an instance placed "
                             f"on a host (ACTIVE, STOPPED or PAUSED) is")
        result: dict[str, Any] = {"name": name, "host": instance["host"], "image": name_of_image, "path": path}
        if self.check_mode:
            return {**result, "changed": True, "msg": f"would write {name}'s root disk as image {path}"}
        return {**result, "changed": True, **self._take(instance, name_of_image, path)}

    def _take(self, instance: Mapping[str, Any], new_image: str, path: str) -> dict[str, Any]:
        name, uuid, host = instance["name"], instance["uuid"], instance["host"]
        step = self.progress.of(name, host)
        pool = self.settings.storage_pool
        copy = copy_volume_name(uuid)
        policy = UriPolicy.from_settings(self.settings.uri_policy)
        with Journal(os.path.dirname(path), uuid, name) as journal, \
                self.connect(host, instance["uri"], self.args["timeout"], uri_policy=policy,
                             transfer_timeout_s=self.args["transfer_timeout"]) as hv:
            found = hv.find_domain(uuid)
            if found is None:
                raise BerthError(f"{name} has no domain on {host}: run playbooks/gather.yml to see why")
            undone = self._undo(hv, journal, uuid, found["state"], pool)
            if undone:
                found = hv.find_domain(uuid) or found  # its state once a dead run's pause is undone
            refuse_existing(path)
            partial = path + ".part"
            how = self._consistent(hv, name, uuid, found["state"], journal)
            try:
                self.hooks.reached(SNAPSHOT_CONSISTENT, host=host, instance=uuid)
                hv.flatten_volume(pool, root_volume_name(uuid), copy,
                                  running=uuid if found["state"] in ("running", "paused") else None)
            except Exception:
                hv.delete_volume(pool, copy)
                raise
            finally:
                self._release(hv, uuid, journal)
            step(f"root disk copied on {host} ({how}); downloading")
            digest = hashlib.sha256()
            journal.write(partial=partial, image=path)
            try:
                with open(partial, "xb") as out:
                    self.hooks.reached(AFTER_SNAPSHOT_COPY, host=host, instance=uuid)

                    def write(chunk: bytes) -> None:
                        digest.update(chunk)
                        out.write(chunk)
                    hv.download_volume(pool, copy, write)
                os.replace(partial, path)
                record = {"format": "qcow2", "checksum": f"sha256:{digest.hexdigest()}",
                          "properties": dict(instance.get("image_properties") or {}), "from_instance": name,
                          "from_image": instance.get("image"), "consistency": how,
                          "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
                with open(path + IMAGE_RECORD_SUFFIX, "x", encoding="utf-8") as out:
                    json.dump(record, out, indent=2, sort_keys=True)
            except BaseException:
                remove_unfinished(partial, path)
                journal.write(partial=None, image=None)
                raise
            finally:
                hv.delete_volume(pool, copy)
            journal.write(partial=None, image=None)
        step(f"image {new_image} written: {path}")
        said = f"; {'; '.join(undone)}" if undone else ""
        return {"checksum": record["checksum"], "consistency": how, "properties": record["properties"],
                "undone": undone,
                "msg": f"{name}'s root disk written as image {new_image} ({path}, {record['checksum']}; {how}); "
                       f"launch it with image={new_image}{said}"}

    @staticmethod
    def _undo(hv: Any, journal: Journal, uuid: str, state: str, pool: str) -> list[str]:
        """Undo what a snapshot of the instance that died left (its journal, the copy in the
        pool); returns what was undone, said for the run's message."""
        left, undone = journal.left, []
        if left.get("holds") == PAUSED and state == "paused":
            hv.resume(uuid)
            undone.append("resumed the guest that a snapshot which died had paused")
        elif left.get("holds") == FROZEN and state == "running":
            try:
                hv.fs_thaw(uuid)
                undone.append("thawed the guest's file systems that a snapshot which died had frozen")
            except HypervisorError:
                pass  # its agent never froze them, or they were thawed since
        if hv.delete_volume(pool, copy_volume_name(uuid)):
            undone.append(f"removed the copy {pool}/{copy_volume_name(uuid)} that a snapshot which died left")
        if left.get("partial") and left.get("image") and remove_unfinished(left["partial"], left["image"]):
            undone.append(f"removed the unfinished image {left['image']} that a snapshot which died left")
        journal.write(holds=None, partial=None, image=None)
        return undone

    def _consistent(self, hv: Any, name: str, uuid: str, state: str, journal: Journal) -> str:
        """Make the guest's disk consistent for the copy; returns how. The journal says what is
        held of the guest before it is."""
        if state != "running":
            return f"the guest was {state}"
        journal.write(holds=FROZEN)
        why_not = hv.fs_freeze(uuid)
        if why_not is None:
            return "file systems frozen by the guest agent"
        journal.write(holds=None)
        if self.settings.snapshot_consistency == "stopped":
            raise BerthError(f"{name} runs and its guest agent cannot freeze its file systems ({why_not}); "
                             f"berth_snapshot_consistency=stopped: stop it first (playbooks/power.yml) and snapshot "
                             f"it again")
        journal.write(holds=PAUSED)
        hv.suspend(uuid)
        return f"paused for the copy (no guest agent froze it: {why_not})"

    @staticmethod
    def _release(hv: Any, uuid: str, journal: Journal) -> None:
        """Give back what the journal says the run holds of the guest (thaw or resume it)."""
        holds = journal.now.get("holds")
        if holds == FROZEN:
            hv.fs_thaw(uuid)
        elif holds == PAUSED:
            hv.resume(uuid)
        journal.write(holds=None)


def refuse_existing(path: str) -> None:
    """A snapshot never overwrites an image (nor its description)."""
    if os.path.lexists(path) or os.path.lexists(path + IMAGE_RECORD_SUFFIX):
        raise InputError("image", f"{path} exists already: a snapshot never overwrites an image; choose another name")


def remove_unfinished(partial: str, path: str) -> bool:
    """Remove what a run that did not finish wrote of the image ``path``: its partial file, the
    image and its description (the description is written last: an image without one, or one
    whose run did not finish, is not a snapshot). True if anything was there."""
    removed = False
    for item in (partial, path, path + IMAGE_RECORD_SUFFIX):
        if os.path.lexists(item):
            os.unlink(item)
            removed = True
    return removed
