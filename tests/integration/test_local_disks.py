"""A flavor's ephemeral and swap disks on the real lab fleet: built beside the root disk as the
flavor sizes them, seen by the guest (the lab guest prints each disk and its size on its serial
console), carried by a live and a cold migration, grown and made anew by a resize, and gone
with the instance."""

from __future__ import annotations

import json
import re
import time

import fleet
import pytest
from conftest import failed_messages, task_result

pytestmark = pytest.mark.integration

BOOT_TIMEOUT_S = 120
GIB, MIB = 1024 ** 3, 1024 ** 2
FLAVOR = {"name": "eph.small", "vcpus": 1, "memory_mb": 512, "root_gb": 1, "ephemeral_gb": 1, "swap": 512}
BIGGER = {**FLAVOR, "name": "eph.big", "ephemeral_gb": 2, "swap": 256}
DISKS_LINE = re.compile(r"BERTH-GUEST-DISKS((?: \w+=\d+)*)")


def guest_disks(lab, host: str, name: str) -> dict[str, int]:
    """The disks (name: bytes) the guest's last boot on ``host`` printed, waiting for its line."""
    log = fleet.log_dir(lab.dir, host) / f"{name}.serial.log"
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    while time.monotonic() < deadline:
        found = DISKS_LINE.findall(log.read_text(errors="replace")) if log.exists() else []
        if found:
            return {disk: int(size) for disk, size in (item.split("=") for item in found[-1].split())}
        time.sleep(0.5)
    raise AssertionError(f"{name} printed no disks on {host}")


def volumes(lab, host: str, uuid: str) -> dict[str, int]:
    """The instance's volumes on ``host`` (suffix: capacity in bytes), through libvirt."""
    names = [line.split()[0] for line in lab.virsh(host, "vol-list", "default").splitlines()[2:] if uuid in line]
    capacities = {}
    for volume in names:
        info = lab.virsh(host, "vol-info", "--pool", "default", volume, "--bytes")
        capacities[volume.split(uuid + "-", 1)[1]] = int(re.search(r"^Capacity:\s+(\d+) bytes", info, re.M).group(1))
    return capacities


def instance_row(lab, name: str) -> dict:
    return next(row for row in lab.ledger_rows("instances") if row["name"] == name)


def assert_built(lab, host: str, uuid: str, flavor: dict) -> None:
    built = volumes(lab, host, uuid)
    assert {key: built[key] for key in ("root.qcow2", "ephemeral0.qcow2", "swap.qcow2")} == {
        "root.qcow2": flavor["root_gb"] * GIB, "ephemeral0.qcow2": flavor["ephemeral_gb"] * GIB,
        "swap.qcow2": flavor["swap"] * MIB}
    # The claim is what was built: root and ephemeral in GiB, swap in MiB.
    claims = [c for c in lab.ledger_rows("claims") if c["instance_uuid"] == uuid]
    assert [c["disk_mb"] for c in claims] == [1024 * (flavor["root_gb"] + flavor["ephemeral_gb"]) + flavor["swap"]]
    for other in set(lab.hosts) - {host}:
        assert uuid not in lab.virsh(other, "vol-list", "default")


def guest_sees(flavor: dict) -> dict[str, int]:
    return {"vda": flavor["root_gb"] * GIB, "vdb": flavor["ephemeral_gb"] * GIB, "vdc": flavor["swap"] * MIB}


def test_ephemeral_and_swap_disks_are_built_moved_resized_and_deleted(lab):
    launched = lab.playbook("launch.yml", "-e", json.dumps({"name": "eph", "flavor": FLAVOR, "berth_force_hosts": ["hv1"]}))
    assert launched["rc"] == 0, failed_messages(launched)
    row = instance_row(lab, "eph-1")
    uuid = row["uuid"]
    assert row["host"] == "hv1"
    assert guest_disks(lab, "hv1", "eph-1") == guest_sees(FLAVOR)
    assert_built(lab, "hv1", uuid, FLAVOR)
    # The seed carries their vendor-data though the launch gave no user data.
    assert "seed.iso" in volumes(lab, "hv1", uuid)

    live = lab.playbook("migrate.yml", "-e", "instance=eph-1", "-e", "to_host=hv2")
    assert live["rc"] == 0, failed_messages(live)
    assert task_result(live, "Migrate the instance")["mode"] == "live"
    assert lab.virsh("hv2", "domstate", uuid).strip() == "running"
    assert_built(lab, "hv2", uuid, FLAVOR)

    cold = lab.playbook("migrate.yml", "-e", "instance=eph-1", "-e", "to_host=hv3", "-e", "mode=cold")
    assert cold["rc"] == 0, failed_messages(cold)
    assert task_result(cold, "Migrate the instance")["mode"] == "cold"
    assert guest_disks(lab, "hv3", "eph-1") == guest_sees(FLAVOR)
    assert_built(lab, "hv3", uuid, FLAVOR)

    # Up on its own host: the ephemeral disk grows, swap is made anew at its new (smaller) size.
    (fleet.log_dir(lab.dir, "hv3") / "eph-1.serial.log").unlink()
    grown = lab.playbook("resize.yml", "-e", json.dumps({"name": "eph-1", "flavor": BIGGER}))
    assert grown["rc"] == 0, failed_messages(grown)
    assert instance_row(lab, "eph-1")["host"] == "hv3"
    assert guest_disks(lab, "hv3", "eph-1") == guest_sees(BIGGER)
    assert_built(lab, "hv3", uuid, BIGGER)

    shrink = lab.playbook("resize.yml", "-e", json.dumps({"name": "eph-1", "flavor": FLAVOR}))
    assert shrink["rc"] != 0
    assert "flavor.ephemeral_gb" in json.dumps(shrink) and "a disk is never shrunk" in json.dumps(shrink)

    deleted = lab.playbook("delete.yml", "-e", "name=eph")
    assert deleted["rc"] == 0, failed_messages(deleted)
    assert all(uuid not in lab.virsh(host, "vol-list", "default") for host in lab.hosts)
    assert not [r for r in lab.ledger_rows("artefacts") if r["instance_uuid"] == uuid]
    assert not [r for r in lab.ledger_rows("instances") if r["uuid"] == uuid]
