"""A scheduler hint given without the filter that reads it cannot act (issue 33, item 4). Nova
ignores it without a word; Berth's request lists such hints (RequestSpec.idle_hints) so that a
launch can refuse them and a move can say so, and a decision made with one says so in its
summary instead of "none removed"."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    DIFFERENT_HOST_FILTER,
    FILTER_NAMES,
    JSON_FILTER,
    SAME_HOST_FILTER,
    SIMPLE_CIDR_AFFINITY_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import FILTERS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
    DEFAULT_FILTERS,
    HINT_FILTERS,
    HINT_KEYS,
    IdleHint,
)

from ._builders import make_host, make_spec

QUERY = '[">=", "$free_ram_mb", 1024]'


@pytest.mark.parametrize("hints, filters, idle", [
    ({"different_host": ["u1"]}, DEFAULT_FILTERS, [("different_host", DIFFERENT_HOST_FILTER)]),
    ({"different_host": "u1"}, DEFAULT_FILTERS, [("different_host", DIFFERENT_HOST_FILTER)]),
    ({"different_host": ["u1"]}, [*DEFAULT_FILTERS, DIFFERENT_HOST_FILTER], []),
    ({"same_host": ["u1"]}, DEFAULT_FILTERS, [("same_host", SAME_HOST_FILTER)]),
    ({"same_host": ["u1"]}, [SAME_HOST_FILTER], []),
    ({"query": QUERY}, DEFAULT_FILTERS, [("query", JSON_FILTER)]),
    ({"query": QUERY}, [JSON_FILTER], []),
    ({"build_near_host_ip": "10.0.0.7", "cidr": "/16"}, DEFAULT_FILTERS,
     [("build_near_host_ip", SIMPLE_CIDR_AFFINITY_FILTER), ("cidr", SIMPLE_CIDR_AFFINITY_FILTER)]),
    ({"build_near_host_ip": "10.0.0.7"}, [SIMPLE_CIDR_AFFINITY_FILTER], []),
    ({"cidr": "/16"}, [SIMPLE_CIDR_AFFINITY_FILTER], [("cidr", None)]),
    ({"cidr": "/16"}, DEFAULT_FILTERS, [("cidr", None)]),
    ({"same_host": ["u1"], "different_host": ["u2"]}, [SAME_HOST_FILTER],
     [("different_host", DIFFERENT_HOST_FILTER)]),
    # Given empty, a hint asks for nothing.
    ({"different_host": [], "query": ""}, DEFAULT_FILTERS, []),
    ({}, [], []),
], ids=["different-host", "different-host-one-uuid", "different-host-enabled", "same-host",
        "same-host-enabled", "query", "query-enabled", "near-ip-and-cidr", "near-ip-enabled",
        "cidr-alone-enabled", "cidr-alone", "one-of-two", "empty", "none"])
def test_idle_hints(hints, filters, idle):
    spec = make_spec(scheduler_hints=hints, enabled_filters=list(filters))
    assert [(item.hint, item.filter) for item in spec.idle_hints()] == idle


def test_the_group_hint_is_never_idle():
    """It only names the server group; the group's policy is held by its own filters and the claim."""
    spec = make_spec(scheduler_hints={"group": "web"}, enabled_filters=[],
                     server_group={"name": "web", "policy": "anti-affinity"})
    assert spec.idle_hints() == []


def test_every_hint_names_a_registered_filter_that_reads_it():
    assert list(HINT_FILTERS) == list(HINT_KEYS)
    for hint, reader in HINT_FILTERS.items():
        if reader is None:
            continue
        assert reader in FILTER_NAMES and reader in FILTERS, hint
        # The filter does something for the hint (and nothing without it).
        spec = make_spec(scheduler_hints={"build_near_host_ip": "10.0.0.7", hint: {
            "same_host": ["u1"], "different_host": ["u1"], "query": QUERY,
            "build_near_host_ip": "10.0.0.7", "cidr": "/16"}[hint]})
        assert not FILTERS[reader]().is_noop(spec), hint
        assert FILTERS[reader]().is_noop(make_spec()), hint


@pytest.mark.parametrize("item, text", [
    (IdleHint("different_host", DIFFERENT_HOST_FILTER),
     "scheduler_hints.different_host needs DifferentHostFilter, which enabled_filters lacks"),
    (IdleHint("cidr", None),
     "scheduler_hints.cidr needs scheduler_hints.build_near_host_ip, the address it is a prefix of"),
], ids=["filter", "cidr"])
def test_an_idle_hint_names_the_hint_and_what_it_needs(item, text):
    assert str(item) == text
    assert item.field == f"scheduler_hints.{item.hint}"


@pytest.mark.parametrize("engine", ["plain", "vectorized"])
def test_a_decision_with_an_idle_hint_says_it_did_not_hold(engine):
    """The hint asks to avoid u1's host, which is the roomiest; without DifferentHostFilter the
    engine places there anyway, and its summary and record say why that was allowed."""
    hosts = [make_host("hv1", instances=["u1"]), make_host("hv2", free_ram_mb=4096)]
    spec = make_spec(scheduler_hints={"different_host": ["u1"]}, engine=engine)
    decision = schedule(hosts, spec)
    assert decision.placements[0].host == "hv1"
    expected = "scheduler_hints.different_host needs DifferentHostFilter, which enabled_filters lacks"
    assert decision.idle_hints == [expected]
    assert decision.summary == f"placed 1 instance on hv1; hints not held: {expected}"
    assert decision.to_dict()["idle_hints"] == [expected]


def test_a_decision_whose_hints_act_says_nothing_more():
    hosts = [make_host("hv1", instances=["u1"]), make_host("hv2", free_ram_mb=4096)]
    spec = make_spec(scheduler_hints={"different_host": ["u1"]},
                     enabled_filters=[*DEFAULT_FILTERS, DIFFERENT_HOST_FILTER])
    decision = schedule(hosts, spec)
    assert decision.placements[0].host == "hv2"
    assert decision.idle_hints == []
    assert decision.summary == "placed 1 instance on hv2"


def test_a_failed_decision_says_it_too():
    hosts = [make_host("hv1", free_ram_mb=100)]
    spec = make_spec(scheduler_hints={"query": QUERY})
    decision = schedule(hosts, spec)
    assert not decision.ok
    assert decision.summary.endswith(
        "; hints not held: scheduler_hints.query needs JsonFilter, which enabled_filters lacks")
