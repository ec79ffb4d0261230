"""Snapshot (operations/snapshot.py) through a fake hypervisor (fake_hypervisor.py) and a real
ledger: a running guest's root disk written as a standalone image into the operator's image
directory, with its checksum and properties beside it, the guest paused only for the copy (or
frozen by its agent), nothing left in the pool; a later launch's image of that name alone is that
file (launch.check_image); an existing image never overwritten; bad input refused naming the
field, nothing changed. The same through real libvirt: tests/integration/test_snapshot_lab.py."""

from __future__ import annotations

import fcntl
import hashlib
import json

import pytest
from fake_hypervisor import connect_to
from test_rebuild_operation import app  # noqa: F401 pylint: disable=unused-import

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import (
    AFTER_SNAPSHOT_COPY,
    NO_HOOKS,
    SNAPSHOT_CONSISTENT,
    Hooks,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import check_image
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.snapshot import (
    JOURNAL_PREFIX,
    Snapshot,
    copy_volume_name,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

ARGS = {"name": "app-1", "timeout": 30, "transfer_timeout": 60}
# What the fake's base image holds: a standalone qcow2 file's header (magic, version 3, no backing
# file), as check_image reads it, then its data.
BASE = (b"QFI\xfb" + (3).to_bytes(4, "big") + bytes(12)).ljust(512, b"\0") + b"old image"


@pytest.fixture
def images(app, tmp_path):  # noqa: F811
    """The operator's image directory (the ledger is in tmp_path itself), and the base image's bytes."""
    app[1].pools["default"]["volumes"]["old.qcow2"]["data"] = BASE
    directory = tmp_path / "images"
    directory.mkdir()
    return directory


def snapshot(ledger, hv, directory, check_mode=False, consistency="pause", hooks=NO_HOOKS, **args):
    settings = Settings(image_source_dirs=(str(directory),), snapshot_consistency=consistency)
    return Snapshot({**ARGS, "image": "golden.qcow2", **args}, settings, ledger, check_mode,
                    connect=connect_to(hv), hooks=hooks).run()


def test_a_running_guest_is_paused_for_the_copy_and_its_disk_written_as_an_image(app, images):  # noqa: F811
    ledger, hv1, uuid = app
    done = snapshot(ledger, hv1, images)
    image = images / "golden.qcow2"
    # The fake's flattened copy holds what the guest reads: its base image's bytes.
    assert image.read_bytes() == BASE
    assert done["checksum"] == "sha256:" + hashlib.sha256(BASE).hexdigest()
    assert done["consistency"].startswith("paused for the copy (no guest agent froze it: ")
    record = json.loads((images / "golden.qcow2.berth-image.json").read_text())
    assert (record["format"], record["checksum"], record["from_instance"]) == ("qcow2", done["checksum"], "app-1")
    # Running again, nothing left in the pool but what was there.
    assert hv1.domain_state(uuid) == "running"
    assert not [name for name in hv1.volume_names_of() if "snapshot" in name]
    assert not (images / "golden.qcow2.part").exists()
    # A launch's image of that name alone is that file, uploaded where a pool lacks it.
    found = check_image("golden.qcow2", Settings(image_source_dirs=(str(images),)))
    assert (found.name, found.source, found.format) == ("golden.qcow2", str(image), "qcow2")
    assert check_image("golden.qcow2", Settings()).source is None


def test_a_guest_agent_freezes_instead_of_a_pause(app, images):  # noqa: F811
    ledger, hv1, uuid = app
    hv1.agent = True
    done = snapshot(ledger, hv1, images)
    assert done["consistency"] == "file systems frozen by the guest agent"
    assert hv1.frozen == set() and hv1.domain_state(uuid) == "running"


def test_stopped_consistency_refuses_a_running_guest_without_an_agent(app, images):  # noqa: F811
    ledger, hv1, uuid = app
    with pytest.raises(BerthError, match="berth_snapshot_consistency=stopped: stop it first"):
        snapshot(ledger, hv1, images, consistency="stopped")
    assert hv1.domain_state(uuid) == "running" and list(images.iterdir()) == []


def test_a_copy_that_fails_leaves_nothing_and_the_guest_running(app, images):  # noqa: F811
    ledger, hv1, uuid = app
    hv1.faults["download_volume"] = HypervisorError("hv1", "stream broke")
    with pytest.raises(HypervisorError, match="stream broke"):
        snapshot(ledger, hv1, images)
    assert list(images.iterdir()) == [] and hv1.domain_state(uuid) == "running"
    assert not [name for name in hv1.volume_names_of() if "snapshot" in name]


def test_check_mode_and_an_existing_image(app, images):  # noqa: F811
    ledger, hv1, _uuid = app
    snapshot_before = hv1.snapshot()
    plan = snapshot(ledger, hv1, images, check_mode=True)
    assert plan["msg"] == f"would write app-1's root disk as image {images / 'golden.qcow2'}"
    assert hv1.snapshot() == snapshot_before and list(images.iterdir()) == []
    (images / "golden.qcow2").write_bytes(b"someone's")
    with pytest.raises(InputError, match="exists already: a snapshot never overwrites an image"):
        snapshot(ledger, hv1, images)
    assert (images / "golden.qcow2").read_bytes() == b"someone's"


@pytest.mark.parametrize("args, field", [
    ({"name": "nope"}, "name"),
    ({"image": "../escape.qcow2"}, "image"),
    ({"image": {"name": "x.qcow2"}}, "image"),
])
def test_bad_input_is_refused_naming_the_field(app, images, args, field):  # noqa: F811
    ledger, hv1, _uuid = app
    with pytest.raises(InputError) as raised:
        snapshot(ledger, hv1, images, **args)
    assert raised.value.field.startswith(field)
    assert list(images.iterdir()) == []


def test_without_an_image_directory_the_setting_is_named(app):  # noqa: F811
    ledger, hv1, _uuid = app
    with pytest.raises(InputError) as raised:
        Snapshot({**ARGS, "image": "golden.qcow2"}, Settings(), ledger, False, connect=connect_to(hv1)).run()
    assert raised.value.field == "image_source_dirs"


class Seen(Hooks):
    """What the journal and the image directory hold at each of the snapshot's hook points: what
    a kill there (SIGKILL: nothing of the run runs after it) would leave."""

    def __init__(self, directory):
        self.directory, self.seen = directory, {}

    def reached(self, point, host=None, instance=None):
        journal = self.directory / f"{JOURNAL_PREFIX}{instance}.json"
        self.seen[point] = (json.loads(journal.read_text()), sorted(path.name for path in self.directory.iterdir()))


def test_the_journal_says_what_a_run_holds_at_each_step_and_is_gone_after(app, images):  # noqa: F811
    ledger, hv1, uuid = app
    seen = Seen(images)
    snapshot(ledger, hv1, images, hooks=seen)
    journal = f"{JOURNAL_PREFIX}{uuid}.json"
    assert seen.seen == {
        SNAPSHOT_CONSISTENT: ({"holds": "paused"}, [journal]),
        AFTER_SNAPSHOT_COPY: ({"image": str(images / "golden.qcow2"), "partial": str(images / "golden.qcow2.part")},
                              [journal, "golden.qcow2.part"]),
    }
    assert sorted(path.name for path in images.iterdir()) == ["golden.qcow2", "golden.qcow2.berth-image.json"]


@pytest.mark.parametrize("holds", ["paused", "frozen"])
def test_a_snapshot_undoes_what_a_killed_one_left(app, images, holds):  # noqa: F811
    ledger, hv1, uuid = app
    # What a snapshot killed after its copy, downloading image half.qcow2, leaves; and the guest
    # still paused or frozen, as after a kill during the copy.
    hv1.agent = holds == "frozen"
    if holds == "paused":
        hv1.suspend(uuid)
    else:
        hv1.frozen.add(uuid)
    hv1.add_volume(copy_volume_name(uuid), data=b"half a copy")
    (images / "half.qcow2.part").write_bytes(b"half")
    (images / f"{JOURNAL_PREFIX}{uuid}.json").write_text(json.dumps(
        {"holds": holds, "partial": str(images / "half.qcow2.part"), "image": str(images / "half.qcow2")}))
    done = snapshot(ledger, hv1, images)
    assert done["undone"] == [
        "resumed the guest that a snapshot which died had paused" if holds == "paused"
        else "thawed the guest's file systems that a snapshot which died had frozen",
        f"removed the copy default/{copy_volume_name(uuid)} that a snapshot which died left",
        f"removed the unfinished image {images / 'half.qcow2'} that a snapshot which died left"]
    assert done["msg"].endswith("; ".join(["launch it with image=golden.qcow2", *done["undone"]]))
    assert hv1.domain_state(uuid) == "running" and hv1.frozen == set()
    assert sorted(path.name for path in images.iterdir()) == ["golden.qcow2", "golden.qcow2.berth-image.json"]
    assert copy_volume_name(uuid) not in hv1.volume_names_of()


def test_what_a_killed_snapshot_left_stays_in_its_journal_until_it_is_undone(app, images):  # noqa: F811
    ledger, hv1, uuid = app
    hv1.suspend(uuid)
    journal = images / f"{JOURNAL_PREFIX}{uuid}.json"
    journal.write_text(json.dumps({"holds": "paused"}))
    hv1.faults["resume"] = HypervisorError("hv1", "connection lost")
    with pytest.raises(HypervisorError, match="connection lost"):
        snapshot(ledger, hv1, images)
    assert json.loads(journal.read_text()) == {"holds": "paused"} and hv1.domain_state(uuid) == "paused"
    del hv1.faults["resume"]
    assert snapshot(ledger, hv1, images)["undone"] == ["resumed the guest that a snapshot which died had paused"]
    assert not journal.exists() and hv1.domain_state(uuid) == "running"


def test_a_snapshot_while_another_of_the_instance_runs_is_refused(app, images):  # noqa: F811
    ledger, hv1, uuid = app
    before = hv1.snapshot()
    path = images / f"{JOURNAL_PREFIX}{uuid}.json"
    with open(path, "w", encoding="utf-8") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(BerthError, match=f"another snapshot of app-1 is running \\(it holds {path}\\)"):
            snapshot(ledger, hv1, images)
    assert hv1.snapshot() == before and [item.name for item in images.iterdir()] == [path.name]


@pytest.mark.parametrize("wanted", [SNAPSHOT_CONSISTENT, AFTER_SNAPSHOT_COPY])
def test_a_fault_at_a_step_leaves_nothing_and_the_guest_running(app, images, wanted):  # noqa: F811
    ledger, hv1, uuid = app

    class Fault(Hooks):
        def reached(self, point, host=None, instance=None):
            if point == wanted:
                raise HypervisorError(host, "injected")

    with pytest.raises(HypervisorError, match="injected"):
        snapshot(ledger, hv1, images, hooks=Fault())
    assert list(images.iterdir()) == [] and hv1.domain_state(uuid) == "running"
    assert copy_volume_name(uuid) not in hv1.volume_names_of()
