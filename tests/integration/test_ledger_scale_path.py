"""Launches decide from the ledger (issue 12), on the real lab fleet: no inventory of the
hypervisors is needed at launch, the build reaches a hypervisor through the URI its last sync
recorded, a hypervisor not synced lately is never picked and the failure says why, and gather.yml
slices running at once against PostgreSQL while a launch claims leave the ledger whole."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import failed_messages, task_result
from facts_helpers import LAB_POLICY, group_members, plain, run_inventory
from sqlalchemy import create_engine, text

from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger

pytestmark = pytest.mark.integration

TINY = {"vcpus": 1, "memory_mb": 128, "root_gb": 1}


def controller_inventory(lab, directory: Path, url: str, **variables) -> str:
    """localhost and the lab's berth_* variables, with ``url`` as the ledger: no hypervisor."""
    inventory = directory / "controller"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "hosts.ini").write_text("localhost ansible_connection=local\n")
    lines = [line for line in (Path(lab.inventory) / "group_vars" / "all.yml").read_text().splitlines()
             if not line.startswith("berth_ledger_url:")]
    lines.append(f"berth_ledger_url: {json.dumps(url)}")
    lines += [f"{key}: {json.dumps(value)}" for key, value in variables.items()]
    (inventory / "group_vars" / "all.yml").write_text("\n".join(lines) + "\n")
    return str(inventory)


def unreachable_inventory(lab, directory: Path, url: str) -> str:
    """The lab's hypervisors listed without connecting, each at a URI where nothing answers."""
    inventory = directory / "unreachable"
    (inventory / "group_vars").mkdir(parents=True)
    hosts = "".join(f"  {name}:\n    uri: qemu+unix:///system?socket={directory}/nobody-{name}.sock\n"
                    for name in lab.hosts)
    (inventory / "fleet.berth.yml").write_text(
        f"plugin: berth.fleet.hypervisors\ngather_facts: false\n{LAB_POLICY}hypervisors:\n{hosts}")
    lines = [line for line in (Path(lab.inventory) / "group_vars" / "all.yml").read_text().splitlines()
             if not line.startswith("berth_ledger_url:")]
    (inventory / "group_vars" / "all.yml").write_text("\n".join([*lines, f"berth_ledger_url: {json.dumps(url)}"]) + "\n")
    return str(inventory)


def test_the_inventory_lists_hypervisors_without_connecting_when_told_to(lab, tmp_path):
    inventory = run_inventory(unreachable_inventory(lab, tmp_path, "sqlite:///unused"))
    hostvars = plain(inventory["_meta"]["hostvars"])
    assert group_members(inventory, "hypervisors") == set(lab.hosts)
    assert group_members(inventory, "down") == set()  # nobody was asked, so nobody is down
    for host in lab.hosts:
        assert "berth_host_state" not in hostvars[host]
        assert hostvars[host]["berth_libvirt_uri"].endswith(f"nobody-{host}.sock")
        hypervisor = hostvars[host]["berth_hypervisor"]
        assert (hypervisor["availability_zone"], hypervisor["storage_pool"], hypervisor["aggregates"]) == (
            "nova", "default", [])


def running(lab) -> dict[str, set[str]]:
    return {host: set(lab.virsh(host, "list", "--name").split()) for host in lab.hosts}


def rows(url: str, query: str) -> list[dict]:
    engine = create_engine(url)
    with engine.connect() as db:
        found = [dict(row._mapping) for row in db.execute(text(query))]
    engine.dispose()
    return found


def test_a_launch_places_claims_and_builds_from_the_ledger_alone(lab, tmp_path):
    url = f"sqlite:///{tmp_path}/ledger.sqlite3"
    lab.gather("-e", f"berth_ledger_url={url}")
    uris = {row["name"]: row["uri"] for row in rows(url, "SELECT name, uri FROM hypervisors")}
    assert uris == {name: record["uri"] for name, record in lab.hosts.items()}

    # No hypervisor in the inventory at all: the decision, the claims and the builds come from the ledger.
    bare = controller_inventory(lab, tmp_path, url)
    request = json.dumps({"name": "led", "count": 3, "flavor": TINY, "server_group": None})
    launched = lab.finish(lab.start_playbook("launch.yml", "-e", request, inventory=bare))
    assert launched["rc"] == 0, failed_messages(launched) or launched["stderr"]
    plan = task_result(launched, "Launch the instances")
    assert plan["decision"]["hosts_total"] == 3 and set(plan["timing"]) >= {"read_s", "decide_s", "claim_s"}
    instances = rows(url, "SELECT name, host, state, uuid FROM instances ORDER BY name")
    assert [(row["name"], row["state"]) for row in instances] == [
        ("led-1", "ACTIVE"), ("led-2", "ACTIVE"), ("led-3", "ACTIVE")]
    domains = running(lab)
    for row in instances:
        assert row["name"] in domains[row["host"]], (row, domains)

    # An inventory that lists the hypervisors without connecting, at URIs where nothing answers:
    # the launch still builds, through the URIs the last sync recorded.
    dead = unreachable_inventory(lab, tmp_path, url)
    more = lab.finish(lab.start_playbook("launch.yml", "-e", json.dumps({"name": "led", "count": 4, "flavor": TINY}),
                                         inventory=dead))
    assert more["rc"] == 0, failed_messages(more) or more["stderr"]
    [fourth] = rows(url, "SELECT host, state FROM instances WHERE name = 'led-4'")
    assert fourth["state"] == "ACTIVE" and "led-4" in running(lab)[fourth["host"]]

    deleted = lab.finish(lab.start_playbook("delete.yml", "-e", "name=led", inventory=bare))
    assert deleted["rc"] == 0, failed_messages(deleted)
    assert rows(url, "SELECT * FROM instances") == [] and rows(url, "SELECT * FROM claims") == []
    assert not any(name.startswith("led-") for names in running(lab).values() for name in names)


def test_a_hypervisor_not_synced_for_service_down_time_is_never_picked_and_the_failure_says_why(lab, tmp_path):
    url = f"sqlite:///{tmp_path}/ledger.sqlite3"
    age_s = 6
    bare = controller_inventory(lab, tmp_path, url, berth_service_down_time=age_s)
    lab.gather("-e", f"berth_ledger_url={url}")
    time.sleep(age_s + 1)

    stale = lab.finish(lab.start_playbook("launch.yml", "-e", json.dumps({"name": "old", "flavor": TINY}),
                                          inventory=bare))
    assert stale["rc"] != 0
    [message] = failed_messages(stale)
    assert message.startswith(f"no valid host: 0/3 hosts are available for instance 1 of 1: 3 stale (not "
                              f"synced for over {age_s} s)"), message
    for host in lab.hosts:
        assert f"{host}: stale: last synced " in message and f"s ago (service_down_time {age_s} s)" in message
    assert rows(url, "SELECT * FROM instances") == [] and rows(url, "SELECT * FROM claims") == []

    # hv3 alone is synced again: the launch goes there, and says why not elsewhere.
    lab.gather("-e", f"berth_ledger_url={url}", "--limit", "hv3")
    fresh = lab.finish(lab.start_playbook("launch.yml", "-e", json.dumps({"name": "old", "flavor": TINY}),
                                          inventory=bare))
    assert fresh["rc"] == 0, failed_messages(fresh)
    plan = task_result(fresh, "Launch the instances")
    assert [p["host"] for p in plan["placements"]] == ["hv3"]
    assert sorted((r["host"], r["reason"]) for r in plan["decision"]["rejections"]) == [
        ("hv1", "host_stale"), ("hv2", "host_stale")]
    assert lab.finish(lab.start_playbook("delete.yml", "-e", "name=old", inventory=bare))["rc"] == 0


def test_gather_slices_at_once_with_a_launch_leave_the_postgresql_ledger_whole(lab, postgres, tmp_path):
    url = postgres.create_database("slices")
    use = ("-e", f"berth_ledger_url={url}")
    lab.gather(*use)
    try:
        halves = (sorted(lab.hosts)[:1], sorted(lab.hosts)[1:])
        before = {row["name"]: row["synced_at"] for row in rows(url, "SELECT name, synced_at FROM hypervisors")}
        for round_ in range(2):
            procs = [lab.start_playbook("gather.yml", *use, "--limit", ",".join(half)) for half in halves]
            procs.append(lab.start_playbook("launch.yml", *use, "-e", json.dumps(
                {"name": f"slice{round_}", "count": 2, "flavor": TINY})))
            for proc in procs:
                output = lab.finish(proc)
                assert output["rc"] == 0, failed_messages(output) or output["stderr"]

        hypervisors = {row["name"]: row for row in rows(url, "SELECT * FROM hypervisors")}
        # Neither slice marked the other's hypervisors missing: all are up, synced by this run.
        assert {name: row["sync_status"] for name, row in hypervisors.items()} == {name: "up" for name in lab.hosts}
        assert all(row["synced_at"] > before[name] for name, row in hypervisors.items())
        # Their capacity is what the hypervisors report (as the last sync read it).
        for name, row in hypervisors.items():
            cpus = int(next(line.split(":")[1] for line in lab.virsh(name, "nodeinfo").splitlines()
                            if line.startswith("CPU(s)")))
            assert (row["vcpus_total"], row["cpu_allocation_ratio"], row["reserved_host_memory_mb"]) == (cpus, 4.0, 512)
        # No claim was lost: each of the four instances is ACTIVE with one claim, where its domain runs,
        # and each hypervisor's usage summary is the sum of its claims.
        instances = rows(url, "SELECT uuid, name, host, state FROM instances")
        claims = rows(url, "SELECT instance_uuid, hypervisor_uuid, vcpus, memory_mb FROM claims")
        assert sorted(row["name"] for row in instances) == ["slice0-1", "slice0-2", "slice1-1", "slice1-2"]
        assert {row["state"] for row in instances} == {"ACTIVE"}
        assert sorted(claim["instance_uuid"] for claim in claims) == sorted(row["uuid"] for row in instances)
        domains = running(lab)
        for row in instances:
            assert row["name"] in domains[row["host"]]
        for name, row in hypervisors.items():
            held = [claim for claim in claims if claim["hypervisor_uuid"] == row["uuid"]]
            assert row["vcpus_used"] == sum(claim["vcpus"] for claim in held), name
            assert row["memory_mb_used"] == sum(claim["memory_mb"] for claim in held), name
        ledger = Ledger(url).open()
        assert {h["host"]: h["usage"]["num_instances"] for h in ledger.hypervisors()} == {
            name: sum(1 for row in instances if row["host"] == name) for name in lab.hosts}
        ledger.close()
    finally:
        # Whatever failed above, the lab's other tests must not find these instances.
        for round_ in range(2):
            lab.playbook("delete.yml", *use, "-e", f"name=slice{round_}")
