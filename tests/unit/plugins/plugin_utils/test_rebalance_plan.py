"""The rebalancer's planner (plugin_utils/_rebalance_plan.py) on small fleets worked by hand.

Every host has 16384 MB of RAM (512 reserved) and 8 vCPUs at the default ratios; the instances
are 2048 MB and 1 vCPU unless said. Each fleet's host states carry its instances as usage, as
the ledger's read gives them (claims as usage)."""

from __future__ import annotations

import datetime as dt

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import HostState
from ansible_collections.berth.fleet.plugins.plugin_utils._rebalance_plan import (
    Controls,
    Planner,
    imbalance,
    packing_slack,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

NOW = dt.datetime(2026, 11, 28, 9, 0, 0)
TOTAL_MB, RESERVED_MB = 16384, 512


def row(name, host, memory_mb=2048, vcpus=1, state="ACTIVE", moved_at=None, group=None):
    return {"name": name, "uuid": f"uuid-{name}", "host": host, "state": state, "flavor": "small",
            "vcpus": vcpus, "memory_mb": memory_mb, "root_gb": 1, "ephemeral_gb": 0, "swap": 0,
            "request": None, "project_id": "default", "image_properties": {}, "moved_at": moved_at,
            "server_group": group}


def fleet(layout, rows, totals_mb=None, **overrides):
    """Host states for ``layout`` (host names) with ``rows`` as their usage; ``totals_mb``: the
    hosts' RAM where not TOTAL_MB; ``overrides``: host -> fields set as given."""
    states = []
    for name in layout:
        mine = [item for item in rows if item["host"] == name]
        total_mb = (totals_mb or {}).get(name, TOTAL_MB)
        values = dict(
            host=name, uuid=f"uuid-{name}", vcpus_total=8, vcpus_used=sum(item["vcpus"] for item in mine),
            total_usable_ram_mb=total_mb, free_ram_mb=total_mb - RESERVED_MB - sum(item["memory_mb"] for item in mine),
            total_usable_disk_gb=100, free_disk_mb=100 * 1024 - 1024 * sum(item["root_gb"] for item in mine),
            num_instances=len(mine))
        states.append(HostState(**{**values, **overrides.get(name, {})}))
    return states


def planned(plan):
    return [(move.name, move.from_host, move.to_host) for move in plan.moves]


HOSTS = ["hv1", "hv2", "hv3", "hv4"]


def stacked(count=4, **kwargs):
    return [row(f"vm-{index}", "hv1", **kwargs) for index in range(1, count + 1)]


def test_a_balanced_fleet_yields_no_move():
    rows = [row(f"vm-{index}", host) for index, host in enumerate(HOSTS, start=1)]
    states = fleet(HOSTS, rows)
    assert imbalance(states) == pytest.approx(0.0)
    plan = Planner(rows, {}, Settings()).plan(states, "spread", Controls(threshold=0.0), now=NOW)
    assert plan.moves == []
    assert "at or under the threshold" in plan.stopped


def test_all_on_one_host_spreads_and_each_move_lowers_the_figure():
    rows = stacked(4, memory_mb=4096)
    states = fleet(HOSTS, rows)
    plan = Planner(rows, {}, Settings()).plan(states, "spread", Controls(threshold=0.05, max_moves=10), now=NOW)
    # One instance to each other host: the figure falls to the reserved memory's share alone.
    assert sorted(move.to_host for move in plan.moves) == ["hv2", "hv3", "hv4"]
    figures = [plan.imbalance_before, *(move.imbalance_after for move in plan.moves)]
    assert figures == sorted(figures, reverse=True)
    assert plan.imbalance_after < 0.05 < plan.imbalance_before
    # The plan's last figure is the fleet's as the moves leave it.
    moved = {move.name: move.to_host for move in plan.moves}
    after = [{**item, "host": moved.get(item["name"], item["host"])} for item in rows]
    assert imbalance(fleet(HOSTS, after)) == pytest.approx(plan.imbalance_after)
    # A second plan on that fleet moves nothing.
    again = Planner(after, {}, Settings()).plan(fleet(HOSTS, after), "spread", Controls(threshold=0.05), now=NOW)
    assert again.moves == []


def test_a_move_below_the_minimum_gain_is_not_proposed():
    rows = stacked(8)
    states = fleet(HOSTS, rows)
    whole = Planner(rows, {}, Settings()).plan(states, "spread", Controls(threshold=0.0, min_gain=0.0), now=NOW)
    gains = [move.gain for move in whole.moves]
    assert len(gains) >= 3 and min(gains) > 0
    # A minimum above some move's gain: the plan is the same up to the first move under it.
    floor = sorted(gains)[len(gains) // 2]
    first_under = next(index for index, gain in enumerate(gains) if gain < floor)
    plan = Planner(rows, {}, Settings()).plan(states, "spread", Controls(threshold=0.0, min_gain=floor), now=NOW)
    assert planned(plan) == planned(whole)[:first_under]
    assert all(move.gain >= floor for move in plan.moves)
    assert "under the minimum gain" in plan.stopped
    none = Planner(rows, {}, Settings()).plan(states, "spread", Controls(threshold=0.0, min_gain=1.0), now=NOW)
    assert none.moves == [] and "under the minimum gain" in none.stopped


def test_the_cooldown_holds_an_instance_that_moved_lately():
    recent = (NOW - dt.timedelta(seconds=600)).isoformat()
    long_ago = (NOW - dt.timedelta(seconds=7200)).isoformat()
    rows = [row("vm-1", "hv1", 4096, moved_at=recent), row("vm-2", "hv1", 4096, moved_at=recent),
            row("vm-3", "hv1", 4096, moved_at=long_ago), row("vm-4", "hv1", 4096, moved_at=recent)]
    states = fleet(HOSTS, rows)
    plan = Planner(rows, {}, Settings()).plan(states, "spread", Controls(threshold=0.0, cooldown_seconds=3600), now=NOW)
    assert [move.name for move in plan.moves] == ["vm-3"]
    assert "within the cooldown of 3600 s" in plan.held["vm-1"]
    # With a cooldown of 0 they all may move.
    free = Planner(rows, {}, Settings()).plan(states, "spread", Controls(threshold=0.0, cooldown_seconds=0), now=NOW)
    assert len(free.moves) == 3


def test_the_move_budget_holds():
    rows = stacked(8)
    states = fleet(HOSTS, rows)
    plan = Planner(rows, {}, Settings()).plan(states, "spread", Controls(threshold=0.0, max_moves=2), now=NOW)
    assert len(plan.moves) == 2
    assert "2 moves planned (berth_rebalance_max_moves)" in plan.stopped
    assert Planner(rows, {}, Settings()).plan(states, "spread", Controls(threshold=0.0, max_moves=0), now=NOW).moves == []


def test_anti_affinity_members_are_never_put_together():
    # Three members of an anti-affinity group on hv1, hv2, hv3; more load on hv1. hv4 is free.
    rows = [row("db-1", "hv1", group="apart"), row("db-2", "hv2", group="apart"), row("db-3", "hv3", group="apart"),
            *[row(f"vm-{index}", "hv1", 4096) for index in range(1, 3)]]
    groups = {"apart": {"name": "apart", "policy": "anti-affinity", "hosts": ["hv1", "hv2", "hv3"],
                        "members": {"hv1": 1, "hv2": 1, "hv3": 1}}}
    states = fleet(HOSTS, rows)
    plan = Planner(rows, groups, Settings()).plan(states, "spread", Controls(threshold=0.0, max_moves=20), now=NOW)
    where = {item["name"]: item["host"] for item in rows}
    for move in plan.moves:
        where[move.name] = move.to_host
    members = [where[name] for name in ("db-1", "db-2", "db-3")]
    assert len(set(members)) == 3, plan.to_dict()
    # Drained, hv1's member can go to hv4 only: the others hold members.
    drained = Planner(rows, groups, Settings()).plan(fleet(HOSTS, rows), "drain", drain_host="hv1")
    assert {move.name: move.to_host for move in drained.moves}["db-1"] == "hv4"


def test_a_host_without_ram_is_never_a_destination():
    rows = stacked(4, memory_mb=4096)
    # hv2 has no free RAM at all (its usage is something Berth does not manage).
    states = fleet(HOSTS, rows, hv2={"free_ram_mb": 0})
    plan = Planner(rows, {}, Settings()).plan(states, "spread", Controls(threshold=0.0), now=NOW)
    assert plan.moves and all(move.to_host != "hv2" for move in plan.moves)
    drained = Planner(rows, {}, Settings()).plan(states, "drain", drain_host="hv1")
    assert all(move.to_host != "hv2" for move in drained.moves)


def test_a_disabled_host_takes_nothing_and_does_not_count():
    rows = stacked(4, memory_mb=4096)
    states = fleet(HOSTS, rows, hv3={"disabled": True})
    plan = Planner(rows, {}, Settings()).plan(states, "spread", Controls(threshold=0.0), now=NOW)
    assert plan.moves and all(move.to_host != "hv3" for move in plan.moves)


def test_a_drain_spreads_four_instances_over_several_hosts():
    rows = stacked(4, memory_mb=4096)
    states = fleet(HOSTS, rows)
    plan = Planner(rows, {}, Settings()).plan(states, "drain", drain_host="hv1")
    assert sorted(move.name for move in plan.moves) == ["vm-1", "vm-2", "vm-3", "vm-4"]
    destinations = [move.to_host for move in plan.moves]
    assert "hv1" not in destinations
    # Four onto three hosts, as even as it goes: 2, 1, 1 - never all onto the emptiest.
    assert sorted(destinations.count(host) for host in set(destinations)) == [1, 1, 2]
    assert plan.held == {}


def test_a_drain_names_a_paused_instance_and_one_no_host_can_take():
    # big needs more than hv2's 15872 MB.
    rows = [row("vm-1", "hv1"), row("vm-2", "hv1", state="PAUSED"), row("big", "hv1", memory_mb=16000)]
    states = fleet(["hv1", "hv2"], rows, {"hv1": 32768})
    plan = Planner(rows, {}, Settings()).plan(states, "drain", drain_host="hv1")
    assert planned(plan) == [("vm-1", "hv1", "hv2")]
    assert "PAUSED" in plan.held["vm-2"]
    assert "no host can take it" in plan.held["big"]


def test_pack_empties_the_least_used_host_onto_the_others():
    rows = [row("vm-1", "hv1", 4096), row("vm-2", "hv1", 4096), row("vm-3", "hv2", 4096),
            row("vm-4", "hv3", 2048)]
    states = fleet(["hv1", "hv2", "hv3"], rows)
    assert packing_slack(states) == pytest.approx(2 / 3)
    plan = Planner(rows, {}, Settings()).plan(states, "pack", Controls(threshold=0.0), now=NOW)
    # hv3 (least used) empties first, then hv2: everything ends on hv1.
    assert [move.name for move in plan.moves] == ["vm-4", "vm-3"]
    assert {move.to_host for move in plan.moves} == {"hv1"}
    assert plan.imbalance_after == pytest.approx(0.0)


def test_pack_keeps_the_failover_headroom():
    # hv1 (32768 MB) is full: two 12000 MB HA instances and a filler. If hv1 fails they restart on
    # hv2 and hv3, one each. Emptying hv2 onto hv3 (or hv3 onto hv2) leaves room for one only.
    rows = [row("ha-a", "hv1", 12000), row("ha-b", "hv1", 12000), row("fill", "hv1", 8000),
            row("vm-2", "hv2", 2048), row("vm-3", "hv3", 2048)]
    states = fleet(["hv1", "hv2", "hv3"], rows, {"hv1": 32768})
    loose = Planner(rows, {}, Settings()).plan(states, "pack", Controls(threshold=0.0), now=NOW)
    assert planned(loose) == [("vm-2", "hv2", "hv3")]
    kept = Planner(rows, {}, Settings(failover_hosts=1), ha_rows=rows[:2]).plan(
        states, "pack", Controls(threshold=0.0), now=NOW)
    assert kept.moves == [] and "failover headroom" in kept.stopped


@pytest.mark.parametrize("name, value", [("rebalance_threshold", 2), ("rebalance_min_gain", -0.1),
                                         ("rebalance_max_moves", -1), ("rebalance_cooldown_seconds", 1.5)],
                         ids=["threshold", "min_gain", "max_moves", "cooldown"])
def test_controls_out_of_range_are_refused_naming_the_setting(name, value):
    with pytest.raises(InputError) as raised:
        Controls.from_settings(Settings(**{name: value}))
    assert raised.value.field == name


def test_an_unknown_goal_or_drained_host_is_refused():
    rows = stacked(1)
    with pytest.raises(InputError, match="goal must be one of"):
        Planner(rows, {}, Settings()).plan(fleet(HOSTS, rows), "even")
    with pytest.raises(InputError, match="unknown host hv9"):
        Planner(rows, {}, Settings()).plan(fleet(HOSTS, rows), "drain", drain_host="hv9")


def test_a_move_that_gains_nothing_is_not_proposed_even_with_no_minimum_gain():
    # Two instances on hv1, one on hv2 and hv3: any move only swaps which host holds two.
    rows = [row("vm-1", "hv1", 4096), row("vm-2", "hv1", 4096), row("vm-3", "hv2", 4096), row("vm-4", "hv3", 4096)]
    states = fleet(["hv1", "hv2", "hv3"], rows)
    assert imbalance(states) > 0
    plan = Planner(rows, {}, Settings()).plan(states, "spread", Controls(threshold=0.0, min_gain=0.0), now=NOW)
    assert plan.moves == [] and plan.stopped == "no move of an instance of the most used hosts lowers the imbalance"


def test_the_operator_s_host_rules_hold_every_planned_move():
    # vm-* must not be in aggregate slow (hv2): the spread goes to hv3 and hv4 only, as the
    # claim of each move would refuse hv2.
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_rules import HostRule

    rows = stacked(4, memory_mb=4096)
    states = fleet(HOSTS, rows, hv2={"aggregates": [{"name": "slow", "metadata": {}}]})
    rules = [HostRule(name="not-slow", kind="must_not", aggregate="slow", instance_name="vm-*")]
    plan = Planner(rows, {}, Settings(), rules=rules).plan(states, "spread", Controls(threshold=0.05, max_moves=10),
                                                           now=NOW)
    assert plan.moves and "hv2" not in {move.to_host for move in plan.moves}
    unruled = Planner(rows, {}, Settings()).plan(states, "spread", Controls(threshold=0.05, max_moves=10), now=NOW)
    assert "hv2" in {move.to_host for move in unruled.moves}


def test_a_move_carries_the_attached_volumes_and_needs_room_for_them_there():
    # All four on hv1, each with a 60 GB volume of the local pool attached; hv2 has 50 GB of disk
    # free: the flavors fit there, the volumes do not, so nothing may move (before, the plan moved
    # them and every move's claim was refused).
    rows = stacked()
    carried = {item["uuid"]: 60 * 1024 for item in rows}
    overrides = {"hv1": {"total_usable_disk_gb": 500, "free_disk_mb": (500 - 4 - 4 * 60) * 1024},
                 "hv2": {"free_disk_mb": 50 * 1024}}
    states = fleet(["hv1", "hv2"], rows, **overrides)
    assert planned(Planner(rows, {}, Settings()).plan(states, "spread", Controls(threshold=0.0), now=NOW))
    plan = Planner(rows, {}, Settings(), carried=carried).plan(fleet(["hv1", "hv2"], rows, **overrides), "spread",
                                                               Controls(threshold=0.0), now=NOW)
    assert plan.moves == []
    # With room for one volume there, one moves, and the host states follow it with its volume.
    overrides["hv2"] = {"free_disk_mb": 70 * 1024}
    plan = Planner(rows, {}, Settings(), carried=carried).plan(fleet(["hv1", "hv2"], rows, **overrides), "spread",
                                                               Controls(threshold=0.0), now=NOW)
    assert [(move.from_host, move.to_host) for move in plan.moves] == [("hv1", "hv2")]
