"""berth.fleet.server on the real lab fleet, through ansible-playbook: a named instance present
(check mode predicting the host a real run then picks, a second run unchanged), stopped, absent
(domain, volumes, claim and row gone), and bad input refused naming the field with nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import berth_volumes, rows, task_result

pytestmark = pytest.mark.integration

SERVER = str(Path(__file__).with_name("playbooks") / "server.yml")
TASK = "The server"


def run(lab, *extra: str, check: bool = False, diff: bool = False) -> dict:
    args = [arg for pair in (("-e", item) for item in extra) for arg in pair]
    output = lab.playbook(SERVER, *args, *(["--diff"] if diff else []), check=check)
    return task_result(output, TASK)


def ledger(lab, table: str) -> list[dict]:
    return rows(f"sqlite:///{lab.ledger_path}", table)


def test_server_present_check_mode_idempotent_stopped_absent(clean_lab):
    lab = clean_lab
    lab.gather()
    decisions_before = len(ledger(lab, "decisions"))

    planned = run(lab, "server_name=srv-1", "server_flavor=m1.tiny", check=True, diff=True)
    assert planned["changed"] is True and planned["instance"]["state"] == "PLANNED", planned
    # The ledger's before and after, then the domain it would define.
    ledger_diff, domain_diff = planned["diff"]
    assert ledger_diff["before"] == {"state": "absent"}
    assert (domain_diff["before"], domain_diff["after_header"]) == ("", f"srv-1 on {planned['instance']['host']} (planned)")
    assert "<name>srv-1</name>" in domain_diff["after"]
    assert not [row for row in ledger(lab, "instances") if row["name"] == "srv-1"]
    assert len(ledger(lab, "decisions")) == decisions_before  # check mode records nothing
    assert all(not volumes for volumes in berth_volumes(lab).values())

    made = run(lab, "server_name=srv-1", "server_flavor=m1.tiny")
    assert made["changed"] is True and not made.get("failed"), made
    instance = made["instance"]
    assert (instance["host"], instance["state"]) == (planned["instance"]["host"], "ACTIVE")
    assert isinstance(made["decision_id"], int)
    host, uuid = instance["host"], instance["uuid"]
    assert lab.virsh(host, "domstate", uuid).strip() == "running"
    [row] = [row for row in ledger(lab, "instances") if row["name"] == "srv-1"]
    assert (row["uuid"], row["state"]) == (uuid, "ACTIVE")
    assert [claim["hypervisor_uuid"] for claim in ledger(lab, "claims") if claim["instance_uuid"] == uuid] == [
        next(row["uuid"] for row in ledger(lab, "hypervisors") if row["name"] == host)]

    again = run(lab, "server_name=srv-1", "server_flavor=m1.tiny")
    assert again["changed"] is False and again["instance"]["uuid"] == uuid, again
    assert run(lab, "server_name=srv-1", check=True)["changed"] is False

    stopped = run(lab, "server_name=srv-1", "server_state=stopped", "server_shutdown_timeout=0")
    assert stopped["changed"] is True and stopped["instance"]["state"] == "STOPPED", stopped
    assert lab.virsh(host, "domstate", uuid).strip() == "shut off"
    assert run(lab, "server_name=srv-1", "server_state=stopped")["changed"] is False

    would = run(lab, "server_name=srv-1", "server_state=absent", check=True)
    assert would["changed"] is True
    assert lab.virsh(host, "list", "--all", "--uuid").split() == [uuid]

    gone = run(lab, "server_name=srv-1", "server_state=absent")
    assert gone["changed"] is True and gone["instance"] is None, gone
    assert lab.virsh(host, "list", "--all", "--uuid").split() == []
    assert not [volume for volume in berth_volumes(lab)[host] if uuid in volume]
    assert not [claim for claim in ledger(lab, "claims") if claim["instance_uuid"] == uuid]
    assert not [row for row in ledger(lab, "instances") if row["name"] == "srv-1"]
    assert run(lab, "server_name=srv-1", "server_state=absent")["changed"] is False


@pytest.mark.parametrize(("extra", "field"), [
    (("server_name=srv-2", "server_flavor=m1.nope"), "flavor"),
    (("server_name=Not_A_Label", "server_flavor=m1.tiny"), "name"),
], ids=["flavor", "name"])
def test_server_bad_input_names_the_field_and_writes_nothing(clean_lab, extra, field):
    lab = clean_lab
    lab.gather()
    before = {table: ledger(lab, table) for table in ("instances", "claims", "decisions", "artefacts")}
    refused = run(lab, *extra)
    assert refused["failed"] is True and refused["field"] == field, refused
    assert field in refused["msg"]
    assert {table: ledger(lab, table) for table in before} == before
    assert all(not volumes for volumes in berth_volumes(lab).values())
