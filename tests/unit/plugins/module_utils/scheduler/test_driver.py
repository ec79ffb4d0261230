from __future__ import annotations

import json

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import (
    Decision,
    Placement,
    schedule,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
    DEFAULT_FILTERS,
    DEFAULT_WEIGHERS,
    RequestSpec,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import Rejection

from ._builders import make_flavor, make_host, make_spec


def placed_hosts(decision: Decision) -> list[str]:
    return [placement.host for placement in decision.placements]


# --- consumption between instances --------------------------------------------------------

def test_equal_hosts_spread_one_instance_each():
    hosts = [make_host("hv1"), make_host("hv2"), make_host("hv3")]
    decision = schedule(hosts, make_spec(make_flavor(memory_mb=2048), count=3))

    assert decision.ok
    assert placed_hosts(decision) == ["hv1", "hv2", "hv3"]
    assert [placement.index for placement in decision.placements] == [0, 1, 2]
    assert decision.summary == "placed 3 instances on hv1, hv2, hv3"
    assert decision.failed_index is None
    assert decision.hosts_total == 3
    assert decision.rejections == []
    # Second instance: hv1 has 15872 − 2048 = 13824 free, the others 15872.
    second = decision.placements[1]
    assert second.weight == 1.0
    assert second.alternates == ["hv3", "hv1"]
    assert [(other["host"], other["weight"]) for other in second.runners_up] == [
        ("hv3", 1.0), ("hv1", pytest.approx(13824 / 15872))]
    # Each runner-up with its weighers' parts, as the winner has them: RAM decided.
    assert [(part["name"], part["raw"]) for part in second.runners_up[1]["weights"]] == [("RAMWeigher", 13824)]


def test_negative_ram_multiplier_stacks_on_the_first_host():
    hosts = [make_host("hv1"), make_host("hv2"), make_host("hv3")]
    spec = make_spec(make_flavor(memory_mb=2048), count=3,
                     weight_multipliers={"ram_weight_multiplier": -1.0})
    decision = schedule(hosts, spec)
    assert placed_hosts(decision) == ["hv1", "hv1", "hv1"]
    assert decision.summary == "placed 3 instances on hv1, hv1, hv1"
    # Third instance: hv1 has 15872 − 2 × 2048 = 11776 free; −11776/15872 beats −1.0.
    assert decision.placements[2].weight == pytest.approx(-11776 / 15872)


def test_a_host_full_after_its_own_instances_fails_the_last_one():
    # 5000 MB free holds two 2048 MB instances; 904 MB are left for the third.
    hosts = [make_host("hv1", free_ram_mb=5000)]
    decision = schedule(hosts, make_spec(make_flavor(memory_mb=2048), count=3))
    assert not decision.ok
    assert decision.failed_index == 2
    assert decision.summary == (
        "0/1 hosts are available for instance 3 of 3: "
        "1 insufficient RAM (needs 2048 MB, most free 904 MB)"
    )


def test_the_next_instance_is_filtered_from_the_survivors_only():
    # hv1 is down; ComputeFilter runs for the first instance only, so were hv1 offered again
    # for the second, nothing would stop it, and its free RAM would win.
    hosts = [make_host("hv1", service_up=False, free_ram_mb=15872),
             make_host("hv2", free_ram_mb=8000)]
    decision = schedule(hosts, make_spec(make_flavor(memory_mb=2048), count=2))
    assert placed_hosts(decision) == ["hv2", "hv2"]
    assert decision.rejections == [Rejection("hv1", "ComputeFilter", "host_down")]


def test_ties_keep_the_order_the_hosts_came_in():
    hosts = [make_host("hv3"), make_host("hv1"), make_host("hv2")]
    (placement,) = schedule(hosts, make_spec()).placements
    assert placement.host == "hv3"
    assert placement.alternates == ["hv1", "hv2"]


def test_a_lone_candidate_is_not_weighed():
    hosts = [make_host("hv1", disabled=True), make_host("hv2")]
    (placement,) = schedule(hosts, make_spec()).placements
    assert (placement.host, placement.weight, placement.weights) == ("hv2", 0.0, [])
    assert placement.alternates == []
    assert placement.runners_up == []


def test_placement_carries_identity_limits_and_weights():
    hosts = [make_host("hv1", nodename="node-1", free_ram_mb=8000),
             make_host("hv2", nodename="node-2", uuid="uuid-b")]
    (placement,) = schedule(hosts, make_spec()).placements
    assert isinstance(placement, Placement)
    assert (placement.host, placement.nodename, placement.uuid) == ("hv2", "node-2", "uuid-b")
    # 16384 × 1.0 MB, 8 × 4.0 vCPUs, 100 GB × 1.0
    assert placement.limits == {"memory_mb": 16384, "vcpu": 32, "disk_gb": 100}
    (detail,) = placement.weights
    assert (detail.name, detail.raw, detail.normalized, detail.multiplier, detail.weighted) == (
        "RAMWeigher", 15872, 1.0, 1.0, 1.0)
    assert placement.runners_up == [{"host": "hv1", "weight": pytest.approx(8000 / 15872), "weights": [
        {"name": "RAMWeigher", "raw": 8000, "normalized": pytest.approx(8000 / 15872), "multiplier": 1.0,
         "weighted": pytest.approx(8000 / 15872)}]}]


# --- failure: all or nothing, explained ---------------------------------------------------

def test_all_or_nothing_failure_with_summary():
    # First instance: hv1 down; hv3 (7596 free) beats hv2 (7000) and drops to 3500.
    # Second: hv3 short (3500 < 4096); hv2 alone takes it and drops to 2904.
    # Third: hv2 short too.
    hosts = [make_host("hv1", service_up=False, down_reason="unreachable"),
             make_host("hv2", free_ram_mb=7000),
             make_host("hv3", free_ram_mb=7596)]
    decision = schedule(hosts, make_spec(make_flavor(memory_mb=4096), count=3))

    assert not decision.ok
    assert decision.placements == []
    assert decision.failed_index == 2
    assert decision.hosts_total == 3
    assert decision.summary == (
        "0/3 hosts are available for instance 3 of 3: "
        "2 insufficient RAM (needs 4096 MB, most free 3500 MB), 1 down"
    )
    assert decision.rejections == [
        Rejection("hv1", "ComputeFilter", "host_down", detail="unreachable"),
        Rejection("hv2", "RamFilter", "insufficient_ram", requested=4096, used=16384 - 2904,
                  limit=16384, free=2904, unit="MB", resource="ram"),
        Rejection("hv3", "RamFilter", "insufficient_ram", requested=4096, used=16384 - 3500,
                  limit=16384, free=3500, unit="MB", resource="ram"),
    ]
    assert decision.rejections[2].message() == (
        "insufficient RAM: needs 4096 MB, free 3500 MB (used 12884 of limit 16384 MB)")


def test_failure_summary_counts_most_common_first_then_first_seen():
    hosts = [make_host("hv1", disabled=True), make_host("hv2", service_up=False),
             make_host("hv3", total_usable_ram_mb=2048, free_ram_mb=1536),
             make_host("hv4", disabled=True)]
    decision = schedule(hosts, make_spec(make_flavor(memory_mb=4096)))
    assert decision.summary == (
        "0/4 hosts are available for instance 1 of 1: "
        "2 disabled, 1 down, 1 smaller than the flavor's RAM"
    )


def test_failure_summary_phrases_for_vcpus_and_disk():
    flavor = make_flavor(vcpus=2, memory_mb=1024, root_gb=20)
    hosts = [
        make_host("hv1", vcpus_total=2, vcpus_used=7),  # limit 8, 1 free
        make_host("hv2", free_disk_mb=10240),  # 10240 MB of the 20480 asked
        make_host("hv3", vcpus_total=1),
        make_host("hv4", total_usable_disk_gb=10, free_disk_mb=10240),
    ]
    decision = schedule(hosts, make_spec(flavor))
    assert decision.summary == (
        "0/4 hosts are available for instance 1 of 1: "
        "1 insufficient vCPUs (needs 2, most free 1), "
        "1 insufficient disk (needs 20480 MB, most free 10240 MB), "
        "1 smaller than the flavor's vCPUs, 1 smaller than the flavor's disk"
    )


def test_no_hosts_at_all():
    decision = schedule([], make_spec(count=2))
    assert (decision.ok, decision.failed_index, decision.hosts_total) == (False, 0, 0)
    assert decision.summary == "0/0 hosts are available for instance 1 of 2"
    assert decision.rejections == []


def test_success_lists_hosts_filtered_out_along_the_way():
    # Stacking: hv2 (5000 free) is the fuller host and takes two instances, 904 MB are left,
    # so the third goes to hv3.
    hosts = [make_host("hv1", disabled=True, disabled_reason="maintenance"),
             make_host("hv2", free_ram_mb=5000), make_host("hv3")]
    spec = make_spec(make_flavor(memory_mb=2048), count=3,
                     weight_multipliers={"ram_weight_multiplier": -1.0})
    decision = schedule(hosts, spec)
    assert decision.ok
    assert placed_hosts(decision) == ["hv2", "hv2", "hv3"]
    assert decision.rejections == [
        Rejection("hv1", "ComputeFilter", "host_disabled", detail="maintenance"),
        Rejection("hv2", "RamFilter", "insufficient_ram", requested=2048, used=16384 - 904,
                  limit=16384, free=904, unit="MB", resource="ram"),
    ]


def test_enabled_filters_choose_which_filters_run():
    hosts = [make_host("hv1", service_up=False), make_host("hv2", free_ram_mb=1000)]
    decision = schedule(hosts, make_spec(enabled_filters=["RamFilter"]))
    assert placed_hosts(decision) == ["hv1"]


# --- ignore and force ---------------------------------------------------------------------

def test_ignore_hosts_matches_host_names_case_insensitively():
    hosts = [make_host("Hv1"), make_host("hv2")]
    decision = schedule(hosts, make_spec(ignore_hosts=["HV1"]))
    assert placed_hosts(decision) == ["hv2"]
    assert decision.rejections == [Rejection("Hv1", "ignore_hosts", "ignored")]


def test_force_hosts_skips_the_filters():
    # hv1 is disabled and has 100 MB free: every filter would refuse it.
    hosts = [make_host("hv1", disabled=True, free_ram_mb=100), make_host("hv2")]
    decision = schedule(hosts, make_spec(make_flavor(memory_mb=2048), count=2,
                                         force_hosts=["hv1"]))
    assert decision.ok
    assert placed_hosts(decision) == ["hv1", "hv1"]
    assert decision.placements[0].limits == {}
    assert decision.rejections == [Rejection("hv2", "force_hosts", "not_forced")]


def test_force_nodes_and_force_hosts_both_apply():
    hosts = [make_host("hv1", nodename="node-a"), make_host("hv2", nodename="node-b"),
             make_host("hv3", nodename="node-c")]
    decision = schedule(hosts, make_spec(force_hosts=["hv1", "hv2"], force_nodes=["node-b"]))
    assert placed_hosts(decision) == ["hv2"]
    assert decision.rejections == [Rejection("hv1", "force_nodes", "not_forced"),
                                   Rejection("hv3", "force_hosts", "not_forced")]


def test_forcing_an_unknown_host_fails_with_not_forced():
    decision = schedule([make_host("hv1"), make_host("hv2")], make_spec(force_hosts=["hv9"]))
    assert decision.summary == "0/2 hosts are available for instance 1 of 1: 2 not forced"


def test_ignore_wins_over_force():
    decision = schedule([make_host("hv1"), make_host("hv2")],
                        make_spec(ignore_hosts=["hv1"], force_hosts=["hv1"]))
    assert decision.summary == (
        "0/2 hosts are available for instance 1 of 1: 1 ignored, 1 not forced")


# --- alternates, subsets, seeds -----------------------------------------------------------

@pytest.mark.parametrize(
    "hosts_count, max_attempts, expected_alternates",
    [(5, 1, 0), (5, 3, 2), (5, 5, 4), (5, 10, 4), (2, 3, 1), (1, 3, 0)],
    ids=["one-attempt", "default-three", "exactly-enough", "more-attempts-than-hosts",
         "fewer-hosts-than-attempts", "lone-host"],
)
def test_alternates_are_the_next_best_up_to_max_attempts_minus_one(
    hosts_count, max_attempts, expected_alternates
):
    # Free RAM falls with the number, so the weighed order is hv1, hv2, ...
    hosts = [make_host(f"hv{n}", free_ram_mb=16000 - 1000 * n) for n in range(1, hosts_count + 1)]
    (placement,) = schedule(hosts, make_spec(max_attempts=max_attempts)).placements
    assert placement.host == "hv1"
    assert placement.alternates == [f"hv{n}" for n in range(2, 2 + expected_alternates)]
    assert len(placement.runners_up) == min(3, hosts_count - 1)


def test_host_subset_size_picks_among_the_best_and_a_seed_replays_it():
    # Weighed order: hv2 (5000), hv3 (4000), hv4 (3000), hv5 (2000), hv1 (1000).
    hosts = [make_host(f"hv{n}", free_ram_mb=free)
             for n, free in enumerate([1000, 5000, 4000, 3000, 2000], start=1)]
    chosen = set()
    for seed in range(40):
        spec = make_spec(make_flavor(memory_mb=512), host_subset_size=3, seed=seed,
                         max_attempts=5)
        first, again = schedule(hosts, spec), schedule(hosts, spec)
        assert first.to_dict() == again.to_dict()
        (placement,) = first.placements
        chosen.add(placement.host)
        expected_order = [h for h in ["hv2", "hv3", "hv4", "hv5", "hv1"] if h != placement.host]
        assert placement.alternates == expected_order
    assert chosen == {"hv2", "hv3", "hv4"}


def test_subset_size_one_is_deterministic_whatever_the_seed():
    hosts = [make_host("hv1", free_ram_mb=3000), make_host("hv2", free_ram_mb=5000)]
    assert {schedule(hosts, make_spec(seed=seed)).placements[0].host
            for seed in range(10)} == {"hv2"}


# --- inputs and outputs -------------------------------------------------------------------

def test_inputs_are_not_mutated():
    hosts = [make_host("hv1"), make_host("hv2", free_ram_mb=3000)]
    spec = make_spec(make_flavor(memory_mb=2048), count=3)
    hosts_before = [host.to_dict() for host in hosts]
    spec_before = repr(spec)
    schedule(hosts, spec)
    assert [host.to_dict() for host in hosts] == hosts_before
    assert all(host.limits == {} for host in hosts)
    assert repr(spec) == spec_before


def test_decision_to_dict_is_plain_json():
    hosts = [make_host("hv1", service_up=False), make_host("hv2"), make_host("hv3")]
    data = schedule(hosts, make_spec(count=2)).to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["ok"] is True
    assert data["summary"] == "placed 2 instances on hv2, hv3"
    assert data["placements"][0]["weights"][0]["name"] == "RAMWeigher"
    assert data["rejections"] == [{
        "host": "hv1", "filter": "ComputeFilter", "reason": "host_down", "requested": None,
        "used": None, "limit": None, "free": None, "unit": None, "resource": None,
        "detail": None, "message": "host down", "kind": "not_now",
    }]
    assert data["reasons"] == [{"reason": "host_down", "resource": None, "kind": "not_now",
                                "count": 1, "requested": None, "most_free": None,
                                "phrase": "down"}]


def test_request_defaults():
    spec = RequestSpec(flavor=make_flavor())
    assert spec.count == 1
    assert spec.enabled_filters == DEFAULT_FILTERS
    assert spec.enabled_filters is not DEFAULT_FILTERS
    assert spec.weighers == DEFAULT_WEIGHERS
    assert (spec.host_subset_size, spec.seed, spec.max_attempts) == (1, None, 3)
    assert spec.weight_multipliers == {}
    assert (spec.ignore_hosts, spec.force_hosts, spec.force_nodes) == ([], [], [])


def test_request_from_dict():
    spec = RequestSpec.from_dict({
        "flavor": {"name": "m1.small", "vcpus": 1, "memory_mb": 2048, "root_gb": 20},
        "count": 2, "seed": None, "force_hosts": None, "ignore_hosts": ["hv3"],
    })
    assert spec.flavor == make_flavor(name="m1.small")
    assert (spec.count, spec.seed, spec.force_hosts, spec.ignore_hosts) == (2, None, [], ["hv3"])


@pytest.mark.parametrize(
    "data, field",
    [
        ({"flavor": {"name": "x", "vcpus": 0, "memory_mb": 1, "root_gb": 1}}, "flavor.vcpus"),
        ({"count": 2}, "flavor"),
        ({"flavor": None}, "flavor"),
        ({"flavor": {"name": "x", "vcpus": 1, "memory_mb": 1, "root_gb": 1}, "hints": {}},
         "hints"),
    ],
    ids=["bad-flavor", "no-flavor", "null-flavor", "unknown-option"],
)
def test_request_from_dict_refuses(data, field):
    with pytest.raises(SchedulerInputError) as caught:
        RequestSpec.from_dict(data)
    assert caught.value.field == field


@pytest.mark.parametrize(
    "overrides, field, message",
    [
        ({"count": 0}, "count", "count must be a positive integer, got 0"),
        ({"count": "2"}, "count", "count must be a positive integer, got '2'"),
        ({"count": True}, "count", "count must be a positive integer, got True"),
        ({"host_subset_size": 0}, "host_subset_size",
         "host_subset_size must be a positive integer, got 0"),
        ({"max_attempts": 0}, "max_attempts", "max_attempts must be a positive integer, got 0"),
        ({"seed": True}, "seed", "seed must be an integer or null, got True"),
        ({"enabled_filters": ["ComputeFilter", "NoSuchFilter"]}, "enabled_filters",
         "enabled_filters names an unknown filter 'NoSuchFilter'; "
         "allowed: AggregateCoreFilter, AggregateDiskFilter, AggregateImagePropertiesIsolation, "
         "AggregateInstanceExtraSpecsFilter, AggregateIoOpsFilter, "
         "AggregateMultiTenancyIsolation, AggregateNumInstancesFilter, AggregateRamFilter, "
         "AggregateTypeAffinityFilter, AllHostsFilter, AvailabilityZoneFilter, "
         "ComputeCapabilitiesFilter, ComputeFilter, CoreFilter, DifferentHostFilter, DiskFilter, "
         "HostRuleFilter, ImagePropertiesFilter, IoOpsFilter, IsolatedHostsFilter, JsonFilter, MetricsFilter, "
         "NUMATopologyFilter, NetworkFilter, NumInstancesFilter, PciPassthroughFilter, PoolImageFilter, RamFilter, RetryFilter, "
         "SameHostFilter, ServerGroupAffinityFilter, ServerGroupAntiAffinityFilter, "
         "SimpleCIDRAffinityFilter"),
        ({"enabled_filters": "RamFilter"}, "enabled_filters",
         "enabled_filters must be a list of strings, got 'RamFilter'"),
        ({"weighers": ["CPUWeigher", "NoSuchWeigher"]}, "weighers",
         "weighers names an unknown weigher 'NoSuchWeigher'; allowed: BuildFailureWeigher, "
         "CPUWeigher, DiskWeigher, HostRuleWeigher, HypervisorVersionWeigher, ImagePropertiesWeigher, "
         "IoOpsWeigher, MetricsWeigher, "
         "NumInstancesWeigher, PCIWeigher, RAMWeigher, ServerGroupSoftAffinityWeigher, "
         "ServerGroupSoftAntiAffinityWeigher"),
        ({"ignore_hosts": "hv1"}, "ignore_hosts",
         "ignore_hosts must be a list of strings, got 'hv1'"),
        ({"force_nodes": [1]}, "force_nodes", "force_nodes must be a list of strings, got item 1"),
        ({"weight_multipliers": {"cross_cell_move_weight_multiplier": 1.0}}, "weight_multipliers",
         "weight_multipliers names an unknown option 'cross_cell_move_weight_multiplier'; "
         "allowed: build_failure_weight_multiplier, cpu_weight_multiplier, "
         "disk_weight_multiplier, host_rule_weight_multiplier, hypervisor_version_weight_multiplier, "
         "image_props_weight_multiplier, io_ops_weight_multiplier, "
         "metrics_weight_multiplier, num_instances_weight_multiplier, pci_weight_multiplier, "
         "ram_weight_multiplier, soft_affinity_weight_multiplier, soft_anti_affinity_weight_multiplier"),
        ({"weight_multipliers": {"ram_weight_multiplier": "-1"}},
         "weight_multipliers.ram_weight_multiplier",
         "weight_multipliers.ram_weight_multiplier must be a finite number, got '-1'"),
        ({"flavor": {"vcpus": 1}}, "flavor",
         "flavor must be a Flavor or a mapping, got {'vcpus': 1}"),
    ],
    ids=["count-zero", "count-string", "count-bool", "subset-zero", "attempts-zero",
         "seed-bool", "unknown-filter", "filters-as-string", "unknown-weigher",
         "ignore-as-string", "force-nodes-not-strings", "unknown-multiplier",
         "multiplier-string", "flavor-not-a-flavor"],
)
def test_request_validation_names_the_field(overrides, field, message):
    values = {"flavor": make_flavor(), **overrides}
    with pytest.raises(SchedulerInputError) as caught:
        RequestSpec(**values)
    assert caught.value.field == field
    assert str(caught.value) == message
