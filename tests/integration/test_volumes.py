"""volume.yml on the real lab fleet: a data volume created on a hypervisor's pool and claimed
against its disk, hot-plugged into a running instance (libvirt's live definition and the
persistent one both have it), carried by a cold migration with its data (a pattern written into
the qcow2 from the host side with qemu-io before, read back on the destination after) and seen by
the guest as a disk of its size when it boots there, then by a live one (the pattern read again),
detached and deleted, with the ledger's
used disk equal to its claims plus its volumes at every step."""

from __future__ import annotations

import json
import subprocess

import fleet
import pytest
from conftest import changed_count, failed_messages, task_result
from test_local_disks import guest_disks, instance_row

pytestmark = pytest.mark.integration

GIB = 1024 ** 3
FLAVOR = {"name": "vol.small", "vcpus": 1, "memory_mb": 512, "root_gb": 1}
VOLUME = "vol-data"
FILE = f"berth-volume-{VOLUME}.qcow2"
# What qemu-io writes at the start of the volume from the host side, and reads back after the move.
PATTERN, LENGTH = "0x5a", "64k"


def volume(lab, state: str, *extra: str) -> dict:
    ran = lab.playbook("volume.yml", "-e", f"volume={VOLUME}", "-e", f"state={state}", *extra)
    assert ran["rc"] == 0, failed_messages(ran)
    return task_result(ran, "Bring the volume to its state")


def path_on(lab, host: str) -> str:
    """The volume's file as this machine sees it (the hypervisor's pool is bind-mounted)."""
    inner = lab.virsh(host, "vol-path", "--pool", "default", FILE).strip()
    return str(fleet.host_path(lab.dir, host, inner))


def blocks(lab, host: str, uuid: str, *flags: str) -> dict[str, str]:
    """virsh domblklist: {target: source} of the running domain (of its definition with --inactive)."""
    lines = lab.virsh(host, "domblklist", uuid, *flags).splitlines()[2:]
    return dict(line.split(None, 1) for line in lines if line.strip())


def qemu_io(*args: str) -> str:
    return subprocess.run(["qemu-io", *args], check=True, capture_output=True, text=True, timeout=60).stdout


def assert_disk_claims_agree(lab) -> None:
    """Each hypervisor's used disk in the ledger is its claims' plus its volumes' (in MB)."""
    claims, volumes = lab.ledger_rows("claims"), lab.ledger_rows("volumes")
    for hv in lab.ledger_rows("hypervisors"):
        wanted = sum(c["disk_mb"] for c in claims if c["hypervisor_uuid"] == hv["uuid"]) + \
            sum(v["size_gb"] * 1024 for v in volumes if v["hypervisor_uuid"] == hv["uuid"])
        assert hv["disk_mb_used"] == wanted, hv["name"]


def test_a_volume_is_created_attached_carried_by_a_cold_move_detached_and_deleted(lab):
    request = {"name": "vol", "flavor": FLAVOR, "berth_force_hosts": ["hv1"]}
    launched = lab.playbook("launch.yml", "-e", json.dumps(request))
    assert launched["rc"] == 0, failed_messages(launched)
    uuid = instance_row(lab, "vol-1")["uuid"]
    assert guest_disks(lab, "hv1", "vol-1") == {"vda": 1 * GIB}

    created = volume(lab, "present", "-e", "size_gb=2", "-e", "host=hv1")
    assert created["changed"] and created["volume"]["host"] == "hv1"
    assert [(v["name"], v["size_gb"], v["instance_uuid"]) for v in lab.ledger_rows("volumes")] == [(VOLUME, 2, None)]
    assert_disk_claims_agree(lab)
    assert not volume(lab, "present", "-e", "size_gb=2", "-e", "host=hv1")["changed"]
    qemu_io("-f", "qcow2", "-c", f"write -P {PATTERN} 0 {LENGTH}", path_on(lab, "hv1"))

    attached = volume(lab, "attached", "-e", "instance=vol-1")
    assert attached["changed"] and attached["msg"] == f"attached volume {VOLUME} to vol-1 as vde (hot-plugged)"
    # Hot-plugged into the running domain and kept in its definition. (The lab guest lists its
    # disks only as it boots: it sees the volume after the move below, which boots it again.)
    inner = lab.virsh("hv1", "vol-path", "--pool", "default", FILE).strip()
    assert blocks(lab, "hv1", uuid)["vde"] == inner and blocks(lab, "hv1", uuid, "--inactive")["vde"] == inner
    again = lab.playbook("volume.yml", "-e", f"volume={VOLUME}", "-e", "state=attached", "-e", "instance=vol-1")
    assert again["rc"] == 0 and changed_count(again) == 0

    cold = lab.playbook("migrate.yml", "-e", "instance=vol-1", "-e", "to_host=hv2", "-e", "mode=cold")
    assert cold["rc"] == 0, failed_messages(cold)
    assert task_result(cold, "Migrate the instance")["mode"] == "cold"
    # The guest's kernel names its disks in bus order (its root vda, the volume vdb), whatever
    # libvirt's target: it sees a second disk of the volume's size.
    assert guest_disks(lab, "hv2", "vol-1") == {"vda": 1 * GIB, "vdb": 2 * GIB}
    assert FILE not in lab.virsh("hv1", "vol-list", "default")
    read = qemu_io("-U", "-r", "-f", "qcow2", "-c", f"read -P {PATTERN} 0 {LENGTH}", path_on(lab, "hv2"))
    assert "read 65536/65536 bytes" in read and "Pattern verification failed" not in read
    [row] = lab.ledger_rows("volumes")
    assert (row["hypervisor_uuid"], row["instance_uuid"], row["target"]) == (
        fleet.host_uuid(lab.dir, "hv2"), uuid, "vde")
    assert_disk_claims_agree(lab)

    # Live, onward to hv3: QEMU copies the volume while the guest runs.
    live = lab.playbook("migrate.yml", "-e", "instance=vol-1", "-e", "to_host=hv3", "-e", "mode=live")
    assert live["rc"] == 0, failed_messages(live)
    assert task_result(live, "Migrate the instance")["mode"] == "live"
    assert blocks(lab, "hv3", uuid)["vde"] == inner and blocks(lab, "hv3", uuid, "--inactive")["vde"] == inner
    assert FILE not in lab.virsh("hv2", "vol-list", "default")
    read = qemu_io("-U", "-r", "-f", "qcow2", "-c", f"read -P {PATTERN} 0 {LENGTH}", path_on(lab, "hv3"))
    assert "read 65536/65536 bytes" in read and "Pattern verification failed" not in read
    [row] = lab.ledger_rows("volumes")
    assert (row["hypervisor_uuid"], row["instance_uuid"]) == (fleet.host_uuid(lab.dir, "hv3"), uuid)
    assert_disk_claims_agree(lab)

    refused = lab.playbook("volume.yml", "-e", f"volume={VOLUME}", "-e", "state=absent")
    assert refused["rc"] != 0 and "is attached to vol-1: detach it first" in " ".join(failed_messages(refused))

    detached = volume(lab, "detached")
    assert detached["changed"]
    assert "vde" not in blocks(lab, "hv3", uuid, "--inactive")
    assert lab.ledger_rows("volumes")[0]["instance_uuid"] is None

    deleted = volume(lab, "absent")
    assert deleted["changed"] and FILE not in lab.virsh("hv3", "vol-list", "default")
    assert lab.ledger_rows("volumes") == []
    assert_disk_claims_agree(lab)

    assert lab.playbook("delete.yml", "-e", "name=vol")["rc"] == 0
