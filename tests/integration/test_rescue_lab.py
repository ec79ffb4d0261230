"""rescue.yml and unrescue.yml on the real lab fleet (issue 37 item 4): a guest launched from one
image is rescued with another; it boots from the rescue image (the lab guest prints the first
line of its root disk: ``BERTH-GUEST-IMAGE <name>``) and sees its own root disk as its second
disk (``BERTH-GUEST-DISK-IMAGE vdb <name>``); unrescued, it boots from its own disk again, and
the rescue disk is gone. The ledger says RESCUED, then ACTIVE, with the one claim throughout."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import fleet
import pytest
from conftest import changed_count, drift, failed_messages, hooks_env, kill_tree, wait_at_barrier
from test_evacuate import BOOT_TIMEOUT_S, launch_on, row_of
from test_rebuild_lab import raw_image, serial_after

pytestmark = pytest.mark.integration


def disk_sources(lab, host: str, name: str) -> list[tuple[str, str]]:
    """[(device, source file)] of the domain's disks (not CD-ROMs), as libvirt has them."""
    return [(disk.find("target").get("dev"), disk.find("source").get("file"))
            for disk in ET.fromstring(lab.virsh(host, "dumpxml", name)).findall("devices/disk")
            if disk.get("device") == "disk"]


def test_a_rescued_guest_boots_the_rescue_image_sees_its_own_disk_and_boots_its_own_again(lab, tmp_path):
    alpha, helper = raw_image(tmp_path, "alpha"), raw_image(tmp_path, "rescuer")
    before = launch_on(lab, "hv1", "rs", image={"name": "rs-alpha.raw", "format": "raw", "source": str(alpha)})
    uuid = before["uuid"]
    log = fleet.log_dir(lab.dir, "hv1") / "rs-1.serial.log"
    booted = serial_after(log, 0, ["BERTH-GUEST-IMAGE alpha"], BOOT_TIMEOUT_S)
    assert "BERTH-GUEST-IMAGE alpha" in booted, booted
    own_disks = disk_sources(lab, "hv1", "rs-1")
    try:
        offset = log.stat().st_size
        checked = lab.playbook("rescue.yml", "-e", json.dumps({"instance": "rs-1", "image": {
            "name": "rs-rescuer.raw", "format": "raw", "source": str(helper)}}), check=True)
        assert checked["rc"] == 0, failed_messages(checked)
        assert row_of(lab, "rs-1")["state"] == "ACTIVE" and disk_sources(lab, "hv1", "rs-1") == own_disks

        done = lab.playbook("rescue.yml", "-e", json.dumps({"instance": "rs-1", "image": {
            "name": "rs-rescuer.raw", "format": "raw", "source": str(helper)}}))
        assert done["rc"] == 0, failed_messages(done)
        row = row_of(lab, "rs-1")
        assert (row["state"], row["uuid"], row["host"]) == ("RESCUED", uuid, "hv1")
        assert row["failure_reason"].startswith("rescued with image rs-rescuer.raw")
        assert [claim["hypervisor_uuid"] for claim in lab.ledger_rows("claims")
                if claim["instance_uuid"] == uuid] == [before["hypervisor_uuid"]]
        pool = own_disks[0][1].rsplit("/", 1)[0]
        assert disk_sources(lab, "hv1", "rs-1") == [("vda", f"{pool}/berth-{uuid}-rescue.qcow2"),
                                                    ("vdb", own_disks[0][1])]
        wanted = ["BERTH-GUEST-IMAGE rescuer", "BERTH-GUEST-DISK-IMAGE vdb alpha"]
        rescued = serial_after(log, offset, wanted, BOOT_TIMEOUT_S)
        assert all(line in rescued for line in wanted), rescued

        offset = log.stat().st_size
        back = lab.playbook("unrescue.yml", "-e", "instance=rs-1")
        assert back["rc"] == 0, failed_messages(back)
        row = row_of(lab, "rs-1")
        assert (row["state"], row["failure_reason"]) == ("ACTIVE", None)
        assert disk_sources(lab, "hv1", "rs-1") == own_disks
        assert f"berth-{uuid}-rescue.qcow2" not in lab.virsh("hv1", "vol-list", "default")
        unrescued = serial_after(log, offset, ["BERTH-GUEST-IMAGE alpha", "BERTH-GUEST-DISKS"], BOOT_TIMEOUT_S)
        assert "BERTH-GUEST-IMAGE alpha" in unrescued and "BERTH-GUEST-DISK-IMAGE" not in unrescued, unrescued
        again = lab.playbook("unrescue.yml", "-e", "instance=rs-1")
        assert again["rc"] == 0 and changed_count(again) == 0, failed_messages(again)
    finally:
        assert lab.playbook("delete.yml", "-e", "name=rs")["rc"] == 0


def killed_at(lab, tmp_path, point: str, playbook: str, extra: dict) -> None:
    """Run ``playbook`` until it reaches ``point`` (the test hooks' barrier), then SIGKILL its
    whole process tree, as a crash of the controller would."""
    barrier = tmp_path / f"barrier-{point}"
    barrier.mkdir()
    proc = lab.start_playbook(playbook, "-e", json.dumps(extra), env=hooks_env(barrier, point, parties=99))
    wait_at_barrier(proc, barrier)
    kill_tree(proc)


def test_a_rescue_or_unrescue_killed_at_each_step_leaves_the_ledger_true_and_runs_again_to_the_end(lab, tmp_path):
    """Killed after the rescue disk is made, after the rescue definition is defined, and after
    the unrescue defines the instance's own again: each time the instance is RESCUED with its one
    claim, a sync finds nothing orphaned and leaves it alone, and the next run goes on."""
    alpha = raw_image(tmp_path, "alpha")
    before = launch_on(lab, "hv2", "rk", image={"name": "rk-alpha.raw", "format": "raw", "source": str(alpha)})
    uuid, rescue_disk = before["uuid"], f"berth-{before['uuid']}-rescue.qcow2"
    own_disks = disk_sources(lab, "hv2", "rk-1")
    request = {"instance": "rk-1", "image": {"name": "rk-alpha.raw", "format": "raw", "source": str(alpha)}}

    def ledger_true(reason: str) -> None:
        row = row_of(lab, "rk-1")
        assert (row["state"], row["host"]) == ("RESCUED", "hv2") and row["failure_reason"].startswith(reason), row
        assert [claim["hypervisor_uuid"] for claim in lab.ledger_rows("claims")
                if claim["instance_uuid"] == uuid] == [before["hypervisor_uuid"]]

    try:
        killed_at(lab, tmp_path, "after-rescue-disk", "rescue.yml", request)
        ledger_true("rescuing with image rk-alpha.raw by ")
        synced = lab.gather()
        assert not [line for line in drift(synced) if uuid in line or "rk-1" in line], drift(synced)
        ledger_true("rescuing with image rk-alpha.raw by ")
        assert rescue_disk in lab.virsh("hv2", "vol-list", "default")

        killed_at(lab, tmp_path, "after-rescue-define", "rescue.yml", request)
        ledger_true("rescuing with image rk-alpha.raw by ")
        assert lab.virsh("hv2", "domstate", "rk-1").strip() == "shut off"
        finished = lab.playbook("rescue.yml", "-e", json.dumps(request))
        assert finished["rc"] == 0 and changed_count(finished) == 1, failed_messages(finished)
        ledger_true("rescued with image rk-alpha.raw")
        assert [device for device, _source in disk_sources(lab, "hv2", "rk-1")] == ["vda", "vdb"]
        assert lab.virsh("hv2", "domstate", "rk-1").strip() == "running"

        killed_at(lab, tmp_path, "after-unrescue-define", "unrescue.yml", {"instance": "rk-1"})
        ledger_true("rescued with image rk-alpha.raw")
        back = lab.playbook("unrescue.yml", "-e", "instance=rk-1")
        assert back["rc"] == 0, failed_messages(back)
        assert row_of(lab, "rk-1")["state"] == "ACTIVE" and disk_sources(lab, "hv2", "rk-1") == own_disks
        assert rescue_disk not in lab.virsh("hv2", "vol-list", "default")
        assert lab.virsh("hv2", "domstate", "rk-1").strip() == "running"
    finally:
        assert lab.playbook("delete.yml", "-e", "name=rk")["rc"] == 0
    assert not [name for name in lab.virsh("hv2", "vol-list", "default").split() if uuid in name]
