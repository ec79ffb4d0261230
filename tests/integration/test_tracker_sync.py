"""The tracker sync (playbooks/gather.yml) and the ledger modules, on the real lab fleet, each
with its own ledger file so that the other tests' ledger is left alone."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest
from conftest import changed_count, drift, failed_messages, task_results

import fleet  # noqa: E402  (lab/fleet.py, on the path conftest gives)

from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger

pytestmark = pytest.mark.integration

OPS = str(Path(__file__).with_name("playbooks") / "ledger_ops.yml")
TINY = json.dumps({"flavor": {"vcpus": 1, "memory_mb": 128, "root_gb": 1}})
ORPHAN_XML = """<domain type='qemu'><name>handmade</name><memory unit='MiB'>96</memory><vcpu>1</vcpu>
<os><type arch='x86_64'>hvm</type></os></domain>"""


def sql(path: Path, query: str) -> list[dict]:
    with sqlite3.connect(path) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute(query)]


@pytest.fixture
def own_ledger(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    return path, ("-e", f"berth_ledger_url=sqlite:///{path}")


def test_gather_records_inventories_and_orphans_idempotently_with_check_mode(lab, own_ledger, tmp_path):
    path, use = own_ledger
    xml = tmp_path / "orphan.xml"
    xml.write_text(ORPHAN_XML)
    lab.virsh("hv2", "define", str(xml))
    try:
        first = lab.playbook("gather.yml", *use)
        assert first["rc"] == 0, failed_messages(first)
        # One task syncs the play's hypervisors: each is new to this ledger.
        assert changed_count(first) == 1
        [synced] = task_results(first, "Sync the hypervisors into the ledger")
        assert synced["summary"]["changed"] == len(lab.hosts)
        assert sorted(synced["findings"]) == sorted(lab.hosts)
        hypervisors = {row["name"]: row for row in sql(path, "SELECT * FROM hypervisors")}
        assert sorted(hypervisors) == sorted(lab.hosts)
        for host, row in hypervisors.items():
            # Keyed by the libvirt host UUID, as virsh reports it.
            assert f"<uuid>{row['uuid']}</uuid>" in lab.virsh(host, "capabilities")
            cpus = int(next(line.split(":")[1] for line in lab.virsh(host, "nodeinfo").splitlines()
                            if line.startswith("CPU(s)")))
            assert (row["vcpus_total"], row["cpu_allocation_ratio"]) == (cpus, 4.0)
            assert (row["reserved_host_memory_mb"], row["ram_allocation_ratio"]) == (512, 1.0)
            # The URI launches build through, as the inventory gave it.
            assert row["uri"] == lab.hosts[host]["uri"]
        [orphan] = sql(path, "SELECT * FROM unmanaged_usage")
        assert (orphan["domain_name"], orphan["memory_mb"], orphan["vcpus"]) == ("handmade", 96, 1)
        assert orphan["hypervisor_uuid"] == hypervisors["hv2"]["uuid"]
        assert any(line.startswith("hv2:") and "orphans: handmade" in line for line in drift(first)), drift(first)

        second = lab.playbook("gather.yml", *use)
        assert second["rc"] == 0 and changed_count(second) == 0
    finally:
        lab.virsh("hv2", "undefine", "handmade")

    # The orphan is gone: check mode says so and writes nothing, the real run forgets it.
    dry = lab.playbook("gather.yml", *use, check=True)
    assert dry["rc"] == 0 and changed_count(dry) == 1
    assert len(sql(path, "SELECT * FROM unmanaged_usage")) == 1
    real = lab.playbook("gather.yml", *use)
    assert real["rc"] == 0 and changed_count(real) == 1
    assert sql(path, "SELECT * FROM unmanaged_usage") == []
    again = lab.playbook("gather.yml", *use, check=True)
    assert again["rc"] == 0 and changed_count(again) == 0


def test_missing_hypervisors_and_instances_are_reported_never_retired_by_a_sync(lab, own_ledger):
    path, use = own_ledger
    url = f"sqlite:///{path}"
    ledger = Ledger(url).open()
    gone = {"host": "hv9", "nodename": "hv9", "uuid": "99999999-9999-9999-9999-999999999999",
            "service_up": True, "vcpus_total": 4, "total_usable_ram_mb": 4096, "total_usable_disk_gb": 10,
            "cpu_allocation_ratio": 1.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
            "reserved_host_memory_mb": 0, "reserved_host_disk_mb": 0, "domains": []}
    ledger.sync_hypervisors([gone])
    ledger.close()
    launched = lab.playbook("launch.yml", *use, "-e", "name=lost", "-e", TINY)
    assert launched["rc"] == 0, failed_messages(launched)
    [instance] = sql(path, "SELECT * FROM instances")
    try:
        lab.virsh(instance["host"], "destroy", "lost-1")
        lab.virsh(instance["host"], "undefine", "lost-1")

        limited = lab.playbook("gather.yml", *use, "--limit", instance["host"])
        assert limited["rc"] == 0, failed_messages(limited)
        lines = drift(limited)
        # hv9 is in no inventory, but something synced it lately: another slice's, left alone.
        assert any(line.startswith("hv9: not in this inventory, synced elsewhere at") for line in lines), lines
        assert any(line.startswith(f"lost-1: ACTIVE in the ledger but no domain on {instance['host']}")
                   for line in lines), lines
        statuses = {row["name"]: row["sync_status"] for row in sql(path, "SELECT * FROM hypervisors")}
        assert statuses["hv9"] == "up"

        # Nothing has synced hv9 for longer than service_down_time: now it is missing.
        with sqlite3.connect(path) as db:
            db.execute("UPDATE hypervisors SET synced_at = '2026-01-01 00:00:00' WHERE name = 'hv9'")
        full = lab.playbook("gather.yml", *use)
        assert any(line.startswith("hv9: MISSING: in no inventory and not synced since") for line in drift(full)), \
            drift(full)
        statuses = {row["name"]: row["sync_status"] for row in sql(path, "SELECT * FROM hypervisors")}
        assert statuses["hv9"] == "missing"
        assert sql(path, "SELECT missing_since FROM instances")[0]["missing_since"] is not None
        # Its claim is kept: a missing instance is flagged, not forgotten.
        assert [c["instance_uuid"] for c in sql(path, "SELECT * FROM claims")] == [instance["uuid"]]

        # Retiring is the operator's act: check mode first, then for real, then nothing left to do.
        retire = ("-e", "hypervisor=hv9", "-e", "hypervisor_state=retired")
        assert changed_count(lab.playbook(OPS, *use, *retire, check=True)) == 1
        assert "hv9" in {row["name"] for row in sql(path, "SELECT * FROM hypervisors")}
        assert changed_count(lab.playbook(OPS, *use, *retire)) == 1
        assert "hv9" not in {row["name"] for row in sql(path, "SELECT * FROM hypervisors")}
        assert changed_count(lab.playbook(OPS, *use, *retire)) == 0
    finally:
        lab.playbook("delete.yml", *use, "-e", "name=lost")


def test_a_disabled_hypervisor_is_skipped_with_its_reason_and_enabled_again(lab, own_ledger):
    path, use = own_ledger
    assert lab.playbook("gather.yml", *use)["rc"] == 0
    disable = ("-e", "hypervisor=hv1", "-e", "hypervisor_state=disabled", "-e", '{"reason": "disk swap"}')
    assert changed_count(lab.playbook(OPS, *use, *disable, check=True)) == 1
    assert sql(path, "SELECT disabled FROM hypervisors WHERE name = 'hv1'")[0]["disabled"] == 0
    assert changed_count(lab.playbook(OPS, *use, *disable)) == 1
    assert changed_count(lab.playbook(OPS, *use, *disable)) == 0
    try:
        launched = lab.playbook("launch.yml", *use, "-e", "name=away", "-e", "count=2", "-e", TINY)
        assert launched["rc"] == 0, failed_messages(launched)
        assert {row["host"] for row in sql(path, "SELECT host FROM instances")} == {"hv2", "hv3"}
        [plan] = [result for play in launched["plays"] for task in play["tasks"]
                  for result in task["hosts"].values() if "decision" in result]
        [rejection] = plan["decision"]["rejections"]
        assert (rejection["host"], rejection["message"]) == ("hv1", "host disabled: disk swap")
    finally:
        lab.playbook("delete.yml", *use, "-e", "name=away")
    enable = ("-e", "hypervisor=hv1", "-e", "hypervisor_state=enabled")
    assert changed_count(lab.playbook(OPS, *use, *enable)) == 1
    assert sql(path, "SELECT disabled, disabled_reason FROM hypervisors WHERE name = 'hv1'") == [
        {"disabled": 0, "disabled_reason": None}]


def test_server_group_module_check_mode_triplet_and_launch_by_group_name(lab, own_ledger):
    path, use = own_ledger
    create = ("-e", "group_name=db", "-e", "group_state=present", "-e", "policy=anti-affinity")
    dry = lab.playbook(OPS, *use, *create, check=True)
    assert dry["rc"] == 0 and changed_count(dry) == 1
    assert sql(path, "SELECT * FROM server_groups") == []
    assert changed_count(lab.playbook(OPS, *use, *create)) == 1
    assert changed_count(lab.playbook(OPS, *use, *create, check=True)) == 0
    assert changed_count(lab.playbook(OPS, *use, *create)) == 0

    unknown = lab.playbook("launch.yml", *use, "-e", "name=nogroup", "-e", "server_group=nope", "-e", TINY)
    assert unknown["rc"] != 0
    assert any("no server group named 'nope'" in m for m in failed_messages(unknown))
    assert sql(path, "SELECT * FROM instances") == []

    try:
        launched = lab.playbook("launch.yml", *use, "-e", "name=db", "-e", "count=3", "-e", "server_group=db", "-e", TINY)
        assert launched["rc"] == 0, failed_messages(launched)
        hosts = [row["host"] for row in sql(path, "SELECT host FROM instances")]
        assert sorted(hosts) == sorted(lab.hosts)
        listed = lab.playbook(OPS, *use, "-e", "what=server_groups", "-e", "info_name=db")
        [info] = task_results(listed, "Ledger info")
        [group] = info["server_groups"]
        assert group["hosts"] == sorted(lab.hosts) and len(group["members"]) == 3
        decisions = task_results(lab.playbook(OPS, *use, "-e", "what=decisions", "-e", "info_name=db"),
                                 "Ledger info")[0]["decisions"]
        assert decisions[0]["outcome"] == "claimed" and sorted(decisions[0]["choice"]) == sorted(lab.hosts)
    finally:
        lab.playbook("delete.yml", *use, "-e", "name=db")
    delete = ("-e", "group_name=db", "-e", "group_state=absent")
    assert changed_count(lab.playbook(OPS, *use, *delete, check=True)) == 1
    assert changed_count(lab.playbook(OPS, *use, *delete)) == 1
    assert changed_count(lab.playbook(OPS, *use, *delete)) == 0


def test_a_hypervisor_whose_daemon_hangs_is_down_within_its_timeout_while_the_others_sync(lab, tmp_path):
    """hv3's libvirtd is stopped (SIGSTOP): its socket still takes the connection, then nothing
    answers. The sync (which reads the hypervisors itself: the source does not gather) gives it
    up after its deadline (twice the source's timeout) and marks it down with the reason; hv1
    and hv2 are synced meanwhile."""
    path = tmp_path / "ledger.sqlite3"
    use = ("-e", f"berth_ledger_url=sqlite:///{path}")
    inventory = Path(lab.inventory_copy(tmp_path, f"sqlite:///{path}"))
    source = json.loads((inventory / "fleet.berth.yml").read_text())
    (inventory / "fleet.berth.yml").write_text(json.dumps({**source, "timeout": 3, "gather_facts": False}) + "\n")
    assert lab.finish(lab.start_playbook("gather.yml", *use, inventory=str(inventory)))["rc"] == 0
    before = {row["name"]: row["synced_at"] for row in sql(path, "SELECT name, synced_at FROM hypervisors")}
    pid = fleet.daemon_pid(lab.dir, "hv3")
    os.kill(pid, signal.SIGSTOP)
    try:
        hung = lab.finish(lab.start_playbook("gather.yml", *use, inventory=str(inventory)))
    finally:
        os.kill(pid, signal.SIGCONT)
    assert hung["rc"] == 0, failed_messages(hung)
    [synced] = task_results(hung, "Sync the hypervisors into the ledger")
    # Given up by the sync's deadline (2 x 3 s: the reason says so), not by libvirt's keepalive or
    # a TCP timeout, whose errors read otherwise. How long that takes on a real fleet is
    # benchmarks/deadlines.py's to measure, not this test's.
    assert synced["findings"]["hv3"] == ["hv3: did not answer (hv3: no answer within 6 s); its claims are kept"]
    rows = {row["name"]: row for row in sql(path, "SELECT * FROM hypervisors")}
    assert (rows["hv3"]["sync_status"], rows["hv3"]["down_reason"]) == ("down", "hv3: no answer within 6 s")
    assert rows["hv3"]["synced_at"] == before["hv3"]
    for host in ("hv1", "hv2"):
        assert rows[host]["sync_status"] == "up" and rows[host]["synced_at"] > before[host]
    # Back: the next sync finds it up again.
    again = lab.finish(lab.start_playbook("gather.yml", *use, inventory=str(inventory)))
    assert again["rc"] == 0 and sql(path, "SELECT sync_status FROM hypervisors WHERE name = 'hv3'") == [
        {"sync_status": "up"}]
