"""An anti-affinity group over the 3-host lab fleet: ten do not fit, three do, one per host,
exactly where check mode said they would go."""

from __future__ import annotations

import json

import pytest
from conftest import changed_count, failed_messages, fleet_snapshot, task_result

pytestmark = pytest.mark.integration


def test_anti_affinity_over_three_hosts_fails_with_ten_and_places_three(lab):
    lab.server_group("spread", "present")
    try:
        before = fleet_snapshot(lab)
        ten = lab.playbook("launch.yml", "-e", json.dumps(
            {"name": "spread", "count": 10, "flavor": "m1.tiny", "server_group": "spread"}))
        assert ten["rc"] != 0
        message = " ".join(failed_messages(ten))
        # Three instances take the three hosts; the fourth finds every host holding a member.
        assert "0/3 hosts are available for instance 4 of 10: 3 anti-affinity group spread" in message, message
        assert fleet_snapshot(lab) == before, "a failed request must leave nothing behind"

        three = {"name": "spread", "count": 3, "flavor": "m1.tiny", "server_group": "spread"}
        plan = lab.playbook("launch.yml", "-e", json.dumps(three), check=True)
        assert plan["rc"] == 0, failed_messages(plan)
        assert fleet_snapshot(lab) == before, "check mode must change nothing"
        planned = {p["name"]: p["host"] for p in task_result(plan, "Launch the instances")["placements"]}

        real = lab.playbook("launch.yml", "-e", json.dumps(three))
        assert real["rc"] == 0, failed_messages(real)
        assert changed_count(real) > 0
        placed = {row["name"]: row["host"] for row in lab.ledger_rows("instances") if row["name"].startswith("spread-")}
        assert placed == planned
        assert sorted(placed.values()) == sorted(lab.hosts)
        for name, host in placed.items():
            assert lab.virsh(host, "domstate", name).strip() == "running"
    finally:
        deleted = lab.playbook("delete.yml", "-e", "name=spread")
        assert deleted["rc"] == 0, failed_messages(deleted)
        lab.server_group("spread", "absent")


def test_a_forced_launch_of_two_members_onto_one_host_is_refused_by_the_claim(lab):
    """A forced host skips the scheduler's filters (Nova's force_hosts, the operator's
    berth_force_hosts), so nothing but the claim's re-check stands between two members of one
    request and one host of an anti-affinity group: the claim must count both, refuse, and leave
    nothing behind."""
    lab.server_group("pair", "present")
    try:
        before = fleet_snapshot(lab)
        forced = lab.playbook("launch.yml", "-e", json.dumps(
            {"name": "pair", "count": 2, "flavor": "m1.tiny", "server_group": "pair", "berth_force_hosts": ["hv1"]}))
        assert forced["rc"] != 0
        message = " ".join(failed_messages(forced))
        assert "anti-affinity group pair would have 2 members on it (at most 1)" in message, message
        assert fleet_snapshot(lab) == before, "a refused claim must leave nothing behind"
    finally:
        deleted = lab.playbook("delete.yml", "-e", "name=pair")
        assert deleted["rc"] == 0, failed_messages(deleted)
        lab.server_group("pair", "absent")
