"""The everyday commands on the real lab fleet, as the README shows them: a launch given its dict and
list options as JSON strings (an AWX survey's) prints its decision id and no Ansible warning;
list.yml, capacity.yml and explain.yml then print what the ledger holds, row by row; the
deprecated -e name= still deletes, saying so."""

from __future__ import annotations

import json
import re
import subprocess

import fleet
import pytest
from conftest import REPO, ansible_env, failed_messages, task_result

pytestmark = pytest.mark.integration


def shown(output: dict, task: str) -> list[str]:
    return task_result(output, task)["msg"]


def table_rows(lines: list[str], header_start: str) -> dict[str, list[str]]:
    """The rows of the table printed in ``lines`` under the header that starts with ``header_start``,
    by first cell, each split into its cells (cells are one word each in these tables)."""
    start = next(index for index, line in enumerate(lines) if line.startswith(header_start))
    rows = {}
    for line in lines[start + 1:]:
        cells = line.split()
        if not cells or cells[0].endswith(":"):
            break
        rows[cells[0]] = cells
    return rows


def quiet(output: dict) -> None:
    """Nothing Ansible warns about, in either stream."""
    text = json.dumps(output)
    assert "[WARNING]" not in text and "WARNING" not in output["stderr"], output["stderr"]


def test_the_everyday_commands_print_what_the_ledger_holds(clean_lab):
    lab = clean_lab
    quiet(lab.gather())
    # The options as an AWX survey passes them: text. The lab's network, so that guests get addresses.
    launch = lab.playbook("launch.yml", "-e", "server_name=day", "-e", "count=3", "-e", json.dumps({
        "networks": json.dumps([{"type": "network", "name": fleet.NETWORK_NAME}]),
        "metadata": json.dumps({"team": "blue"}),
        "scheduler_hints": json.dumps({}),
    }))
    assert launch["rc"] == 0, failed_messages(launch)
    quiet(launch)
    launched = task_result(launch, "Launch the instances")
    decision_id = launched["decision_id"]
    assert f"decision {decision_id} (playbooks/explain.yml -e instance=<name> explains it)" in \
        shown(launch, "Show where the instances run")

    hypervisors = {row["uuid"]: row["name"] for row in lab.ledger_rows("hypervisors")}
    instances = {row["name"]: row for row in lab.ledger_rows("instances")}
    assert sorted(instances) == ["day-1", "day-2", "day-3"]

    # list.yml, with the lab's instances inventory for the addresses.
    listed = lab.playbook("list.yml", "-i", str(fleet.instances_inventory_dir(lab.dir)))
    assert listed["rc"] == 0, failed_messages(listed)
    quiet(listed)
    lines = shown(listed, "Show the instances")
    assert lines[0] == f"3 instance(s) in the ledger at {fleet.ledger_url(lab.dir)}"
    rows = table_rows(lines, "instance")
    assert sorted(rows) == sorted(instances)
    for name, row in instances.items():
        cells = rows[name]
        assert cells[1:4] == [row["host"], row["state"], row["flavor_name"]], cells
        assert re.fullmatch(r"10\.2[0-4][0-9]\.[0-9]+\.[0-9]+", cells[4]), cells  # its DHCP lease
        assert re.fullmatch(r"[0-9]+[smhd]( [0-9]+[smhd])?", " ".join(cells[5:])), cells
    registered = task_result(listed, "Read the instances from the ledger")["instances"]
    assert [row["uuid"] for row in registered] == [instances[name]["uuid"] for name in sorted(instances)]

    # capacity.yml: each hypervisor's usage is its claims (a clean lab has no other domains).
    room = lab.playbook("capacity.yml", "-e", "flavor=m1.small")
    assert room["rc"] == 0, failed_messages(room)
    quiet(room)
    answer = task_result(room, "Count the room per hypervisor")
    lines = shown(room, "Show the room per hypervisor")
    rows = table_rows(lines, "hypervisor")
    assert sorted(rows) == sorted(hypervisors.values())
    claims = lab.ledger_rows("claims")
    for host in answer["hosts"]:
        held = [claim for claim in claims if hypervisors[claim["hypervisor_uuid"]] == host["host"]]
        assert host["vcpus_used"] == sum(claim["vcpus"] for claim in held)
        cells = rows[host["host"]]
        assert cells[1] == f"{host['vcpus_used']}/{host['vcpus_limit']:g}"
        assert int(cells[2].split("/")[0]) == host["memory_mb_used"]
        assert cells[4:7] == [str(host["fits"]), host["limited_by"], str(host["failed_builds"])]
        assert f"{host['host']}: once {host['fits']} more are placed: " in " ".join(lines)
    assert lines[0].startswith(f"{answer['total']} more m1.small fit on 3 hosts (usage from the ledger at "
                               f"{fleet.ledger_url(lab.dir)})")

    # Ad hoc, with the lab's inventory: its ledger (berth_ledger_url), not the default one.
    adhoc = subprocess.run([str(REPO / ".venv" / "bin" / "ansible"), "-i", lab.inventory, "localhost", "-m",
                            "berth.fleet.capacity", "-a", "flavor=m1.small"], cwd=REPO, env=ansible_env(),
                           capture_output=True, text=True, timeout=300, check=False)
    assert adhoc.returncode == 0 and "WARNING" not in adhoc.stdout + adhoc.stderr, adhoc.stdout + adhoc.stderr
    assert f"ledger: {fleet.ledger_url(lab.dir)}" in adhoc.stdout and f"summary: {answer['total']} more" in adhoc.stdout

    # explain.yml: the launch's decision, for day-2 alone.
    why = lab.playbook("explain.yml", "-e", "instance=day-2")
    assert why["rc"] == 0, failed_messages(why)
    quiet(why)
    lines = shown(why, "Show the decision")
    decision = task_result(why, "Find the decision that placed it")["decisions"][0]
    assert decision["id"] == decision_id and decision["request"]["names"] == ["day-1", "day-2", "day-3"]
    assert lines[0].startswith(f"decision {decision_id} (claimed, ")
    assert "names day-1, day-2, day-3" in lines[1] and lines[2] == "filters: 3 hosts, none removed"
    host = instances["day-2"]["host"]
    placed = [line for line in lines if " -> " in line]
    assert len(placed) == 1 and placed[0].startswith(f"day-2 -> {host}: weight ") and "RAMWeigher" in placed[0]
    runners = [line.split()[1].rstrip(":") for line in lines if line.startswith("  runner-up ")]
    assert len(runners) == 2 and host not in runners
    assert lines[-1] == f"day-2 is ACTIVE on {host} now (the ledger at {fleet.ledger_url(lab.dir)})"

    # The deprecated -e name= still works, and says so.
    gone = lab.playbook("delete.yml", "-e", "name=day")
    assert gone["rc"] == 0, failed_messages(gone)
    assert shown(gone, "Say that -e name= is deprecated").startswith("DEPRECATED: -e name=day is -e server_name=day")
    assert lab.ledger_rows("instances") == []
