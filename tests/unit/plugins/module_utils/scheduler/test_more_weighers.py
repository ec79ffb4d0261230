"""One table per weigher: raw values, normalisation and multipliers, worked out by hand."""
from __future__ import annotations

import pytest
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import WEIGHERS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import (
    weigh_hosts,
)

from ._builders import make_host, make_spec

NOVA_DEFAULTS = {
    "RAMWeigher": ("ram_weight_multiplier", 1.0, 0),
    "CPUWeigher": ("cpu_weight_multiplier", 1.0, 0),
    "DiskWeigher": ("disk_weight_multiplier", 1.0, 0),
    "IoOpsWeigher": ("io_ops_weight_multiplier", -1.0, 0),
    "NumInstancesWeigher": ("num_instances_weight_multiplier", 0.0, None),
    "ServerGroupSoftAffinityWeigher": ("soft_affinity_weight_multiplier", 1.0, None),
    "ServerGroupSoftAntiAffinityWeigher": ("soft_anti_affinity_weight_multiplier", 1.0, None),
    "MetricsWeigher": ("metrics_weight_multiplier", 1.0, None),
    "BuildFailureWeigher": ("build_failure_weight_multiplier", 1000000.0, None),
    "HypervisorVersionWeigher": ("hypervisor_version_weight_multiplier", 1.0, None),
    "ImagePropertiesWeigher": ("image_props_weight_multiplier", 0.0, None),
    "PCIWeigher": ("pci_weight_multiplier", 1.0, None),
    # Berth's own.
    "HostRuleWeigher": ("host_rule_weight_multiplier", 1.0, None),
}


@pytest.mark.parametrize("name", sorted(WEIGHERS))
def test_weigher_declares_nova_option_default_and_bound(name):
    weigher = WEIGHERS[name]
    assert (weigher.multiplier_option, weigher.default_multiplier, weigher.minval) == \
        NOVA_DEFAULTS[name]


def weights_of(name, hosts, **spec_fields):
    """(host, raw, normalized, weighted) per host, best first."""
    weighed = weigh_hosts(hosts, [WEIGHERS[name]()], make_spec(**spec_fields))
    return [(item.host_state.host, item.weights[0].raw, pytest.approx(item.weights[0].normalized),
             pytest.approx(item.weight)) for item in weighed]


WEIGHER_CASES = [
    # CPU: 8 × 4.0 − 4 = 28 and 4 × 4.0 − 0 = 16; divided by 28
    ("CPUWeigher", [{"vcpus_total": 8, "vcpus_used": 4}, {"vcpus_total": 4}], {},
     [("hv1", 28.0, 1.0, 1.0), ("hv2", 16.0, 16 / 28, 16 / 28)]),
    # CPU overcommitted past the limit counts as 0 (lower bound 0)
    ("CPUWeigher", [{"vcpus_total": 2, "vcpus_used": 12}, {"vcpus_total": 4}], {},
     [("hv2", 16.0, 1.0, 1.0), ("hv1", -4.0, 0.0, 0.0)]),
    ("DiskWeigher", [{"free_disk_mb": 1024}, {"free_disk_mb": 4096}], {},
     [("hv2", 4096, 1.0, 1.0), ("hv1", 1024, 0.25, 0.25)]),
    # io ops: the busier host gets 1.0 × −1.0
    ("IoOpsWeigher", [{"num_io_ops": 4}, {"num_io_ops": 1}], {},
     [("hv2", 1, 0.25, -0.25), ("hv1", 4, 1.0, -1.0)]),
    # all equal: every weight 0, order kept
    ("IoOpsWeigher", [{"num_io_ops": 0}, {"num_io_ops": 0}], {},
     [("hv1", 0, 0.0, 0.0), ("hv2", 0, 0.0, 0.0)]),
    # multiplier 0.0 by default: the order is the candidates'; min-max, no fixed bound
    ("NumInstancesWeigher", [{"num_instances": 1}, {"num_instances": 9}], {},
     [("hv1", 1, 0.0, 0.0), ("hv2", 9, 1.0, 0.0)]),
    ("NumInstancesWeigher", [{"num_instances": 3}, {"num_instances": 9}, {"num_instances": 5}],
     {"weight_multipliers": {"num_instances_weight_multiplier": -1.0}},
     [("hv1", 3, 0.0, 0.0), ("hv3", 5, 1 / 3, -1 / 3), ("hv2", 9, 1.0, -1.0)]),
    # build failures: the count, min-max, times the negated multiplier (−1e6)
    ("BuildFailureWeigher", [{"failed_builds": 2}, {"failed_builds": 0}], {},
     [("hv2", 0, 0.0, 0.0), ("hv1", 2, 1.0, -1000000.0)]),
    # an unknown version counts as 0
    ("HypervisorVersionWeigher", [{"hypervisor_version": None}, {"hypervisor_version": 9000000}],
     {}, [("hv2", 9000000, 1.0, 1.0), ("hv1", 0, 0.0, 0.0)]),
    # metrics: 1 × cpu.percent + 2 × load; hv2 lacks load: weight_of_unavailable −10000
    # (metrics_required off; on, it is an error: test_nova_fidelity.py)
    ("MetricsWeigher", [{"metrics": {"cpu.percent": 10, "load": 2.0}},
                        {"metrics": {"cpu.percent": 50}},
                        {"metrics": {"cpu.percent": 20, "load": 0.5}}],
     {"metrics_weight_setting": ["cpu.percent=1", "load=2.0"], "metrics_required": False},
     [("hv3", 21.0, 1.0, 1.0), ("hv1", 14.0, (14 + 10000) / 10021, (14 + 10000) / 10021),
      ("hv2", -10000.0, 0.0, 0.0)]),
    # no setting: every raw 0.0
    ("MetricsWeigher", [{"metrics": {"cpu.percent": 10}}, {}], {},
     [("hv1", 0.0, 0.0, 0.0), ("hv2", 0.0, 0.0, 0.0)]),
    # soft affinity: members per host, min-max
    ("ServerGroupSoftAffinityWeigher", [{}, {}, {}],
     {"server_group": {"name": "g", "policy": "soft-affinity", "members": {"hv2": 2, "hv3": 1}}},
     [("hv2", 2, 1.0, 1.0), ("hv3", 1, 0.5, 0.5), ("hv1", 0, 0.0, 0.0)]),
    # soft anti-affinity: minus members; the emptiest host wins
    ("ServerGroupSoftAntiAffinityWeigher", [{}, {}, {}],
     {"server_group": {"name": "g", "policy": "soft-anti-affinity",
                       "members": {"hv1": 2, "hv2": 1}}},
     [("hv3", 0, 1.0, 1.0), ("hv2", -1, 0.5, 0.5), ("hv1", -2, 0.0, 0.0)]),
    # a group of another policy: no effect
    ("ServerGroupSoftAntiAffinityWeigher", [{}, {}],
     {"server_group": {"name": "g", "policy": "anti-affinity", "hosts": ["hv1"]}},
     [("hv1", 0, 0.0, 0.0), ("hv2", 0, 0.0, 0.0)]),
]


@pytest.mark.parametrize("name, hosts, spec_fields, expected", WEIGHER_CASES)
def test_weigher(name, hosts, spec_fields, expected):
    states = [make_host(f"hv{number + 1}", **fields) for number, fields in enumerate(hosts)]
    assert weights_of(name, states, **spec_fields) == expected


def test_aggregate_multiplier_overrides_minimum_wins():
    # RAM 15872 and 7936 → 1.0 and 0.5; hv1's aggregates say 0.5 and 0.25: 0.25 wins → 0.25
    hv1 = make_host("hv1", aggregates=[
        {"name": "a", "metadata": {"ram_weight_multiplier": "0.5"}},
        {"name": "b", "metadata": {"ram_weight_multiplier": "0.25"}}])
    hv2 = make_host("hv2", free_ram_mb=7936)
    weighed = weigh_hosts([hv1, hv2], [WEIGHERS["RAMWeigher"]()], make_spec())
    assert [(item.host_state.host, item.weight) for item in weighed] == [("hv2", 0.5),
                                                                         ("hv1", 0.25)]
    assert weighed[1].weights[0].multiplier == 0.25


def test_all_weighers_one_candidate_left_is_not_weighed():
    weighed = weigh_hosts([make_host()], [cls() for cls in WEIGHERS.values()], make_spec())
    assert (weighed[0].weight, weighed[0].weights) == (0.0, [])
