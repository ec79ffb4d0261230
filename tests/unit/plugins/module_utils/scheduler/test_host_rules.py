"""Host rules (scheduler/host_rules.py): which instances a rule selects, and each kind as
HostRuleFilter (the hard ones) and HostRuleWeigher (the soft ones) on a fleet worked by hand -
hv1 in aggregate ssd, hv2 in ssd and old, hv3 in none - on both engines."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import SchedulerInputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_rules import (
    HostRule,
    broken_rule,
    host_rule_from_dict,
    rules_for,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import FILTERS, WEIGHERS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import DEFAULT_FILTERS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import weigh_hosts

from ._builders import aggregate, make_host, make_spec


def fleet():
    return [make_host("hv1", aggregates=[aggregate("ssd")]),
            make_host("hv2", aggregates=[aggregate("ssd"), aggregate("old")]),
            make_host("hv3")]


def rule(kind, aggregate_name="ssd", weight=1.0, name=None, **selectors):
    return HostRule(name=name or f"{kind}-{aggregate_name}", kind=kind, aggregate=aggregate_name, weight=weight,
                    **(selectors or {"instance_label": "db"}))


# ---- selection ----------------------------------------------------------------------------------

@pytest.mark.parametrize("selectors, name, group, labels, selected", [
    ({"instance_name": "db-*"}, "db-1", None, (), True),
    ({"instance_name": "db-*"}, "web-1", None, (), False),
    ({"instance_name": "db-[12]"}, "db-3", None, (), False),
    ({"instance_group": "pg"}, "x-1", "pg", (), True),
    ({"instance_group": "pg"}, "x-1", None, (), False),
    ({"instance_label": "db"}, "x-1", None, ("web", "db"), True),
    ({"instance_label": "db"}, "x-1", None, ("web",), False),
    # Several selectors: every one must match.
    ({"instance_name": "db-*", "instance_label": "db"}, "db-1", None, ("db",), True),
    ({"instance_name": "db-*", "instance_label": "db"}, "db-1", None, (), False),
], ids=["pattern", "pattern-other", "pattern-class", "group", "no-group", "label", "other-label", "both",
        "both-one-missing"])
def test_a_rule_selects_by_name_pattern_group_label_or_all_of_them(selectors, name, group, labels, selected):
    assert rule("must", **selectors).selects(name, group, labels) is selected


def test_a_request_of_several_instances_is_held_to_every_rule_that_selects_one_of_them():
    first = rule("must", name="first", instance_name="web-1")
    other = rule("must_not", name="other", instance_name="db-*")
    assert rules_for([first, other], ["web-1", "web-2"], None, ()) == [first]
    # The claim re-checks each instance against its own rules.
    assert broken_rule([first], "web-2", None, (), []) is None
    assert broken_rule([first], "web-1", None, (), []) is first


@pytest.mark.parametrize("data, field", [
    ({"name": "r", "kind": "sometimes", "aggregate": "ssd", "instance_label": "db"}, "host_rule.kind"),
    ({"name": "r", "kind": "must", "instance_label": "db"}, "host_rule.aggregate"),
    ({"name": "r", "kind": "must", "aggregate": "ssd"}, "host_rule"),
    ({"name": "r", "kind": "should", "aggregate": "ssd", "instance_label": "db", "weight": 0}, "host_rule.weight"),
    ({"name": "r", "kind": "must", "aggregate": "ssd", "instance_label": "db", "host": "hv1"}, "host_rule.host"),
], ids=["kind", "no-aggregate", "no-selector", "weight-zero", "unknown-key"])
def test_a_bad_rule_names_its_field(data, field):
    with pytest.raises(SchedulerInputError) as caught:
        host_rule_from_dict(data)
    assert caught.value.field == field


def test_a_rule_reads_back_from_its_dict_form():
    written = rule("should_not", "old", weight=2.5, instance_name="web-*", instance_group="web")
    assert host_rule_from_dict(written.to_dict()) == written


# ---- each kind as the filter and as the weigher ---------------------------------------------

# Each kind: the hosts HostRuleFilter passes, and HostRuleWeigher's raw value per host.
KIND_CASES = [
    ("must", ["hv1", "hv2"], None),
    ("must_not", ["hv3"], None),
    ("should", ["hv1", "hv2", "hv3"], {"hv1": 1.0, "hv2": 1.0, "hv3": -1.0}),
    ("should_not", ["hv1", "hv2", "hv3"], {"hv1": -1.0, "hv2": -1.0, "hv3": 1.0}),
]


@pytest.mark.parametrize("kind, passed, raw", KIND_CASES, ids=[case[0] for case in KIND_CASES])
def test_each_kind_as_the_filter(kind, passed, raw):
    spec = make_spec(host_rules=[rule(kind)])
    host_filter = FILTERS["HostRuleFilter"]()
    verdicts = {host.host: host_filter.host_passes(host, spec) for host in fleet()}
    assert [name for name, rejection in verdicts.items() if rejection is None] == passed
    for name, rejection in verdicts.items():
        if rejection is not None:
            where = "must be" if kind == "must" else "must not be"
            assert rejection.message() == f"host rule: {kind}-ssd says its instances {where} in aggregate ssd"
            assert rejection.kind == "never"


@pytest.mark.parametrize("kind, passed, raw", KIND_CASES, ids=[case[0] for case in KIND_CASES])
def test_each_kind_as_the_weigher(kind, passed, raw):
    spec = make_spec(host_rules=[rule(kind)], weighers=["HostRuleWeigher"])
    weigher = WEIGHERS["HostRuleWeigher"]()
    values = {host.host: weigher.raw_value(host, spec) for host in fleet()}
    assert values == (raw or {"hv1": 0.0, "hv2": 0.0, "hv3": 0.0})


def test_soft_rules_add_their_weights_and_the_weigher_ranks_by_them():
    """should ssd (2) and should_not old (1): hv1 +2 +1 = 3, hv2 +2 -1 = 1, hv3 -2 +1 = -1;
    normalised (x + 1) / 4 with multiplier 1."""
    rules = [rule("should", "ssd", weight=2.0), rule("should_not", "old", weight=1.0)]
    weighed = weigh_hosts(fleet(), [WEIGHERS["HostRuleWeigher"]()], make_spec(host_rules=rules))
    assert [(item.host_state.host, item.weights[0].raw, item.weight) for item in weighed] == [
        ("hv1", 3.0, 1.0), ("hv2", 1.0, 0.5), ("hv3", -1.0, 0.0)]


def test_without_rules_the_filter_and_the_weigher_do_nothing():
    spec = make_spec(weighers=["HostRuleWeigher"])
    assert FILTERS["HostRuleFilter"]().is_noop(spec)
    assert "HostRuleFilter" in DEFAULT_FILTERS
    assert [WEIGHERS["HostRuleWeigher"]().raw_value(host, spec) for host in fleet()] == [0.0, 0.0, 0.0]
    # A soft rule alone leaves the filter a no-op; a hard one does not.
    assert FILTERS["HostRuleFilter"]().is_noop(make_spec(host_rules=[rule("should")]))
    assert not FILTERS["HostRuleFilter"]().is_noop(make_spec(host_rules=[rule("must_not")]))


@pytest.mark.parametrize("engine", ["plain", "vectorized"])
def test_the_decision_names_the_rule_on_both_engines(engine):
    spec = make_spec(host_rules=[rule("must", "ssd", name="db-on-ssd"), rule("must_not", "old", name="db-not-old")],
                     count=1, engine=engine, explain="full")
    decision = schedule(fleet(), spec)
    assert [placed.host for placed in decision.placements] == ["hv1"]
    rejections = {item.host: item.message() for item in decision.rejections}
    assert rejections == {"hv2": "host rule: db-not-old says its instances must not be in aggregate old",
                          "hv3": "host rule: db-on-ssd says its instances must be in aggregate ssd"}
    failed = schedule(fleet(), make_spec(host_rules=[rule("must", "gpu", name="db-on-gpu")], engine=engine))
    assert not failed.ok
    assert failed.summary == "0/3 hosts are available for instance 1 of 1: 3 against host rule db-on-gpu"


@pytest.mark.parametrize("engine", ["plain", "vectorized"])
def test_a_should_rule_moves_the_choice_against_free_ram(engine):
    """hv3 has the most free RAM; a should rule on ssd with a multiplier above the RAM weigher's
    takes the instance to hv1 or hv2 (the one with more free RAM of the two)."""
    hosts = fleet()
    hosts[0].free_ram_mb = 8000
    hosts[1].free_ram_mb = 4000
    weighers = ["RAMWeigher", "HostRuleWeigher"]
    spread = schedule(hosts, make_spec(weighers=weighers, engine=engine))
    assert spread.placements[0].host == "hv3"
    ruled = schedule(hosts, make_spec(weighers=weighers, engine=engine, host_rules=[rule("should")],
                                      weight_multipliers={"host_rule_weight_multiplier": 2.0}))
    assert ruled.placements[0].host == "hv1"
