"""evacuate.yml on the real lab fleet (issue 35): hv2's libvirtd stops, the sync marks it down,
an evacuation without fencing is refused saying why, with the operator's confirmation every
instance of hv2 is rebuilt and boots on another host (its anti-affinity group held, the ledger's
claims matching libvirt), and once hv2 answers again the next sync removes what they left there.
Then the same with the operator's fence command (a script of this test's own) doing the fencing.
hv2 and hv3 are started again in a finally: the other tests share this fleet."""

from __future__ import annotations

import json
import time

import check
import fleet
import pytest
from conftest import drift, failed_messages, task_result
from test_seed import lab_subnet_prefix, make_key, seed_files, wait_for_lines

pytestmark = pytest.mark.integration

BOOT_TIMEOUT_S = 180
# The operator's service_down_time for these runs: a host counts as down half a minute after its
# last sync instead of ten minutes, and the hosts that answer stay up for the length of an
# evacuation after the sync before it.
SERVICE_DOWN_TIME_S = 30
SHORT = ("-e", f"berth_service_down_time={SERVICE_DOWN_TIME_S}")
EVACUATE_TASK = "Evacuate the hypervisor"


def row_of(lab, name: str) -> dict:
    return next(r for r in lab.ledger_rows("instances") if r["name"] == name)


def launch_on(lab, host: str, name: str, **options) -> dict:
    launched = lab.playbook("launch.yml", "-e", json.dumps({"name": name, "count": 1, "berth_force_hosts": [host],
                                                            **options}))
    assert launched["rc"] == 0, failed_messages(launched)
    return row_of(lab, f"{name}-1")


def assert_runs_only_where_the_ledger_says(lab, name: str, dead: str) -> dict:
    """The instance is ACTIVE on a host other than ``dead``, its domain runs there and nowhere
    else that answers, and its one claim is there."""
    row = row_of(lab, name)
    assert row["state"] == "ACTIVE" and row["host"] != dead
    assert lab.virsh(row["host"], "domstate", row["uuid"]).strip() == "running"
    for host in set(lab.hosts) - {row["host"], dead}:
        assert row["uuid"] not in lab.virsh(host, "list", "--all", "--uuid")
    claims = [c["hypervisor_uuid"] for c in lab.ledger_rows("claims") if c["instance_uuid"] == row["uuid"]]
    assert claims == [fleet.host_uuid(lab.dir, row["host"])]
    return row


def go_down(lab, host: str) -> None:
    """``host``'s daemon stops (its guests keep running, as on a host cut off from the network);
    the next sync marks it down; once its last good sync is older than SERVICE_DOWN_TIME_S, a
    sync again, so that the others are fresh for the evacuation that follows."""
    lab.stop_daemon(host)
    gathered = lab.gather(*SHORT)
    assert any(line.startswith(f"{host}: did not answer") for line in drift(gathered)), drift(gathered)
    time.sleep(SERVICE_DOWN_TIME_S + 1)
    lab.gather(*SHORT)


USER_DATA = "#cloud-config\n# evacuation-user-data\n"


def test_a_dead_host_s_instances_are_rebuilt_elsewhere_once_it_is_fenced(lab, tmp_path):
    lab.server_group("evgrp", "present")
    _key, public = make_key(tmp_path, "evkey")
    prefix = lab_subnet_prefix(lab, "hv2")
    address = f"{prefix}.7"  # below the lab network's DHCP range
    launch_on(lab, "hv1", "evg", server_group="evgrp")
    before = {
        "eva-1": launch_on(lab, "hv2", "eva", server_group="evgrp"),
        "evs-1": launch_on(lab, "hv2", "evs", ssh_authorized_keys=[public], cdrom_bus="ide", user_data=USER_DATA, networks=[
            {"type": "network", "name": fleet.NETWORK_NAME, "addresses": [f"{address}/24"], "gateway": f"{prefix}.1"}]),
        "evp-1": launch_on(lab, "hv2", "evp"),
    }
    lab.gather()
    go_down(lab, "hv2")
    try:
        refused = lab.playbook("evacuate.yml", "-e", "hypervisor=hv2", *SHORT)
        assert refused["rc"] != 0
        assert "hv2 is not fenced: nothing says it cannot still run its instances" in " ".join(
            failed_messages(refused)), failed_messages(refused)
        assert all(row_of(lab, name)["host"] == "hv2" for name in before)

        done = lab.playbook("evacuate.yml", "-e", "hypervisor=hv2", "-e", "fenced=true", "-e", "fenced_by=lab-test",
                            *SHORT)
        assert done["rc"] == 0, failed_messages(done)
        plan = task_result(done, "Plan the evacuation")
        assert [result["outcome"] for result in plan["results"]] == ["would evacuate"] * 3
        assert all("the data of its root disk on hv2 is lost" in line for line in plan["report"])
        result = task_result(done, EVACUATE_TASK)
        assert [(r["name"], r["outcome"]) for r in result["results"]] == [
            ("eva-1", "evacuated"), ("evp-1", "evacuated"), ("evs-1", "evacuated")]
        [hv2_row] = [r for r in lab.ledger_rows("hypervisors") if r["name"] == "hv2"]
        assert (hv2_row["fence_method"], hv2_row["fenced_by"]) == ("confirmed", "lab-test")

        after = {name: assert_runs_only_where_the_ledger_says(lab, name, "hv2") for name in before}
        # The anti-affinity group holds: evg-1 is on hv1.
        assert after["eva-1"]["host"] == "hv3"
        for name, row in after.items():
            assert row["uuid"] == before[name]["uuid"]
            log = fleet.log_dir(lab.dir, row["host"]) / f"{name}.serial.log"
            assert check.wait_for_marker(log, row["uuid"], BOOT_TIMEOUT_S), f"{name} did not boot on {row['host']}"
        # The static address and the key reached the rebuilt guest through its new seed.
        log = fleet.log_dir(lab.dir, after["evs-1"]["host"]) / "evs-1.serial.log"
        text = wait_for_lines(log, ["BERTH-GUEST-KEYS 1", f"BERTH-GUEST-NET eth0 {address}"], BOOT_TIMEOUT_S)
        assert "BERTH-GUEST-KEYS 1" in text and f"BERTH-GUEST-NET eth0 {address}" in text
        # Its user_data too, kept by the ledger apart from what the modules list.
        seed = seed_files(lab, after["evs-1"]["host"], f"berth-{after['evs-1']['uuid']}-seed.iso", tmp_path)
        assert seed["user-data"] == USER_DATA
        assert "evacuation-user-data" not in json.dumps(result)
    finally:
        lab.start_daemon("hv2")

    # hv2 is back with the old copies (they ran on while its daemon was away): the next sync
    # removes them and says so, and hv2 is no longer fenced.
    old = {name: row["uuid"] for name, row in before.items()}
    assert all(uuid in lab.virsh("hv2", "list", "--all", "--uuid") for uuid in old.values())
    gathered = lab.gather()
    removed = [line for line in drift(gathered) if line.startswith("hv2: evacuated, removed: ")]
    assert len(removed) == 3, drift(gathered)
    listed = lab.virsh("hv2", "list", "--all", "--uuid")
    lab.virsh("hv2", "pool-refresh", "default")
    volumes = lab.virsh("hv2", "vol-list", "default")
    assert not any(uuid in listed or uuid in volumes for uuid in old.values())
    [hv2_row] = [r for r in lab.ledger_rows("hypervisors") if r["name"] == "hv2"]
    assert hv2_row["fenced_at"] is None
    for name in before:
        assert_runs_only_where_the_ledger_says(lab, name, "hv2")
    for name in ("eva", "evs", "evp", "evg"):
        assert lab.playbook("delete.yml", "-e", f"name={name}")["rc"] == 0
    lab.server_group("evgrp", "absent")


def test_the_operator_s_fence_command_fences_the_host(lab, tmp_path):
    ran = tmp_path / "fenced-hosts"
    script = tmp_path / "fence.sh"
    script.write_text(f'#!/bin/sh\necho "$1" >> {ran}\necho "chassis power off: $1"\n')
    script.chmod(0o755)
    row = launch_on(lab, "hv3", "evf")
    lab.gather()
    go_down(lab, "hv3")
    command = ("-e", json.dumps({"berth_fence_command": [str(script), "{hypervisor}"]}))
    try:
        done = lab.playbook("evacuate.yml", "-e", "hypervisor=hv3", *command, *SHORT)
        assert done["rc"] == 0, failed_messages(done)
        # The plan (check mode) did not run it; the evacuation ran it once.
        assert ran.read_text() == "hv3\n"
        result = task_result(done, EVACUATE_TASK)
        assert result["fencing"]["fenced"]["method"] == "fence_command"
        assert result["fencing"]["fenced"]["output"] == "chassis power off: hv3\\x0a"
        assert [r["outcome"] for r in result["results"]] == ["evacuated"]
        moved = assert_runs_only_where_the_ledger_says(lab, "evf-1", "hv3")
        assert moved["uuid"] == row["uuid"]
    finally:
        lab.start_daemon("hv3")
    gathered = lab.gather()
    assert any(line.startswith("hv3: evacuated, removed: domain evf-1") for line in drift(gathered)), drift(gathered)
    assert row["uuid"] not in lab.virsh("hv3", "list", "--all", "--uuid")
    assert lab.playbook("delete.yml", "-e", "name=evf")["rc"] == 0
