"""Host rules on the real lab fleet, through ansible-playbook and berth.fleet.host_rule: a must
rule pins a labelled launch to its aggregate, a must_not rule keeps another launch off a host,
each explanation names the rule, and a move is held to them - a scheduled one finds no other
host, one to a named host is refused by its claim."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import REPO, ansible_env, failed_messages, rows, task_result

pytestmark = pytest.mark.integration

TINY = {"vcpus": 1, "memory_mb": 128, "root_gb": 1}
# hv2 has the fast disks; hv1 is old.
AGGREGATES = {"fast": {"hosts": ["hv2"], "metadata": {}}, "old": {"hosts": ["hv1"], "metadata": {}}}


def host_rule(inventory: str, check: bool = False, **args: str) -> dict:
    """berth.fleet.host_rule as an operator runs it ad hoc; its result."""
    proc = subprocess.run(
        [str(REPO / ".venv" / "bin" / "ansible"), "-i", inventory, "localhost", "-m", "berth.fleet.host_rule",
         "-a", json.dumps({**args, "ledger_url": "{{ berth_ledger_url }}"}), *(["--check"] if check else [])],
        cwd=REPO, env={**ansible_env(), "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1"}, capture_output=True, text=True,
        timeout=120, check=False)
    assert proc.stdout, proc.stderr
    output = json.loads(proc.stdout)
    [play] = output["plays"]
    [task] = play["tasks"]
    return task["hosts"]["localhost"]


def test_rules_pin_a_labelled_launch_and_keep_another_off_a_host_and_hold_for_moves(lab, tmp_path):
    url = f"sqlite:///{tmp_path}/ledger.sqlite3"
    inventory = lab.inventory_copy(tmp_path, url, aggregates=AGGREGATES, guest_os=False)
    synced = lab.finish(lab.start_playbook("gather.yml", inventory=inventory))
    assert synced["rc"] == 0, failed_messages(synced)

    def playbook(name: str, *extra: str, check: bool = False) -> dict:
        return lab.finish(lab.start_playbook(name, *extra, *(["--check"] if check else []), inventory=inventory))

    pin = {"name": "db-on-fast", "kind": "must", "aggregate": "fast", "instance_label": "db"}
    # The operator writes the rule: check mode says so and writes nothing, the run writes it,
    # a second run changes nothing.
    dry = host_rule(inventory, check=True, **pin)
    assert dry["changed"] is True and rows(url, "host_rules") == []
    written = host_rule(inventory, **pin)
    assert written["changed"] is True and written["rule"]["kind"] == "must"
    assert host_rule(inventory, **pin)["changed"] is False
    keep_off = host_rule(inventory, name="web-not-old", kind="must_not", aggregate="old", instance_name="web-*")
    assert keep_off["changed"] is True
    assert [row["name"] for row in rows(url, "host_rules")] == ["db-on-fast", "web-not-old"]

    try:
        # The requester picks the label; the rule puts both instances on hv2.
        db = playbook("launch.yml", "-e", json.dumps({"name": "db", "count": 2, "flavor": TINY, "labels": ["db"]}))
        assert db["rc"] == 0, failed_messages(db)
        placed = {row["name"]: row for row in rows(url, "instances")}
        assert {placed[name]["host"] for name in ("db-1", "db-2")} == {"hv2"}
        assert json.loads(placed["db-1"]["request"])["labels"] == ["db"]
        rejections = {(item["host"], item["message"])
                      for item in task_result(db, "Launch the instances")["decision"]["rejections"]}
        assert rejections == {(host, "host rule: db-on-fast says its instances must be in aggregate fast")
                              for host in ("hv1", "hv3")}

        web = playbook("launch.yml", "-e", json.dumps({"name": "web", "count": 2, "flavor": TINY}))
        assert web["rc"] == 0, failed_messages(web)
        hosts = {row["host"] for row in rows(url, "instances") if row["name"].startswith("web-")}
        assert hosts and "hv1" not in hosts
        decision = task_result(web, "Launch the instances")["decision"]
        assert ("hv1", "host rule: web-not-old says its instances must not be in aggregate old") in {
            (item["host"], item["message"]) for item in decision["rejections"]}

        # A move keeps the rule: the scheduler finds no other host in aggregate fast...
        moved = playbook("migrate.yml", "-e", "instance=db-1", check=True)
        assert moved["rc"] != 0
        assert "against host rule db-on-fast" in " ".join(failed_messages(moved)), failed_messages(moved)
        # ...and a host named by to_host, which skips the filters, is refused by the claim.
        named = playbook("migrate.yml", "-e", "instance=db-1", "-e", "to_host=hv3")
        assert named["rc"] != 0
        assert "db-1 would break host rule db-on-fast" in " ".join(failed_messages(named)), failed_messages(named)
        [db1] = [row for row in rows(url, "instances") if row["name"] == "db-1"]
        assert db1["host"] == "hv2" and "db-1" in lab.virsh("hv2", "list", "--name").split()
    finally:
        for name in ("db", "web"):
            lab.finish(lab.start_playbook("delete.yml", "-e", f"name={name}", inventory=inventory))
    gone = host_rule(inventory, name="web-not-old", state="absent")
    assert gone["changed"] is True and gone["rule"]["name"] == "web-not-old"
    assert host_rule(inventory, state="list")["rules"][0]["name"] == "db-on-fast"
