"""rebalance.yml and drain.yml's plan on the real lab fleet: instances all on one host are spread
by exactly the moves the check run predicted, a second run moves nothing, and a drain moves each
instance where its plan said."""

from __future__ import annotations

import json

import pytest
from conftest import failed_messages, task_result

pytestmark = pytest.mark.integration

# Each lab host has 2 CPUs (a vCPU limit of 8): four 1-vCPU guests on one host are far from even.
THRESHOLD = {"berth_rebalance_threshold": 0.1, "berth_rebalance_cooldown_seconds": 0}


def hosts_of(lab, prefix: str) -> dict[str, str]:
    return {row["name"]: row["host"] for row in lab.ledger_rows("instances") if row["name"].startswith(prefix)}


def launch_on(lab, name: str, host: str, count: int) -> None:
    launched = lab.playbook("launch.yml", "-e", json.dumps({"name": name, "count": count,
                                                            "berth_force_hosts": [host]}))
    assert launched["rc"] == 0, failed_messages(launched)
    assert set(hosts_of(lab, f"{name}-").values()) == {host}


def test_rebalance_makes_the_moves_its_check_predicted_and_then_nothing(lab):
    launch_on(lab, "rbl", "hv1", 4)
    try:
        extra = ("-e", json.dumps(THRESHOLD))
        dry = lab.playbook("rebalance.yml", *extra, check=True)
        assert dry["rc"] == 0, failed_messages(dry)
        plan = task_result(dry, "Plan the moves")["plan"]
        predicted = [(move["name"], move["from_host"], move["to_host"]) for move in plan["moves"]]
        assert predicted and all(source == "hv1" for _name, source, _to in predicted)
        assert plan["imbalance_before"] > THRESHOLD["berth_rebalance_threshold"] >= plan["imbalance_after"]
        assert hosts_of(lab, "rbl-") == {f"rbl-{index}": "hv1" for index in range(1, 5)}  # check moved nothing

        real = lab.playbook("rebalance.yml", *extra)
        assert real["rc"] == 0, failed_messages(real)
        made = task_result(real, "Make the moves")
        assert [(move["name"], move["from_host"], move["to_host"]) for move in made["moved"]] == predicted
        assert made["imbalance_now"] <= THRESHOLD["berth_rebalance_threshold"]
        where = hosts_of(lab, "rbl-")
        for name, _source, destination in predicted:
            assert where[name] == destination
            assert name in lab.virsh(destination, "list", "--name").split()

        again = lab.playbook("rebalance.yml", *extra)
        assert again["rc"] == 0, failed_messages(again)
        assert task_result(again, "Plan the moves")["plan"]["moves"] == []
        assert hosts_of(lab, "rbl-") == where
    finally:
        assert lab.playbook("delete.yml", "-e", "name=rbl")["rc"] == 0


def test_a_drain_of_four_instances_spreads_them_as_its_plan_said(lab):
    launch_on(lab, "spr", "hv1", 4)
    try:
        drained = lab.playbook("drain.yml", "-e", "drain_host=hv1")
        assert drained["rc"] == 0, failed_messages(drained)
        plan = task_result(drained, "Plan the drain of hv1")["plan"]
        planned = {move["name"]: move["to_host"] for move in plan["moves"]}
        assert sorted(planned) == [f"spr-{index}" for index in range(1, 5)]
        # Spread: both other hosts take some, never all four onto one.
        assert set(planned.values()) == {"hv2", "hv3"}
        assert hosts_of(lab, "spr-") == planned
        assert [name for name in lab.virsh("hv1", "list", "--all", "--name").split() if name.startswith("spr-")] == []
    finally:
        assert lab.playbook("delete.yml", "-e", "name=spr")["rc"] == 0
