"""The disk verbs of issue 37 on the real lab fleet, tortured: bad input refused naming the field
with nothing changed, and each verb killed at each of its steps between the ledger and the host
(SIGKILL of the playbook's whole process tree) leaving nothing orphaned and the ledger true.

One ledger of this module's own, on the shared lab fleet, with two instances (tort-1, tort-2)
launched once on hv1 for every case (their domains run, no guest OS boots in them: the verbs
only need running domains). The ledger is read with plain SQL, the hosts with virsh.

Kills (KILLS, in order: each case's precondition is where the one before leaves the fleet, and
``prepare`` brings it there if not). Only the steps that differ in what they leave are killed:

- volume create after its row (its claim) is written, before its file is made; attach after the
  attachment is recorded, before the disk is plugged; detach after the disk is unplugged, before
  the ledger forgets the attachment; delete after the file is removed, before its row goes.
  Each leaves the ledger holding at least what is on the host, and the same run again finishes
  it. (The steps after the last host change leave nothing to finish: not killed.)
- snapshot with the guest paused for the copy; the same with the block copy going on (the lab's
  disks copy in milliseconds, so the test starts the copy a run killed then leaves running, see
  ``copying_killed``); and with the copy made and the image's partial file open: the next
  snapshot resumes the guest, ends the block copy, removes the copy and the partial file.
- rebuild after the old disks are removed, and with the new domain defined, not started: the
  instance stays ERROR with its claim, a sync leaves it alone, and the rebuild run again
  finishes it. (Its other kill points are unit-tested: tests/unit/.../test_rebuild_operation.py.)

Rescue and unrescue are killed at each of their steps in test_rescue_lab.py (whose guest boots,
which the rescue's proof needs); their bad input is here. A new verb adds its rows to KILLS
(and, for bad input, to BAD_INPUT).
"""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Callable

import pytest
from conftest import failed_messages, hooks_env, kill_tree, rows, task_result, wait_at_barrier

pytestmark = pytest.mark.integration

HOST = "hv1"
TINY = {"name": "tort.tiny", "vcpus": 1, "memory_mb": 128, "root_gb": 1}
# The volume the kills create, attach, detach and delete; the one attached to tort-2 for the
# bad-input cases (a volume attached twice, deleted while attached).
VOLUME, HELD = "tort-vol", "tort-held"
VOLUME_TASK = "Bring the volume to its state"
SNAPSHOT_TASK = "Write the instance's root disk as an image"
REBUILD_TASK = "Rebuild the instance from its image"
RESCUE_TASK = "Boot the instance from the rescue image"
UNRESCUE_TASK = "Boot the instance from its own disk again"


def volume_file(name: str) -> str:
    return f"berth-volume-{name}.qcow2"


@dataclasses.dataclass
class Fleet:
    """This module's ledger and inventory on the shared lab, its instances and image directory."""

    lab: Any
    tmp: Path
    inventory: str
    ledger_url: str
    images: Path
    uuids: dict[str, str] = dataclasses.field(default_factory=dict)

    def start(self, playbook: str, *args: str, env: dict | None = None):
        return self.lab.start_playbook(playbook, *args, inventory=self.inventory, env=env)

    def run(self, playbook: str, *args: str) -> dict:
        return self.lab.finish(self.start(playbook, *args))

    def ok(self, playbook: str, *args: str) -> dict:
        ran = self.run(playbook, *args)
        assert ran["rc"] == 0, failed_messages(ran)
        return ran

    def rows(self, table: str) -> list[dict]:
        return sorted(rows(self.ledger_url, table), key=lambda row: json.dumps(row, sort_keys=True, default=str))

    def instance(self, name: str) -> dict:
        return next(row for row in rows(self.ledger_url, "instances") if row["name"] == name)

    def volume(self, name: str) -> dict | None:
        return next((row for row in rows(self.ledger_url, "volumes") if row["name"] == name), None)

    def virsh(self, *args: str) -> str:
        return self.lab.virsh(HOST, *args)

    def pool(self) -> list[str]:
        self.virsh("pool-refresh", "default")
        return sorted(line.split()[0] for line in self.virsh("vol-list", "default").splitlines()[2:] if line.strip())

    def disks(self, name: str) -> dict[str, str]:
        """{target: source file} of the instance's persistent definition."""
        root = ET.fromstring(self.virsh("dumpxml", "--inactive", self.uuids[name]))
        return {disk.find("target").get("dev"): disk.find("source").get("file")
                for disk in root.findall("devices/disk") if disk.find("source") is not None}

    def domains(self) -> dict[str, str]:
        """{uuid: state} of this module's domains on the host."""
        found = {}
        for uuid in self.virsh("list", "--all", "--uuid").split():
            if uuid in self.uuids.values():
                found[uuid] = self.virsh("domstate", uuid).strip()
        return found

    def state(self) -> dict:
        """Everything a refused run must leave as it was: the ledger's rows, the host's domains,
        pool and definitions, the image directory."""
        return {
            "ledger": {table: self.rows(table) for table in ("instances", "claims", "volumes", "artefacts")},
            "disk_used": {row["name"]: row["disk_mb_used"] for row in rows(self.ledger_url, "hypervisors")},
            "domains": self.domains(), "pool": self.pool(),
            "definitions": {name: self.disks(name) for name in self.uuids},
            "images": sorted(path.name for path in self.images.iterdir()),
        }


def raw_image(directory: Path, name: str) -> Path:
    path = directory / f"{name}.raw"
    path.write_bytes(f"BERTH-IMAGE {name}\n".encode().ljust(1024 * 1024, b"\0"))
    return path


@pytest.fixture(scope="module")
def disk_fleet(lab, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("torture")
    images = tmp / "images"
    images.mkdir()
    ledger_url = f"sqlite:///{tmp}/ledger.sqlite3"
    inventory = lab.inventory_copy(tmp, ledger_url, guest_os=False)
    made = Fleet(lab, tmp, inventory, ledger_url, images)
    image = raw_image(tmp, "tort-alpha")
    # berth_source=inventory: the launch syncs this fresh ledger from the inventory's facts first.
    made.ok("launch.yml", "-e", json.dumps({
        "name": "tort", "count": 2, "flavor": TINY, "berth_force_hosts": [HOST], "berth_source": "inventory",
        "image": {"name": "tort-alpha.raw", "format": "raw", "source": str(image)}}))
    made.uuids = {name: made.instance(name)["uuid"] for name in ("tort-1", "tort-2")}
    made.ok("volume.yml", "-e", f"volume={HELD}", "-e", "size_gb=1", "-e", f"host={HOST}")
    made.ok("volume.yml", "-e", f"volume={HELD}", "-e", "state=attached", "-e", "instance=tort-2")
    yield made
    made.run("delete.yml", "-e", "name=tort")
    for name in (VOLUME, HELD, "tort-stray"):
        made.run("volume.yml", "-e", f"volume={name}", "-e", "state=absent")


def assert_true(fleet: Fleet) -> None:
    """The ledger is true of the host, and nothing is orphaned: each instance ACTIVE with one
    claim on its host and its domain running; each volume's file in the pool, attached in the
    definition of the instance the ledger says (and in no other); each hypervisor's used disk its
    claims' and volumes'; no snapshot copy in the pool, nothing of a snapshot run in the image
    directory but finished images."""
    instances = {row["name"]: row for row in rows(fleet.ledger_url, "instances")}
    claims = rows(fleet.ledger_url, "claims")
    volumes = rows(fleet.ledger_url, "volumes")
    pool = fleet.pool()
    for name, uuid in fleet.uuids.items():
        row = instances[name]
        assert (row["uuid"], row["state"], row["host"]) == (uuid, "ACTIVE", HOST), row
        assert [claim["hypervisor_uuid"] for claim in claims if claim["instance_uuid"] == uuid] == [
            row["hypervisor_uuid"]]
        assert fleet.virsh("domstate", uuid).strip() == "running"
        attached = {volume["target"]: volume_file(volume["name"]) for volume in volumes
                    if volume["instance_uuid"] == uuid}
        defined = {target: Path(source).name for target, source in fleet.disks(name).items()
                   if Path(source).name.startswith("berth-volume-")}
        assert defined == attached, name
        assert f"berth-{uuid}-snapshot.qcow2" not in pool
    ours = {volume_file(volume["name"]) for volume in volumes}
    assert ours <= set(pool) and not {name for name in pool if name.startswith("berth-volume-tort-")} - ours
    for hv in rows(fleet.ledger_url, "hypervisors"):
        wanted = sum(c["disk_mb"] for c in claims if c["hypervisor_uuid"] == hv["uuid"]) + \
            sum(v["size_gb"] * 1024 for v in volumes if v["hypervisor_uuid"] == hv["uuid"])
        assert hv["disk_mb_used"] == wanted, hv["name"]
    left = [path.name for path in fleet.images.iterdir() if path.name.startswith(".") or path.name.endswith(".part")]
    assert left == []


# ---- bad input --------------------------------------------------------------------------------

# (playbook, arguments, the task that refuses, the field it names, what its message says)
BAD_INPUT = [
    ("volume.yml", {"volume": "tort-new", "size_gb": 0, "host": HOST}, VOLUME_TASK, "size_gb", "size_gb"),
    ("volume.yml", {"volume": "tort-new", "size_gb": 10 * 1024 ** 2, "host": HOST}, VOLUME_TASK, "size_gb",
     "size_gb"),
    ("volume.yml", {"volume": "Tort_New", "size_gb": 1, "host": HOST}, VOLUME_TASK, "name", "Tort_New"),
    ("volume.yml", {"volume": HELD, "state": "attached", "instance": "tort-1"}, VOLUME_TASK, "name",
     f"volume {HELD} is attached to tort-2 already"),
    ("volume.yml", {"volume": HELD, "state": "absent"}, VOLUME_TASK, "name",
     f"volume {HELD} is attached to tort-2: detach it first"),
    ("volume.yml", {"volume": "tort-none", "state": "attached", "instance": "tort-1"}, VOLUME_TASK, "name",
     "no volume named tort-none"),
    ("snapshot.yml", {"instance": "tort-1", "image": "../../etc/passwd"}, SNAPSHOT_TASK, "image", "image"),
    ("snapshot.yml", {"instance": "tort-1", "image": "/etc/passwd"}, SNAPSHOT_TASK, "image", "image"),
    ("snapshot.yml", {"instance": "Tort_1", "image": "tort-x.qcow2"}, SNAPSHOT_TASK, "name", "Tort_1"),
    ("rebuild.yml", {"instance": "tort-1", "image": "../../etc/passwd"}, REBUILD_TASK, "image", "image"),
    ("rebuild.yml", {"instance": "tort-1", "image": "/etc/passwd"}, REBUILD_TASK, "image", "image"),
    ("rebuild.yml", {"instance": "tort-1", "image": "tort-unknown.qcow2"}, REBUILD_TASK, "image",
     "tort-unknown.qcow2"),
    ("rebuild.yml", {"instance": "Tort_1"}, REBUILD_TASK, "name", "Tort_1"),
    ("rescue.yml", {"instance": "tort-1", "image": "../../etc/passwd"}, RESCUE_TASK, "image", "image"),
    ("rescue.yml", {"instance": "tort-1", "image": "/etc/passwd"}, RESCUE_TASK, "image", "image"),
    ("rescue.yml", {"instance": "tort-1", "image": "tort-unknown.qcow2"}, RESCUE_TASK, "image",
     "tort-unknown.qcow2"),
    ("rescue.yml", {"instance": "Tort_1"}, RESCUE_TASK, "name", "Tort_1"),
    ("unrescue.yml", {"instance": "Tort_1"}, UNRESCUE_TASK, "name", "Tort_1"),
]


def image_dirs(fleet: Fleet) -> tuple[str, str]:
    return "-e", json.dumps({"berth_image_source_dirs": [str(fleet.images)]})


@pytest.mark.parametrize(("playbook", "args", "task", "field", "said"), BAD_INPUT,
                         ids=[f"{case[0][:-4]}-{case[3]}-{i}" for i, case in enumerate(BAD_INPUT)])
def test_bad_input_is_refused_naming_the_field_and_nothing_changes(disk_fleet, playbook, args, task, field, said):
    before = disk_fleet.state()
    refused = disk_fleet.run(playbook, "-e", json.dumps(args), *image_dirs(disk_fleet))
    assert refused["rc"] != 0
    result = task_result(refused, task)
    assert result.get("failed") and result.get("field", "").split(".")[0] == field, result
    assert said in result["msg"], result["msg"]
    assert disk_fleet.state() == before


# ---- kills ------------------------------------------------------------------------------------

@dataclasses.dataclass
class Kill:
    """A verb's run killed at a hooks point: ``prepare`` brings the fleet to where the run starts,
    ``killed`` checks what the kill left, ``finished`` what the same run again did."""

    verb: str
    point: str
    playbook: str
    args: Callable[[Fleet], list[str]]
    prepare: Callable[[Fleet], None]
    killed: Callable[[Fleet], None]
    finished: Callable[[Fleet, dict], None]


def volume_args(state: str, **extra: str) -> Callable[[Fleet], list[str]]:
    options = {"volume": VOLUME, "state": state, **extra}
    return lambda _fleet: ["-e", json.dumps(options)]


def volume_in(state: str) -> Callable[[Fleet], None]:
    """Bring VOLUME to ``state`` (absent, detached, attached to tort-1), with as few runs as needed."""
    def prepare(fleet: Fleet) -> None:
        row = fleet.volume(VOLUME)
        if state == "absent":
            if row is not None:
                fleet.ok("volume.yml", *volume_args("detached")(fleet))
                fleet.ok("volume.yml", *volume_args("absent")(fleet))
            return
        if row is None:
            fleet.ok("volume.yml", *volume_args("present", size_gb="1", host=HOST)(fleet))
        if state == "attached":
            fleet.ok("volume.yml", *volume_args("attached", instance="tort-1")(fleet))
        elif fleet.volume(VOLUME)["instance_uuid"] is not None:
            fleet.ok("volume.yml", *volume_args("detached")(fleet))
    return prepare


def changed(task: str) -> Callable[[Fleet, dict], None]:
    def finished(_fleet: Fleet, output: dict) -> None:
        assert task_result(output, task)["changed"]
    return finished


def created_killed(fleet: Fleet) -> None:
    # Recorded, and so claimed, before it is made: the claim stands for a volume not there yet.
    row = fleet.volume(VOLUME)
    assert row is not None and row["size_gb"] == 1 and row["instance_uuid"] is None
    assert volume_file(VOLUME) not in fleet.pool()


def attach_killed(fleet: Fleet) -> None:
    assert fleet.volume(VOLUME)["instance_uuid"] == fleet.uuids["tort-1"]
    assert not [source for source in fleet.disks("tort-1").values() if source.endswith(volume_file(VOLUME))]


def detach_killed(fleet: Fleet) -> None:
    # Unplugged from the definition, still recorded as attached: the ledger claims more, never less.
    assert fleet.volume(VOLUME)["instance_uuid"] == fleet.uuids["tort-1"]
    assert not [source for source in fleet.disks("tort-1").values() if source.endswith(volume_file(VOLUME))]


def delete_killed(fleet: Fleet) -> None:
    assert fleet.volume(VOLUME) is not None and volume_file(VOLUME) not in fleet.pool()


def volume_gone(fleet: Fleet, output: dict) -> None:
    assert task_result(output, VOLUME_TASK)["changed"] and fleet.volume(VOLUME) is None


def snapshot_args(image: str) -> Callable[[Fleet], list[str]]:
    return lambda fleet: ["-e", "instance=tort-1", "-e", f"image={image}", *image_dirs(fleet)]


def journal(fleet: Fleet) -> Path:
    return fleet.images / f".berth-snapshot-{fleet.uuids['tort-1']}.json"


def copy_file(fleet: Fleet) -> str:
    return f"berth-{fleet.uuids['tort-1']}-snapshot.qcow2"


def paused_killed(fleet: Fleet) -> None:
    # The guest stays paused (nothing of the run is left to resume it); its journal says so.
    assert fleet.virsh("domstate", fleet.uuids["tort-1"]).strip() == "paused"
    assert json.loads(journal(fleet).read_text())["holds"] == "paused"


def copying_killed(fleet: Fleet) -> None:
    """Killed during the block copy: the lab's disks copy in milliseconds, so the copy a run would
    have been waiting for is started here as the run starts it (a transient block copy job into
    the copy's file, in the pool's directory), and goes on without any run."""
    paused_killed(fleet)
    uuid = fleet.uuids["tort-1"]
    root = ET.fromstring(fleet.virsh("dumpxml", uuid))
    [(device, source)] = [(disk.find("target").get("dev"), disk.find("source").get("file"))
                          for disk in root.findall("devices/disk")
                          if disk.find("source") is not None and disk.find("source").get("file", "").endswith(
                              f"berth-{uuid}-root.qcow2")]
    target = str(Path(source).with_name(copy_file(fleet)))
    fleet.virsh("blockcopy", uuid, device, target, "--transient-job", "--format", "qcow2")
    assert Path(target).name in ET.tostring(ET.fromstring(fleet.virsh("dumpxml", uuid)), encoding="unicode")


def copied_killed(fleet: Fleet) -> None:
    assert copy_file(fleet) in fleet.pool()
    assert (fleet.images / "tort-copied.qcow2.part").exists()
    assert fleet.virsh("domstate", fleet.uuids["tort-1"]).strip() == "running"


def snapshot_done(image: str, undone: Callable[[Fleet], list[str]]) -> Callable[[Fleet, dict], None]:
    """The snapshot run again undid what the killed one left (``undone``: what it says of it, up
    to " that a snapshot which died ..."), and wrote its image."""
    def finished(fleet: Fleet, output: dict) -> None:
        result = task_result(output, SNAPSHOT_TASK)
        assert [line.split(" that ")[0] for line in result["undone"]] == undone(fleet), result["undone"]
        assert (fleet.images / image).read_bytes()[:4] == b"QFI\xfb"
        assert json.loads((fleet.images / f"{image}.berth-image.json").read_text())["checksum"] == result["checksum"]
        assert not journal(fleet).exists()
    return finished


def rebuild_killed(with_domain: bool) -> Callable[[Fleet], None]:
    def killed(fleet: Fleet) -> None:
        uuid = fleet.uuids["tort-1"]
        row = fleet.instance("tort-1")
        assert (row["state"], row["host"]) == ("ERROR", HOST) and row["failure_reason"].startswith(
            "rebuilding from image tort-alpha.raw"), row
        assert [c["hypervisor_uuid"] for c in rows(fleet.ledger_url, "claims") if c["instance_uuid"] == uuid] == [
            row["hypervisor_uuid"]]
        assert fleet.domains().get(uuid) == ("shut off" if with_domain else None)
        assert (f"berth-{uuid}-root.qcow2" in fleet.pool()) == with_domain
        if with_domain:
            # The sync leaves an instance that a rebuild left ERROR alone, its claim and what it built.
            before = (fleet.rows("claims"), fleet.domains(), fleet.pool())
            fleet.ok("gather.yml")
            assert (fleet.rows("claims"), fleet.domains(), fleet.pool()) == before
            assert fleet.instance("tort-1")["state"] == "ERROR"
    return killed


def rebuild_args(fleet: Fleet) -> list[str]:
    # The image with its source: the ledger's last sync (before the launch uploaded it) does not
    # list it in hv1's pool, and PoolImageFilter would refuse it by name alone.
    return ["-e", json.dumps({"instance": "tort-1", "image": {
        "name": "tort-alpha.raw", "format": "raw", "source": str(fleet.tmp / "tort-alpha.raw")}})]


def rebuilt(fleet: Fleet, output: dict) -> None:
    result = task_result(output, REBUILD_TASK)
    assert result["changed"] and result["uuid"] == fleet.uuids["tort-1"]


def nothing(_fleet: Fleet) -> None:
    pass


KILLS = [
    Kill("volume-create", "after-volume-record", "volume.yml", volume_args("present", size_gb="1", host=HOST),
         volume_in("absent"), created_killed, changed(VOLUME_TASK)),
    Kill("volume-attach", "after-volume-attach-record", "volume.yml", volume_args("attached", instance="tort-1"),
         volume_in("detached"), attach_killed, changed(VOLUME_TASK)),
    Kill("volume-detach", "after-volume-unplug", "volume.yml", volume_args("detached"),
         volume_in("attached"), detach_killed, changed(VOLUME_TASK)),
    Kill("volume-delete", "after-volume-remove", "volume.yml", volume_args("absent"),
         volume_in("detached"), delete_killed, volume_gone),
    Kill("snapshot", "snapshot-consistent", "snapshot.yml", snapshot_args("tort-paused.qcow2"),
         nothing, paused_killed, snapshot_done("tort-paused.qcow2", lambda _fleet: ["resumed the guest"])),
    Kill("snapshot-copying", "snapshot-consistent", "snapshot.yml", snapshot_args("tort-copying.qcow2"),
         nothing, copying_killed, snapshot_done("tort-copying.qcow2", lambda fleet: [
             "resumed the guest", f"removed the copy default/{copy_file(fleet)}"])),
    Kill("snapshot", "after-snapshot-copy", "snapshot.yml", snapshot_args("tort-copied.qcow2"),
         nothing, copied_killed, snapshot_done("tort-copied.qcow2", lambda fleet: [
             f"removed the copy default/{copy_file(fleet)}",
             f"removed the unfinished image {fleet.images / 'tort-copied.qcow2'}"])),
    Kill("rebuild", "after-rebuild-remove", "rebuild.yml", rebuild_args,
         nothing, rebuild_killed(with_domain=False), rebuilt),
    Kill("rebuild", "after-define", "rebuild.yml", rebuild_args,
         nothing, rebuild_killed(with_domain=True), rebuilt),
]


@pytest.mark.parametrize("kill", KILLS, ids=[f"{kill.verb}-{kill.point}" for kill in KILLS])
def test_a_verb_killed_at_a_step_leaves_nothing_orphaned_and_its_run_again_finishes_it(disk_fleet, kill):
    fleet = disk_fleet
    kill.prepare(fleet)
    assert_true(fleet)
    barrier = fleet.tmp / f"barrier-{kill.verb}-{kill.point}"
    barrier.mkdir()
    # Never all there: the run waits until it is killed (or the timeout, if the test broke).
    proc = fleet.start(kill.playbook, *kill.args(fleet), env=hooks_env(barrier, kill.point, parties=99))
    wait_at_barrier(proc, barrier)
    kill_tree(proc)
    kill.killed(fleet)
    again = fleet.ok(kill.playbook, *kill.args(fleet))
    kill.finished(fleet, again)
    assert_true(fleet)


def test_a_volume_file_that_no_ledger_recorded_is_adopted_by_its_create_and_said(disk_fleet):
    """What a volume created by another ledger, or by hand, leaves: a file named as this volume's
    in the pool with no row. The create of that volume takes it (the size asked for) and says so;
    of another size it is refused, nothing changed."""
    fleet = disk_fleet
    fleet.virsh("vol-create-as", "default", volume_file("tort-stray"), "1G", "--format", "qcow2")
    before = fleet.state()
    refused = fleet.run("volume.yml", "-e", "volume=tort-stray", "-e", "size_gb=2", "-e", f"host={HOST}")
    assert refused["rc"] != 0 and task_result(refused, VOLUME_TASK)["field"] == "name"
    assert fleet.state() == before
    adopted = task_result(fleet.ok("volume.yml", "-e", "volume=tort-stray", "-e", "size_gb=1", "-e", f"host={HOST}"),
                          VOLUME_TASK)
    assert adopted["changed"] and adopted["msg"].startswith("adopted volume tort-stray (1 GB) found in storage pool")
    assert fleet.volume("tort-stray")["size_gb"] == 1
    assert_true(fleet)
    fleet.ok("volume.yml", "-e", "volume=tort-stray", "-e", "state=absent")
    assert volume_file("tort-stray") not in fleet.pool()
