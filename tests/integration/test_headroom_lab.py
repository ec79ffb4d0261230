"""Failover headroom on the real lab fleet through ansible-playbook (issue 35, item 4): the
operator keeps room for one hypervisor's HA instances (berth_failover_hosts: 1 in the
inventory); a launch that would take that room is refused before anything is claimed, naming the
hypervisors whose loss could then not be absorbed; capacity.yml reports the headroom, held, then
(after the operator lets a launch through with berth_failover_enforce=warn) not held, naming them.

Each hypervisor is given 400 MB of room (its reserved memory is its total less 400 MB, from the
ledger's first sync), so one 256 MB instance fits per host: two HA instances on two hosts, the
third host's room is what restarting either needs. The domains run no OS (guest_os=False)."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import REPO, ansible_env, failed_messages, task_result

pytestmark = pytest.mark.integration

ROOM_MB = 400
FLAVOR = {"name": "ha256", "vcpus": 1, "memory_mb": 256, "root_gb": 1}


def run(lab, playbook: str, inventory: str, *extra: str) -> dict:
    return lab.finish(lab.start_playbook(playbook, *extra, inventory=inventory))


def instance_ha(inventory: str, arguments: str, *flags: str) -> str:
    """berth.fleet.instance_ha run ad hoc (Ansible's minimal output: 'localhost | CHANGED => ...')."""
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "ansible"), "-i", inventory, "localhost", *flags, "-m",
                           "berth.fleet.instance_ha", "-a", arguments],
                          cwd=REPO, env={**ansible_env(), "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.minimal"},
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.split(" => ")[0]


def launch(lab, inventory: str, **extra) -> dict:
    return run(lab, "launch.yml", inventory, "-e", json.dumps({"flavor": FLAVOR, **extra}))


def test_a_launch_that_takes_the_failover_room_is_refused_and_capacity_shows_the_headroom(clean_lab, tmp_path):
    lab = clean_lab
    ledger = tmp_path / "ledger.sqlite3"
    url = f"sqlite:///{ledger}"
    first = lab.inventory_copy(tmp_path / "first", url, guest_os=False)
    assert run(lab, "gather.yml", first)["rc"] == 0
    totals = {row["name"]: row["total_usable_ram_mb"] for row in lab.ledger_rows("hypervisors", str(ledger))}
    inventory = lab.inventory_copy(tmp_path / "kept", url, guest_os=False, settings={
        host: {"reserved_host_memory_mb": total - ROOM_MB} for host, total in totals.items()})
    with open(f"{inventory}/group_vars/all.yml", "a") as variables:
        variables.write("berth_failover_hosts: 1\n")
    assert run(lab, "gather.yml", inventory)["rc"] == 0

    ha = launch(lab, inventory, server_name="ha", count=2, ha=True, ha_priority=10)
    assert ha["rc"] == 0, failed_messages(ha)
    placed = {row["name"]: row for row in lab.ledger_rows("instances", str(ledger))}
    assert {(name, row["ha"], row["ha_priority"]) for name, row in placed.items()} == {("ha-1", 1, 10), ("ha-2", 1, 10)}
    ha_hosts = sorted(row["host"] for row in placed.values())
    [spare] = sorted(set(lab.hosts) - set(ha_hosts))

    shown = run(lab, "capacity.yml", inventory)
    assert shown["rc"] == 0, failed_messages(shown)
    assert task_result(shown, "Show the failover headroom")["msg"] == [
        "failover headroom for 1 host (2 HA instances, 2 losses checked): held"]

    refused = launch(lab, inventory, server_name="app")
    assert refused["rc"] != 0
    [message] = failed_messages(refused)
    assert message.startswith(f"the failover headroom (berth_failover_hosts=1) would be broken: with app-1 on "
                              f"{spare}, the loss of {ha_hosts[0]} could not be absorbed: "), message
    assert f"the loss of {ha_hosts[1]} could not be absorbed: " in message and "Nothing was claimed" in message
    assert "insufficient RAM" in message
    assert sorted(row["name"] for row in lab.ledger_rows("instances", str(ledger))) == ["ha-1", "ha-2"]
    assert "app-1" not in lab.virsh(spare, "list", "--all", "--name").split()

    # The operator lets it through: it launches, says why it should not have, and capacity.yml
    # names the hosts whose loss could no longer be absorbed.
    warned = launch(lab, inventory, server_name="app", berth_failover_enforce="warn")
    assert warned["rc"] == 0, failed_messages(warned)
    assert "launched anyway" in warned["stderr"] + json.dumps(task_result(warned, "Launch the instances"))
    shown = run(lab, "capacity.yml", inventory)
    lines = task_result(shown, "Show the failover headroom")["msg"]
    assert lines[0].startswith("failover headroom for 1 host (2 HA instances, 2 losses checked): NOT held; "
                               f"the loss of {ha_hosts[0]} could not be absorbed: "), lines
    assert lines[1] == f"single hypervisors whose loss could not be absorbed: {', '.join(ha_hosts)}"
    assert task_result(shown, "Count the room per hypervisor")["headroom"]["single_hosts_unabsorbed"] == ha_hosts

    # ha-1 is no longer HA (berth.fleet.instance_ha: check mode, the change, then no change):
    # only ha-2's host's loss is left to absorb, and still cannot be.
    arguments = "name=ha-1 ha=false ledger_url={{ berth_ledger_url }}"
    assert instance_ha(inventory, arguments, "--check") == "localhost | CHANGED"
    assert {row["name"]: row["ha"] for row in lab.ledger_rows("instances", str(ledger))}["ha-1"] == 1
    assert instance_ha(inventory, arguments) == "localhost | CHANGED"
    assert instance_ha(inventory, arguments) == "localhost | SUCCESS"
    assert {row["name"]: row["ha"] for row in lab.ledger_rows("instances", str(ledger))}["ha-1"] == 0
    headroom = task_result(run(lab, "capacity.yml", inventory), "Count the room per hypervisor")["headroom"]
    assert (headroom["ha_instances"], headroom["single_hosts_unabsorbed"]) == (1, [placed["ha-2"]["host"]])
