"""Volumes made with a launch (Nova's block device mapping, ``delete_on_termination`` included) on
the real lab fleet, through ansible-playbook: the guest boots with its volumes as disks of their
sizes, the ledger records them attached and claimed on its host, a second launch changes nothing,
and delete.yml deletes the volume marked delete_on_termination and keeps the other, detached. A
launch killed (SIGKILL of its whole process tree) after its domain is defined leaves its volumes
recorded, and the first gather.yml after its lease removes their files with the rest of the dead
build and drops their rows: nothing orphaned. The operation's other cases (retries, refusals, bad
input, check mode) are unit-tested: tests/unit/.../test_launch_volumes.py."""

from __future__ import annotations

import json

import pytest
from conftest import berth_volumes, changed_count, drift, failed_messages, kill_tree, rows, task_result, wait_at_barrier
from test_leftovers import start_killable_launch, wait_for_leases
from test_local_disks import guest_disks, instance_row
from test_volumes import assert_disk_claims_agree

pytestmark = pytest.mark.integration

GIB = 1024 ** 3
FLAVOR = {"name": "bdm.small", "vcpus": 1, "memory_mb": 512, "root_gb": 1}
VOLUMES = [{"name": "data", "size_gb": 2, "delete_on_termination": True}, {"name": "keep", "size_gb": 1}]


def pool_files(lab, host: str) -> list[str]:
    lab.virsh(host, "pool-refresh", "default")
    return sorted(line.split()[0] for line in lab.virsh(host, "vol-list", "default").splitlines()[2:]
                  if line.strip().startswith("berth-volume-bdm"))


def test_a_launch_makes_its_volumes_the_guest_sees_them_and_delete_keeps_only_the_ones_to_keep(lab):
    request = {"name": "bdm", "flavor": FLAVOR, "berth_force_hosts": ["hv1"], "volumes": VOLUMES}
    launched = lab.playbook("launch.yml", "-e", json.dumps(request))
    assert launched["rc"] == 0, failed_messages(launched)
    uuid = instance_row(lab, "bdm-1")["uuid"]
    # The guest's kernel names its disks in bus order: its root, then the two volumes.
    assert guest_disks(lab, "hv1", "bdm-1") == {"vda": 1 * GIB, "vdb": 2 * GIB, "vdc": 1 * GIB}
    volumes = sorted(lab.ledger_rows("volumes"), key=lambda row: row["name"])
    assert [(v["name"], v["size_gb"], v["instance_uuid"], v["target"], bool(v["delete_on_termination"]))
            for v in volumes] == [("bdm-1-data", 2, uuid, "vde", True), ("bdm-1-keep", 1, uuid, "vdf", False)]
    assert pool_files(lab, "hv1") == ["berth-volume-bdm-1-data.qcow2", "berth-volume-bdm-1-keep.qcow2"]
    assert_disk_claims_agree(lab)

    again = lab.playbook("launch.yml", "-e", json.dumps(request))
    assert again["rc"] == 0 and changed_count(again) == 0, failed_messages(again)

    deleted = lab.playbook("delete.yml", "-e", "name=bdm")
    assert deleted["rc"] == 0, failed_messages(deleted)
    assert pool_files(lab, "hv1") == ["berth-volume-bdm-1-keep.qcow2"]
    [kept] = lab.ledger_rows("volumes")
    assert (kept["name"], kept["instance_uuid"], kept["target"]) == ("bdm-1-keep", None, None)
    assert_disk_claims_agree(lab)
    removed = lab.playbook("volume.yml", "-e", "volume=bdm-1-keep", "-e", "state=absent")
    assert removed["rc"] == 0 and task_result(removed, "Bring the volume to its state")["changed"]
    assert pool_files(lab, "hv1") == [] and lab.ledger_rows("volumes") == []


def test_a_launch_killed_after_its_define_leaves_no_volume_once_gather_settles_it(clean_lab, tmp_path):
    lab = clean_lab
    ledger_url = f"sqlite:///{tmp_path}/ledger.sqlite3"
    inventory = lab.inventory_copy(tmp_path, ledger_url, guest_os=False)
    proc, barrier = start_killable_launch(lab, tmp_path, inventory, "bdmkill", "after-define",
                                          {"volumes": VOLUMES, "berth_force_hosts": ["hv1"]})
    wait_at_barrier(proc, barrier)
    kill_tree(proc)
    [instance] = rows(ledger_url, "instances")
    assert instance["state"] == "BUILDING"
    # Made before the define, recorded as the build's artefacts, and claimed as attached volumes.
    files = ["berth-volume-bdmkill-1-data.qcow2", "berth-volume-bdmkill-1-keep.qcow2"]
    lab.virsh("hv1", "pool-refresh", "default")
    listed = lab.virsh("hv1", "vol-list", "default")
    assert all(name in listed for name in files), listed
    recorded = {row["name"] for row in rows(ledger_url, "artefacts")}
    assert set(files) <= recorded
    assert sorted(row["name"] for row in rows(ledger_url, "volumes")) == ["bdmkill-1-data", "bdmkill-1-keep"]

    wait_for_leases(ledger_url)
    late = lab.finish(lab.start_playbook("gather.yml", inventory=inventory))
    assert late["rc"] == 0, failed_messages(late)
    [instance] = rows(ledger_url, "instances")
    assert instance["state"] == "ERROR" and "lease expired" in instance["failure_reason"]
    assert rows(ledger_url, "volumes") == [] and rows(ledger_url, "artefacts") == []
    lab.virsh("hv1", "pool-refresh", "default")
    listed = lab.virsh("hv1", "vol-list", "default")
    assert not any(name in listed for name in files), listed
    assert berth_volumes(lab)["hv1"] == []
    removed = [line for line in drift(late) if line.startswith("hv1: removed what a dead build left: ")]
    assert len(removed) == 1 and all(f"volume default/{name}" in removed[0] for name in files), drift(late)
    hv1 = next(row for row in rows(ledger_url, "hypervisors") if row["name"] == "hv1")
    assert hv1["disk_mb_used"] == 0
    # Converged: the next sync has nothing to say of it, and the name launches again.
    again = lab.finish(lab.start_playbook("gather.yml", inventory=inventory))
    assert again["rc"] == 0 and changed_count(again) == 0, drift(again)
    relaunch = lab.finish(lab.start_playbook("launch.yml", "-e", json.dumps(
        {"name": "bdmkill", "count": 1, "flavor": {**FLAVOR, "memory_mb": 128}, "volumes": VOLUMES,
         "berth_force_hosts": ["hv1"]}), inventory=inventory))
    assert relaunch["rc"] == 0, failed_messages(relaunch)
    assert [row["state"] for row in rows(ledger_url, "instances")] == ["ACTIVE"]
    assert len(rows(ledger_url, "volumes")) == 2
    deleted = lab.finish(lab.start_playbook("delete.yml", "-e", "name=bdmkill", inventory=inventory))
    assert deleted["rc"] == 0, failed_messages(deleted)
    lab.finish(lab.start_playbook("volume.yml", "-e", "volume=bdmkill-1-keep", "-e", "state=absent",
                                  inventory=inventory))
    assert rows(ledger_url, "volumes") == []
