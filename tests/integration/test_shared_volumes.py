"""A data volume on a shared pool (berth_shared_pools) on the real lab fleet: a directory pool that
hv1 and hv2 both define on the same directory (what an NFS mount is to them), a volume made there
and hot-plugged into a running instance, a pattern written into it from the host side; the
instance migrated cold to hv2 - the volume stays the same file (same path, same inode: never
copied), its data reads back, the guest sees it as a disk of its size when it boots on hv2, the
ledger's row follows the instance, and no hypervisor's used disk counts it. Back with mode=auto:
the live attempt is refused by libvirt's own check (the lab's directory is no shared file
system) with nothing changed, and the move goes cold, the same file again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import failed_messages, task_result
from test_local_disks import guest_disks, instance_row
from test_volumes import blocks, qemu_io

pytestmark = pytest.mark.integration

GIB = 1024 ** 3
FLAVOR = {"name": "shv.small", "vcpus": 1, "memory_mb": 512, "root_gb": 1}
POOL, VOLUME = "shared", "shv-data"
FILE = f"berth-volume-{VOLUME}.qcow2"
SHARED_HOSTS = ("hv1", "hv2")
# The operator's setting, as the inventory would give it.
OPERATOR = ("-e", json.dumps({"berth_shared_pools": [POOL]}))
PATTERN, LENGTH = "0xa5", "64k"


def volume(lab, state: str, *extra: str) -> dict:
    ran = lab.playbook("volume.yml", "-e", f"volume={VOLUME}", "-e", f"state={state}", *OPERATOR, *extra)
    assert ran["rc"] == 0, failed_messages(ran)
    return task_result(ran, "Bring the volume to its state")


def migrate(lab, to_host: str, mode: str) -> None:
    ran = lab.playbook("migrate.yml", "-e", "instance=shv-1", "-e", f"to_host={to_host}", "-e", f"mode={mode}")
    assert ran["rc"] == 0, failed_messages(ran)
    assert task_result(ran, "Migrate the instance")["mode"] == mode


def assert_unchanged_and_readable(path: Path, inode: int) -> None:
    assert path.stat().st_ino == inode
    read = qemu_io("-U", "-r", "-f", "qcow2", "-c", f"read -P {PATTERN} 0 {LENGTH}", str(path))
    assert "read 65536/65536 bytes" in read and "Pattern verification failed" not in read


def assert_no_host_charged(lab) -> None:
    """Each hypervisor's used disk is its claims' alone: the shared volume is nobody's."""
    claims = lab.ledger_rows("claims")
    for hv in lab.ledger_rows("hypervisors"):
        assert hv["disk_mb_used"] == sum(c["disk_mb"] for c in claims if c["hypervisor_uuid"] == hv["uuid"]), hv["name"]


@pytest.fixture
def shared_pool(lab):
    """The pool on hv1 and hv2: one directory of this machine, which neither daemon's namespace
    hides (only libvirt's own directories are bind-mounted per host)."""
    directory = Path(lab.dir) / "shared-pool"
    directory.mkdir()
    for host in SHARED_HOSTS:
        lab.virsh(host, "pool-define-as", POOL, "dir", "--target", str(directory))
        lab.virsh(host, "pool-start", POOL)
    yield directory
    for host in SHARED_HOSTS:
        lab.virsh(host, "pool-destroy", POOL)
        lab.virsh(host, "pool-undefine", POOL)


def test_a_shared_pool_volume_moves_with_its_instance_without_a_copy(lab, shared_pool):
    request = {"name": "shv", "flavor": FLAVOR, "berth_force_hosts": ["hv1"]}
    launched = lab.playbook("launch.yml", "-e", json.dumps(request))
    assert launched["rc"] == 0, failed_messages(launched)
    uuid = instance_row(lab, "shv-1")["uuid"]
    try:
        created = volume(lab, "present", "-e", "size_gb=1", "-e", "host=hv1", "-e", f"pool={POOL}")
        assert created["changed"] and created["volume"]["shared"]
        path = shared_pool / FILE
        qemu_io("-f", "qcow2", "-c", f"write -P {PATTERN} 0 {LENGTH}", str(path))
        inode = path.stat().st_ino
        assert_no_host_charged(lab)

        attached = volume(lab, "attached", "-e", "instance=shv-1")
        assert attached["msg"] == f"attached volume {VOLUME} to shv-1 as vde (hot-plugged)"
        assert blocks(lab, "hv1", uuid)["vde"] == str(path)

        migrate(lab, "hv2", "cold")
        assert blocks(lab, "hv2", uuid)["vde"] == str(path) == blocks(lab, "hv2", uuid, "--inactive")["vde"]
        assert guest_disks(lab, "hv2", "shv-1") == {"vda": 1 * GIB, "vdb": 1 * GIB}
        assert_unchanged_and_readable(path, inode)
        [row] = lab.ledger_rows("volumes")
        assert (row["hypervisor_uuid"], row["instance_uuid"], row["target"]) == (
            instance_row(lab, "shv-1")["hypervisor_uuid"], uuid, "vde")
        assert_no_host_charged(lab)

        # Back with mode=auto: live first, QEMU told not to copy the volume, and libvirt checks
        # that its storage really is shared. The lab's directory is on this machine's own file
        # system, which libvirt rightly refuses to run from on two hosts at once (an NFS or Ceph
        # pool passes): the live attempt changes nothing, and the move goes cold - the same file.
        back = lab.playbook("migrate.yml", "-e", "instance=shv-1", "-e", "to_host=hv1", "-e", "mode=auto")
        assert back["rc"] == 0, failed_messages(back)
        moved = task_result(back, "Migrate the instance")
        assert moved["mode"] == "cold" and "Migration without shared storage is unsafe" in moved["live_refused"]
        assert blocks(lab, "hv1", uuid)["vde"] == str(path) == blocks(lab, "hv1", uuid, "--inactive")["vde"]
        assert_unchanged_and_readable(path, inode)
        assert lab.ledger_rows("volumes")[0]["hypervisor_uuid"] == instance_row(lab, "shv-1")["hypervisor_uuid"]
        assert instance_row(lab, "shv-1")["host"] == "hv1"
        assert_no_host_charged(lab)

        volume(lab, "detached")
        assert volume(lab, "absent")["changed"] and not os.path.exists(path)
    finally:
        assert lab.playbook("delete.yml", "-e", "name=shv")["rc"] == 0
        if lab.ledger_rows("volumes"):
            volume(lab, "absent")
