"""The rebalance operation (operations/rebalance.py) through fake hypervisors (fake_hypervisor.py)
and a real SQLite ledger: check mode plans and moves nothing; the real run makes the plan's moves
in order through the migrate move, the ledger records when each moved, and a second run moves
nothing; a move that fails stops the run there, naming what moved and what was not tried. The
same through real libvirt and ansible-playbook: tests/integration/test_rebalance.py."""

from __future__ import annotations

import pytest
from fake_hypervisor import FakeHypervisor, connect_to, domain_xml, synced_state

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import root_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.rebalance import Rebalance
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

TINY = Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1)
# Instances without a build record (as adopted ones): moved with their own definition, cold.
ARGS = {"goal": "spread", "host": None, "mode": "cold", "carry_definition": True, "template": None, "timeout": 30}
# Four 512 MB instances on one 8 GiB host of three: an imbalance of 0.118; two moves bring it to 0.029.
SETTINGS = Settings(rebalance_threshold=0.05, rebalance_min_gain=0.0, rebalance_cooldown_seconds=3600)


@pytest.fixture
def stacked(tmp_path):
    """web-1 .. web-4 ACTIVE on hv1, their domains there with their root volumes; hv2 and hv3 empty."""
    ledger = Ledger(f"sqlite:///{tmp_path}/ledger.sqlite3").open()
    ledger.sync_hypervisors([synced_state(name, f"hv-{index}") for index, name in enumerate(("hv1", "hv2", "hv3"), 1)])
    rows = ledger.claim([{"name": f"web-{index}", "host": "hv1", "hypervisor_uuid": "hv-1"} for index in range(1, 5)],
                        TINY, "launch")
    hypervisors = {name: FakeHypervisor(name) for name in ("hv1", "hv2", "hv3")}
    for row in rows:
        ledger.mark_active(row["uuid"])
        hypervisors["hv1"].add_volume(root_volume_name(row["uuid"]), capacity_mb=1024, data=b"disk")
        hypervisors["hv1"].add_domain(domain_xml(row["name"], row["uuid"], disks=(root_volume_name(row["uuid"]),)))
    yield ledger, hypervisors
    ledger.close()


def rebalance(ledger, hypervisors, check_mode=False, settings=SETTINGS, **args):
    return Rebalance({**ARGS, **args}, settings, ledger, {}, check_mode,
                     connect=connect_to(*hypervisors.values())).run()


def hosts(ledger):
    return {row["name"]: row["host"] for row in ledger.instances()}


def test_check_mode_plans_and_the_real_run_makes_exactly_those_moves_then_none(stacked):
    ledger, hypervisors = stacked
    dry = rebalance(ledger, hypervisors, check_mode=True)
    moves = [(move["name"], move["from_host"], move["to_host"]) for move in dry["plan"]["moves"]]
    assert len(moves) == 2 and {to for _name, _source, to in moves} == {"hv2", "hv3"}
    assert dry["moved"] == [] and set(hosts(ledger).values()) == {"hv1"}
    assert dry["lines"][0].startswith("spread: imbalance 0.1179 now, 0.0295 after 2 move(s)")

    real = rebalance(ledger, hypervisors)
    assert [(move["name"], move["from_host"], move["to_host"]) for move in real["moved"]] == moves
    assert real["changed"] and real["imbalance_now"] == pytest.approx(0.0295, abs=1e-4)
    where = hosts(ledger)
    for name, _source, destination in moves:
        assert where[name] == destination
        assert ledger.instances([name])[0]["moved_at"] is not None
        uuid = ledger.instances([name])[0]["uuid"]
        assert hypervisors[destination].domain_state(uuid) is not None and hypervisors["hv1"].domain_state(uuid) is None

    again = rebalance(ledger, hypervisors)
    assert again["plan"]["moves"] == [] and not again["changed"] and hosts(ledger) == where


def test_the_cooldown_keeps_the_moved_instances_where_they_are(stacked):
    ledger, hypervisors = stacked
    rebalance(ledger, hypervisors)
    # Everything moved back by hand onto one host would be uneven again; those just moved stay.
    plan = rebalance(ledger, hypervisors, check_mode=True, settings=Settings(rebalance_threshold=0.0))["plan"]
    held = {item["name"]: item["reason"] for item in plan["held"]}
    assert all("within the cooldown of 3600 s" in held[name] for name, host in hosts(ledger).items() if host != "hv1")


def test_a_failed_move_stops_the_run_and_says_what_moved_and_what_was_not_tried(stacked):
    ledger, hypervisors = stacked
    plan = rebalance(ledger, hypervisors, check_mode=True)["plan"]["moves"]
    first, second = plan
    hypervisors[second["to_host"]].faults["define"] = HypervisorError(second["to_host"], "internal error: injected")
    result = rebalance(ledger, hypervisors)
    assert result["failed"] and result["failed_move"] == second["name"] and result["not_tried"] == []
    assert result["msg"].startswith(f"move 2 of 2 failed, {second['name']} stays on hv1: ")
    assert f"moved before it: {first['name']}" in result["msg"]
    assert [move["name"] for move in result["moved"]] == [first["name"]]
    where = hosts(ledger)
    assert where[first["name"]] == first["to_host"] and where[second["name"]] == "hv1"
