"""Host rules in the ledger, on a real SQLite file and a real PostgreSQL server: written and read
back idempotently, and re-checked by every claim inside its transaction - a launch's claim, a
move's claim - so that a rule written after the decision is not broken by its claim."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.request import Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_rules import HostRule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ClaimConflict

TINY = Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1)


def hypervisor(name, uuid, aggregates=()):
    return {
        "host": name, "nodename": name, "uuid": uuid, "service_up": True, "disabled": False,
        "vcpus_total": 8, "vcpus_used": 0, "total_usable_ram_mb": 8192, "free_ram_mb": 7680,
        "total_usable_disk_gb": 100, "free_disk_mb": 100 * 1024, "num_instances": 0, "num_io_ops": 0,
        "cpu_allocation_ratio": 1.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
        "reserved_host_memory_mb": 512, "reserved_host_disk_mb": 0, "domains": [],
        "aggregates": [{"name": name, "metadata": {}} for name in aggregates],
    }


HV1 = hypervisor("hv1", "hv-1", ["ssd"])
HV2 = hypervisor("hv2", "hv-2", ["old"])


def placement(name, state):
    return {"name": name, "host": state["host"], "hypervisor_uuid": state["uuid"]}


def record(*labels):
    return Request(flavor=TINY, labels=tuple(labels)).to_record()


DB_ON_SSD = HostRule(name="db-on-ssd", kind="must", aggregate="ssd", instance_label="db")


def test_a_rule_is_written_once_changed_by_name_and_deleted(ledger):
    ledger.sync_hypervisors([HV1, HV2])
    first = ledger.put_host_rule(DB_ON_SSD)
    assert (first["before"], first["changed"], first["known_aggregate"]) == (None, True, True)
    again = ledger.put_host_rule(DB_ON_SSD)
    assert again["changed"] is False and again["before"]["kind"] == "must"
    changed = ledger.put_host_rule(HostRule(name="db-on-ssd", kind="should", aggregate="ssd", instance_label="db",
                                            weight=3.0))
    assert changed["changed"] is True and changed["before"]["kind"] == "must"
    [listed] = ledger.host_rules()
    assert (listed["kind"], listed["weight"], listed["instance_label"]) == ("should", 3.0, "db")
    assert ledger.put_host_rule(HostRule(name="x", kind="must", aggregate="gpu", instance_name="*"),
                                dry_run=True)["known_aggregate"] is False
    assert [rule.name for rule in ledger.scheduler_rules()] == ["db-on-ssd"]
    assert ledger.delete_host_rule("db-on-ssd")["name"] == "db-on-ssd"
    assert ledger.delete_host_rule("db-on-ssd") is None and ledger.host_rules() == []


def test_a_dry_run_writes_nothing(ledger):
    ledger.sync_hypervisors([HV1])
    assert ledger.put_host_rule(DB_ON_SSD, dry_run=True)["changed"] is True
    assert ledger.host_rules() == []


def test_the_claim_refuses_a_placement_against_a_rule_written_after_the_decision(ledger):
    """The decision put the labelled instance on hv2 (no rule then); the rule is written before
    the claim, which refuses it, writing nothing; hv1 is claimed."""
    ledger.sync_hypervisors([HV1, HV2])
    ledger.put_host_rule(DB_ON_SSD)
    with pytest.raises(ClaimConflict, match="db-1 would break host rule db-on-ssd says its instances must be in "
                                            "aggregate ssd") as caught:
        ledger.claim([placement("db-1", HV2)], TINY, "a", request=record("db"))
    assert caught.value.host == "hv2"
    assert ledger.instances() == [] and ledger.claims() == []
    [row] = ledger.claim([placement("db-1", HV1)], TINY, "a", request=record("db"))
    assert row["host"] == "hv1"
    # An instance without the label is not the rule's.
    assert ledger.claim([placement("web-1", HV2)], TINY, "a", request=record("web"))[0]["host"] == "hv2"


@pytest.mark.parametrize("rule, refused_on", [
    (HostRule(name="r", kind="must_not", aggregate="old", instance_name="db-*"), "hv2"),
    (HostRule(name="r", kind="must", aggregate="ssd", instance_group="pg"), "hv2"),
    # Soft rules are preferences: no claim is refused for them.
    (HostRule(name="r", kind="should", aggregate="ssd", instance_label="db"), None),
    (HostRule(name="r", kind="should_not", aggregate="old", instance_label="db"), None),
], ids=["must-not-by-name", "must-by-group", "should", "should-not"])
def test_each_kind_at_the_claim(ledger, rule, refused_on):
    ledger.sync_hypervisors([HV1, HV2])
    ledger.create_server_group("pg", "soft-affinity")
    ledger.put_host_rule(rule)
    if refused_on is None:
        ledger.claim([placement("db-1", HV2)], TINY, "a", server_group="pg", request=record("db"))
        return
    with pytest.raises(ClaimConflict, match="would break host rule r") as caught:
        ledger.claim([placement("db-1", HV2)], TINY, "a", server_group="pg", request=record("db"))
    assert caught.value.host == refused_on


def test_a_move_claim_keeps_the_rules_its_instance_recorded_labels_select(ledger):
    ledger.sync_hypervisors([HV1, HV2, hypervisor("hv3", "hv-3", ["ssd"])])
    [row] = ledger.claim([placement("db-1", HV1)], TINY, "a", request=record("db"))
    ledger.put_host_rule(DB_ON_SSD)
    with pytest.raises(ClaimConflict, match="db-1 would break host rule db-on-ssd"):
        ledger.claim_move(row["uuid"], "hv-2", "mover")
    assert [claim["host"] for claim in ledger.claims(row["uuid"])] == ["hv1"]
    assert ledger.claim_move(row["uuid"], "hv-3", "mover")["host"] == "hv3"


def test_a_new_hard_rule_lists_the_instances_placed_against_it(ledger):
    ledger.sync_hypervisors([HV1, HV2])
    ledger.claim([placement("db-1", HV2)], TINY, "a", request=record("db"))
    ledger.claim([placement("db-2", HV1)], TINY, "a", request=record("db"))
    ledger.claim([placement("web-1", HV2)], TINY, "a", request=record())
    assert ledger.put_host_rule(DB_ON_SSD)["breaking"] == [{"name": "db-1", "host": "hv2"}]
    soft = HostRule(name="soft", kind="should", aggregate="ssd", instance_label="db")
    assert ledger.put_host_rule(soft)["breaking"] == []
