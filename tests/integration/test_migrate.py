"""migrate.yml on the real lab fleet: a running instance moves, and the ledger and libvirt agree."""

from __future__ import annotations

import json

import check
import fleet
import pytest
from conftest import (
    changed_count,
    drift,
    failed_messages,
    fleet_snapshot,
    hooks_env,
    task_result,
    wait_at_barrier,
)

pytestmark = pytest.mark.integration

BOOT_TIMEOUT_S = 120


def where(lab, name: str) -> tuple[dict, list[str]]:
    """The ledger row of an instance and the hosts whose libvirt has a domain of its UUID."""
    row = next(r for r in lab.ledger_rows("instances") if r["name"] == name)
    hosts = [host for host in lab.hosts if row["uuid"] in lab.virsh(host, "list", "--all", "--uuid")]
    return row, hosts


def assert_ledger_and_libvirt_agree(lab, name: str) -> dict:
    row, hosts = where(lab, name)
    assert hosts == [row["host"]]
    assert lab.virsh(row["host"], "domstate", row["uuid"]).strip() == "running"
    claims = [c for c in lab.ledger_rows("claims") if c["instance_uuid"] == row["uuid"]]
    assert [c["hypervisor_uuid"] for c in claims] == [fleet.host_uuid(lab.dir, row["host"])]
    for host in set(lab.hosts) - {row["host"]}:
        assert row["uuid"] not in lab.virsh(host, "vol-list", "default")
    return row


def test_running_instance_migrates_live_then_cold_and_ledger_agrees_with_libvirt(lab):
    launched = lab.playbook("launch.yml", "-e", "name=mig", "-e", "count=1")
    assert launched["rc"] == 0, failed_messages(launched)
    start = assert_ledger_and_libvirt_agree(lab, "mig-1")
    log = fleet.log_dir(lab.dir, start["host"]) / "mig-1.serial.log"
    assert check.wait_for_marker(log, start["uuid"], BOOT_TIMEOUT_S), "the guest did not boot"

    before = fleet_snapshot(lab)
    dry = lab.playbook("migrate.yml", "-e", "instance=mig-1", check=True)
    assert dry["rc"] == 0, failed_messages(dry)
    assert fleet_snapshot(lab) == before
    predicted = task_result(dry, "Migrate the instance")["to_host"]
    assert predicted != start["host"]

    live = lab.playbook("migrate.yml", "-e", "instance=mig-1")
    assert live["rc"] == 0, failed_messages(live)
    moved = task_result(live, "Migrate the instance")
    assert (moved["from_host"], moved["to_host"], moved["mode"]) == (start["host"], predicted, "live")
    after_live = assert_ledger_and_libvirt_agree(lab, "mig-1")
    assert after_live["host"] == predicted and after_live["uuid"] == start["uuid"]

    third = next(h for h in lab.hosts if h not in (start["host"], predicted))
    cold = lab.playbook("migrate.yml", "-e", "instance=mig-1", "-e", f"to_host={third}", "-e", "mode=cold")
    assert cold["rc"] == 0, failed_messages(cold)
    assert task_result(cold, "Migrate the instance")["mode"] == "cold"
    after_cold = assert_ledger_and_libvirt_agree(lab, "mig-1")
    assert after_cold["host"] == third
    # A cold move restarts the guest on its new host: it boots again there.
    log = fleet.log_dir(lab.dir, third) / "mig-1.serial.log"
    assert check.wait_for_marker(log, start["uuid"], BOOT_TIMEOUT_S), "the guest did not boot on its new host"

    same = lab.playbook("migrate.yml", "-e", "instance=mig-1", "-e", f"to_host={third}")
    assert same["rc"] != 0
    assert f"already runs on {third}" in " ".join(failed_messages(same))
    assert changed_count(same) == 0

    assert lab.playbook("delete.yml", "-e", "name=mig")["rc"] == 0


def test_drain_moves_every_instance_off_a_host(lab):
    launched = lab.playbook("launch.yml", "-e", "name=drn", "-e", "count=3")
    assert launched["rc"] == 0, failed_messages(launched)
    drained_host = next(r["host"] for r in lab.ledger_rows("instances") if r["name"] == "drn-1")

    drained = lab.playbook("drain.yml", "-e", f"drain_host={drained_host}")
    assert drained["rc"] == 0, failed_messages(drained)
    assert lab.virsh(drained_host, "list", "--all", "--name").split() == []
    for name in ("drn-1", "drn-2", "drn-3"):
        moved = assert_ledger_and_libvirt_agree(lab, name)
        assert moved["host"] != drained_host

    assert lab.playbook("delete.yml", "-e", "name=drn")["rc"] == 0
    assert all(lab.virsh(host, "list", "--all", "--name").split() == [] for host in lab.hosts)


@pytest.mark.parametrize("mode", ["live", "cold"])
def test_a_move_whose_source_daemon_stops_before_its_copy_is_removed_follows_the_domain(lab, tmp_path, mode):
    """Found by the soak (benchmarks/soak.py --seed 14, step 21): libvirt moved the domain, then
    the source's libvirtd went away before Berth removed the source's copy. The move is done: the
    ledger follows the domain, and the next gather that reaches the source removes what it kept."""
    name = f"gone{mode}"
    launched = lab.playbook("launch.yml", "-e", json.dumps({"name": name, "count": 1, "berth_force_hosts": ["hv1"]}))
    assert launched["rc"] == 0, failed_messages(launched)
    uuid = next(r["uuid"] for r in lab.ledger_rows("instances") if r["name"] == f"{name}-1")
    barrier = tmp_path / "barrier"
    # Two parties: the move waits there until the test releases it.
    env = hooks_env(barrier, "after-move", parties=2, timeout_s=120)
    proc = lab.start_playbook("migrate.yml", "-e", f"instance={name}-1", "-e", "to_host=hv2", "-e", f"mode={mode}",
                              env=env)
    wait_at_barrier(proc, barrier)
    lab.stop_daemon("hv1")
    try:
        (barrier / "release").touch()
        moved = lab.finish(proc)
    finally:
        lab.start_daemon("hv1")
    assert moved["rc"] == 0, failed_messages(moved)
    result = task_result(moved, "Migrate the instance")
    assert (result["to_host"], result["mode"]) == ("hv2", mode)
    assert result["source_left"].startswith("hv1: ")
    row = next(r for r in lab.ledger_rows("instances") if r["name"] == f"{name}-1")
    assert row["host"] == "hv2" and lab.virsh("hv2", "domstate", uuid).strip() == "running"
    assert [c["hypervisor_uuid"] for c in lab.ledger_rows("claims") if c["instance_uuid"] == uuid] == [
        fleet.host_uuid(lab.dir, "hv2")]
    # What hv1 kept of it (its root volume; after a cold move its stopped domain too) goes with
    # the next sync that reaches hv1.
    assert f"berth-{uuid}-root.qcow2" in lab.virsh("hv1", "vol-list", "default")
    gathered = lab.gather()
    assert any(line.startswith("hv1: removed") and f"{name}-1 went on to hv2" in line for line in drift(gathered)), \
        drift(gathered)
    assert_ledger_and_libvirt_agree(lab, f"{name}-1")
    assert lab.playbook("delete.yml", "-e", f"name={name}")["rc"] == 0
