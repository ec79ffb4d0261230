"""Batch packing (packing.py): the solver keeps every filter, server group and host's capacity,
uses fewer hosts than Nova's greedy order on cases worked by hand, and falls back to that order,
saying why, when it cannot run."""
from __future__ import annotations

from collections import Counter

import pytest
from ansible_collections.berth.fleet.plugins.module_utils.scheduler import packing
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import SchedulerInputError

from ._builders import make_flavor, make_host, make_spec

pytest.importorskip("ortools")

GIB = 1024
TIME_LIMIT_S = 20  # generous: every case below is proved optimal in a fraction of it


def per_host(decision):
    return Counter(placement.host for placement in decision.placements)


def sized_host(name, ram_gib, vcpus=64, **overrides):
    # No reserved memory, so a host's free memory is its size: the arithmetic stays by hand.
    return make_host(name, total_usable_ram_mb=ram_gib * GIB, free_ram_mb=ram_gib * GIB, vcpus_total=vcpus,
                     **overrides)


def spec_of(ram_gib, count, vcpus=1, **overrides):
    return make_spec(make_flavor(memory_mb=ram_gib * GIB, vcpus=vcpus, root_gb=1), count=count, **overrides)


def test_six_4g_instances_on_four_16g_hosts_take_two_hosts_where_greedy_spreads_over_four():
    # Greedy weighs free RAM: each instance goes to the emptiest host, so all four are used.
    # 16 GiB holds four 4 GiB instances: six need two hosts, the bound the solver proves.
    hosts = [sized_host(f"hv{number}", 16) for number in range(4)]
    spec = spec_of(4, 6)
    assert len(per_host(schedule(hosts, spec))) == 4
    decision = packing.pack_request(hosts, spec, TIME_LIMIT_S)
    assert decision.ok and decision.engine == "packing"
    assert sorted(per_host(decision).values()) == [2, 4]
    assert decision.packing["method"] == "packing"
    assert (decision.packing["hosts_used"], decision.packing["greedy_hosts_used"]) == (2, 4)
    assert (decision.packing["best"], decision.packing["bound"], decision.packing["gap_percent"]) == (2, 2, 0.0)
    assert "packed by CP-SAT (optimal, objective hosts 2, bound 2, gap 0.00 %)" in decision.summary
    assert hosts[0].free_ram_mb == 16 * GIB  # the caller's hosts are left as they were


def test_mixed_sizes_greedy_strands_a_big_host_the_solver_fills_it():
    # One 32 GiB host, four 8 GiB hosts; eight 4 GiB instances. Greedy goes to the most free RAM:
    # six on big (down to 8 GiB free), the seventh on big again (a tie, host order), the eighth on
    # small0 (8 GiB free against big's 4): two hosts. Big takes all eight (8 x 4 = 32): one.
    hosts = [sized_host("big", 32)] + [sized_host(f"small{number}", 8) for number in range(4)]
    spec = spec_of(4, 8)
    assert per_host(schedule(hosts, spec)) == {"big": 7, "small0": 1}
    decision = packing.pack_request(hosts, spec, TIME_LIMIT_S)
    assert per_host(decision) == {"big": 8}
    assert (decision.packing["hosts_used"], decision.packing["greedy_hosts_used"]) == (1, 2)


def test_stranded_objective_prefers_the_hosts_it_fills():
    # Six 4 GiB instances: the 64 GiB host alone would strand 40 GiB; the two 16 GiB hosts
    # (four and two) strand 8 GiB. Counting hosts, the big one alone is best.
    hosts = [sized_host("big", 64), sized_host("a", 16), sized_host("b", 16)]
    spec = spec_of(4, 6)
    assert per_host(packing.pack_request(hosts, spec, TIME_LIMIT_S, "hosts")) == {"big": 6}
    stranded = packing.pack_request(hosts, spec, TIME_LIMIT_S, "stranded")
    assert sorted(per_host(stranded)) == ["a", "b"]
    assert stranded.packing["best"] == 32 * GIB  # the free memory of the hosts it opened


def test_vcpus_with_the_allocation_ratio_bound_each_host():
    # 4 vCPUs × ratio 2.0 = 8 schedulable; 4-vCPU instances: two per host, whatever the memory.
    hosts = [sized_host(f"hv{number}", 64, vcpus=4, cpu_allocation_ratio=2.0) for number in range(3)]
    decision = packing.pack_request(hosts, spec_of(1, 5, vcpus=4), TIME_LIMIT_S)
    assert sorted(per_host(decision).values()) == [1, 2, 2]


def test_hosts_the_filters_refuse_are_never_used():
    # The roomiest host is disabled (ComputeFilter), another ignored: the rest take everything.
    hosts = [sized_host("off", 64, disabled=True), sized_host("skip", 64), sized_host("a", 16), sized_host("b", 16)]
    decision = packing.pack_request(hosts, spec_of(4, 8, ignore_hosts=["skip"]), TIME_LIMIT_S)
    assert per_host(decision) == {"a": 4, "b": 4}
    assert decision.rejected_total == 2


def test_anti_affinity_keeps_max_server_per_host_counting_the_members_already_there():
    hosts = [sized_host(f"hv{number}", 64) for number in range(4)]
    group = {"name": "g", "policy": "anti-affinity", "rules": {"max_server_per_host": 2}, "members": {"hv0": 2}}
    decision = packing.pack_request(hosts, spec_of(4, 6, server_group=group), TIME_LIMIT_S)
    assert per_host(decision) == {"hv1": 2, "hv2": 2, "hv3": 2}


def test_affinity_puts_every_member_on_one_host():
    hosts = [sized_host("a", 16), sized_host("b", 32), sized_host("c", 16)]
    decision = packing.pack_request(hosts, spec_of(4, 6, server_group={"name": "g", "policy": "affinity"}),
                                    TIME_LIMIT_S)
    assert per_host(decision) == {"b": 6}


def test_affinity_no_host_holds_them_all_then_no_placement():
    hosts = [sized_host("a", 16), sized_host("b", 16)]
    decision = packing.pack_request(hosts, spec_of(4, 6, server_group={"name": "g", "policy": "affinity"}),
                                    TIME_LIMIT_S)
    assert not decision.ok and decision.placements == []


def test_a_deployment_places_every_entry_together_and_a_shared_group_counts_both_entries():
    # Two tiers of one anti-affinity group (one per host) and a 12 GiB database: the web and app
    # members take four different hosts, the database one of them (16 GiB: 4 + 12).
    hosts = [sized_host(f"hv{number}", 16) for number in range(5)]
    group = {"name": "tiers", "policy": "anti-affinity"}
    batch = packing.place_batch(hosts, [spec_of(4, 2, server_group=group), spec_of(4, 2, server_group=group),
                                        spec_of(12, 1)], TIME_LIMIT_S)
    assert batch.ok and batch.explanation["method"] == "packing"
    web, app, database = (per_host(decision) for decision in batch.decisions)
    assert len(set(web) | set(app)) == 4
    assert set(database) <= set(web) | set(app)
    assert batch.explanation["hosts_used"] == 4


def test_the_instance_limit_holds_across_entries():
    # max_instances_per_host 3 (NumInstancesFilter): two entries of two instances each would fit one
    # 64 GiB host by memory, but at most three instances go on any host, so two hosts, packed (an
    # answer over the limit would be refused by the replay and placed in the greedy order).
    filters = ["ComputeFilter", "RamFilter", "NumInstancesFilter"]
    hosts = [sized_host("a", 64), sized_host("b", 64)]
    batch = packing.place_batch(hosts, [spec_of(4, 2, enabled_filters=filters, max_instances_per_host=3),
                                        spec_of(4, 2, enabled_filters=filters, max_instances_per_host=3)],
                                TIME_LIMIT_S)
    assert batch.explanation["method"] == "packing"
    together = per_host(batch.decisions[0]) + per_host(batch.decisions[1])
    assert len(together) == 2 and max(together.values()) <= 3
    assert batch.explanation["bound"] == 2


def test_a_deployment_that_does_not_fit_places_nothing():
    hosts = [sized_host("a", 16)]
    batch = packing.place_batch(hosts, [spec_of(8, 1), spec_of(12, 1)], TIME_LIMIT_S)
    assert not batch.ok


def test_without_ortools_the_greedy_order_places_and_says_why(monkeypatch):
    monkeypatch.setattr(packing, "load_solver", lambda: None)
    hosts = [sized_host(f"hv{number}", 16) for number in range(4)]
    spec = spec_of(4, 6)
    decision = packing.pack_request(hosts, spec, TIME_LIMIT_S)
    assert [p.host for p in decision.placements] == [p.host for p in schedule(hosts, spec).placements]
    assert decision.packing["method"] == "greedy" and "ortools is not installed" in decision.packing["reason"]
    assert decision.packing["gap_percent"] is None
    assert decision.summary.endswith("placed in Nova's greedy order: the Python package ortools is not installed "
                                     "(pip install ortools)")


def test_a_time_limit_of_0_places_in_the_greedy_order():
    decision = packing.pack_request([sized_host("a", 16), sized_host("b", 16)], spec_of(4, 2), 0)
    assert decision.packing["method"] == "greedy"
    assert decision.packing["reason"] == "the packing time limit is 0"
    assert len(per_host(decision)) == 2


def test_forced_hosts_place_in_the_greedy_order():
    decision = packing.pack_request([sized_host("a", 16), sized_host("b", 16)],
                                    spec_of(4, 2, force_hosts=["a"]), TIME_LIMIT_S)
    assert decision.packing["method"] == "greedy" and "forced hosts" in decision.packing["reason"]


@pytest.mark.parametrize("field, kwargs", [("packing_objective", {"objective": "cheapest"}),
                                           ("packing_time_limit", {"time_limit_s": -1})])
def test_a_bad_objective_or_time_limit_names_the_setting(field, kwargs):
    options = {"time_limit_s": TIME_LIMIT_S, "objective": "hosts", **kwargs}
    with pytest.raises(SchedulerInputError) as raised:
        packing.pack_request([sized_host("a", 16)], spec_of(4, 2), options["time_limit_s"], options["objective"])
    assert raised.value.field == field
