from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import WEIGHERS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
    DEFAULT_WEIGHERS,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import (
    BaseWeigher,
    normalize,
    weigh_hosts,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.ram import RAMWeigher

from ._builders import make_host, make_spec

NORMALIZE_CASES = [
    ([], None, None, []),
    ([7, 7, 7], None, None, [0.0, 0.0, 0.0]),
    ([42], None, None, [0.0]),
    # with the bound at 0, a lone positive value is the largest: 42 / 42
    ([42], 0, None, [1.0]),
    ([10, 20, 30], None, None, [0.0, 0.5, 1.0]),
    ([-10, 0, 10], None, None, [0.0, 0.5, 1.0]),
    ([0, 500, 1000], 0, None, [0.0, 0.5, 1.0]),
    # -1000 counts as 0; the rest over the largest, 2000
    ([-1000, 0, 1000, 2000], 0, None, [0.0, 0.0, 0.5, 1.0]),
    # a min-max would give [0, 0.5, 1]; with the bound at 0 it is 500/1500 and 1000/1500
    ([500, 1000, 1500], 0, None, [1 / 3, 2 / 3, 1.0]),
    ([-5, -1], 0, None, [0.0, 0.0]),
    ([2000, 2000], 0, None, [1.0, 1.0]),
    ([0, 50, 200], 0, 100, [0.0, 0.5, 1.0]),
]
NORMALIZE_IDS = ["empty", "all-equal-gives-zeros", "one-value", "one-value-with-bound",
                 "min-max", "min-max-negative", "bound-at-zero",
                 "negative-clamped-at-bound", "bound-differs-from-min-max",
                 "all-below-bound-gives-zeros", "all-equal-above-bound", "fixed-max-clamps"]


@pytest.mark.parametrize("values, minval, maxval, expected", NORMALIZE_CASES,
                         ids=NORMALIZE_IDS)
def test_normalize(values, minval, maxval, expected):
    assert normalize(values, minval=minval, maxval=maxval) == pytest.approx(expected)


def test_ram_weigher_declares_nova_defaults():
    weigher = RAMWeigher()
    assert isinstance(weigher, BaseWeigher)
    assert weigher.name == "RAMWeigher"
    assert weigher.multiplier_option == "ram_weight_multiplier"
    assert weigher.default_multiplier == 1.0
    assert weigher.minval == 0
    assert weigher.raw_value(make_host(free_ram_mb=-300), make_spec()) == -300
    assert WEIGHERS["RAMWeigher"] is RAMWeigher
    # Nova's weight_classes default is all_weighers.
    assert DEFAULT_WEIGHERS == [
        "RAMWeigher", "CPUWeigher", "DiskWeigher", "IoOpsWeigher", "NumInstancesWeigher",
        "ServerGroupSoftAffinityWeigher", "ServerGroupSoftAntiAffinityWeigher", "MetricsWeigher",
        "BuildFailureWeigher", "HypervisorVersionWeigher", "ImagePropertiesWeigher", "PCIWeigher",
        "HostRuleWeigher",
    ]


# Each row: free_ram_mb of hv1, hv2, hv3 (in that order), multipliers, expected order,
# expected total weight per host.
RAM_WEIGH_CASES = [
    # 1000/3000, 3000/3000, 2000/3000
    ([1000, 3000, 2000], {}, ["hv2", "hv3", "hv1"], {"hv1": 1 / 3, "hv2": 1.0, "hv3": 2 / 3}),
    ([1000, 3000, 2000], {"ram_weight_multiplier": -1.0}, ["hv1", "hv3", "hv2"],
     {"hv1": -1 / 3, "hv2": -1.0, "hv3": -2 / 3}),
    ([1000, 3000, 2000], {"ram_weight_multiplier": 2.0}, ["hv2", "hv3", "hv1"],
     {"hv1": 2 / 3, "hv2": 2.0, "hv3": 4 / 3}),
    ([1000, 3000, 2000], {"ram_weight_multiplier": 0.0}, ["hv1", "hv2", "hv3"],
     {"hv1": 0.0, "hv2": 0.0, "hv3": 0.0}),
    # -500 counts as 0 and so ties with hv2, which stays behind it
    ([-500, 0, 1000], {}, ["hv3", "hv1", "hv2"], {"hv1": 0.0, "hv2": 0.0, "hv3": 1.0}),
    ([2000, 2000, 2000], {}, ["hv1", "hv2", "hv3"], {"hv1": 1.0, "hv2": 1.0, "hv3": 1.0}),
]
RAM_WEIGH_IDS = ["spread-by-default", "negative-multiplier-stacks", "multiplier-scales",
                 "zero-multiplier-keeps-order", "negative-free-counts-as-zero",
                 "ties-keep-order"]


@pytest.mark.parametrize("free_ram_mb, multipliers, order, weights", RAM_WEIGH_CASES,
                         ids=RAM_WEIGH_IDS)
def test_ram_weigher(free_ram_mb, multipliers, order, weights):
    hosts = [make_host(f"hv{number}", free_ram_mb=free)
             for number, free in enumerate(free_ram_mb, start=1)]
    weighed = weigh_hosts(hosts, [RAMWeigher()], make_spec(weight_multipliers=multipliers))
    assert [candidate.host_state.host for candidate in weighed] == order
    assert {c.host_state.host: c.weight for c in weighed} == pytest.approx(weights)
    assert [hosts[candidate.position].host for candidate in weighed] == order


def test_weight_details_show_each_step():
    hosts = [make_host("hv1", free_ram_mb=-500), make_host("hv2", free_ram_mb=4000)]
    weighed = weigh_hosts(hosts, [RAMWeigher()],
                          make_spec(weight_multipliers={"ram_weight_multiplier": -2.0}))
    last = weighed[-1]
    assert last.host_state.host == "hv2"
    (detail,) = last.weights
    assert (detail.name, detail.raw, detail.normalized, detail.multiplier, detail.weighted) == (
        "RAMWeigher", 4000, 1.0, -2.0, -2.0)
    assert weighed[0].weights[0].raw == -500
    assert weighed[0].weights[0].normalized == 0.0


def test_a_lone_candidate_is_not_weighed():
    (only,) = weigh_hosts([make_host(free_ram_mb=5000)], [RAMWeigher()], make_spec())
    assert (only.position, only.weight, only.weights) == (0, 0.0, [])


def test_no_weighers_keep_the_candidates_order():
    hosts = [make_host("hv1", free_ram_mb=10), make_host("hv2", free_ram_mb=9000)]
    weighed = weigh_hosts(hosts, [], make_spec())
    assert [(c.host_state.host, c.weight, c.weights) for c in weighed] == [
        ("hv1", 0.0, []), ("hv2", 0.0, [])]
