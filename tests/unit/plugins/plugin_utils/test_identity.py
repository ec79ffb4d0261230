"""A hypervisor's identity in the ledger cannot be taken over: a sync whose host UUID the ledger
holds for another name or URI is refused for that host, reported as a conflict naming both, and
changes nothing of the owner's; only the operator re-homes a UUID. And a URI the operator's
policy refuses is never recorded."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ACTIVE

from test_ledger import TINY, domain, host

HV1_URI = "qemu+ssh://hv1.example.com/system"
HV2_URI = "qemu+ssh://hv2.example.com/system"


def synced(name, uuid, uri, domains=()):
    return {**host(name, uuid, domains=domains), "uri": uri}


def launch_on_hv1(ledger, name="web-1"):
    [claimed] = ledger.claim([{"name": name, "host": "hv1", "hypervisor_uuid": "uuid-1"}], TINY, "test")
    ledger.mark_active(claimed["uuid"])
    return claimed["uuid"]


def test_a_second_host_reporting_an_owned_uuid_is_refused_and_the_owner_and_its_instances_stay(ledger):
    ledger.tracker_sync([synced("hv1", "uuid-1", HV1_URI), synced("hv2", "uuid-2", HV2_URI)])
    instance = launch_on_hv1(ledger)
    before = {row["uuid"]: row for row in ledger.hypervisors()}

    # hv2 now reports hv1's UUID (a copied SMBIOS, a copied host_uuid, or a hostile host) and no
    # domain: were it believed, web-1 would be missing, and a delete would go to hv2.
    report = ledger.tracker_sync([synced("hv2", "uuid-1", HV2_URI)])
    [conflict] = report["identity_conflicts"]
    assert (conflict["host"], conflict["uuid"], conflict["owner"], conflict["owned"]) == ("hv2", "uuid-1", "hv1", True)
    assert "hv2 reports host UUID uuid-1" in conflict["reason"] and "hypervisor hv1" in conflict["reason"]
    assert report["missing_instances"] == [] and report["hypervisors"] == []
    after = {row["uuid"]: row for row in ledger.hypervisors()}
    owner = after["uuid-1"]
    assert (owner["host"], owner["uri"], owner["generation"], owner["sync_status"]) == (
        "hv1", HV1_URI, before["uuid-1"]["generation"], "up")
    # hv2's own row says why it is not believed; nothing else of it moved.
    assert after["uuid-2"]["sync_status"] == "down" and "identity conflict" in after["uuid-2"]["down_reason"]
    [row] = ledger.instances(["web-1"])
    assert (row["uuid"], row["host"], row["hypervisor_uuid"], row["state"], row["missing_since"]) == (
        instance, "hv1", "uuid-1", ACTIVE, None)
    assert [(c["host"], c["hypervisor_uuid"]) for c in ledger.claims(instance)] == [("hv1", "uuid-1")]

    # In one sync with its owner: the owner is written, the other refused.
    both = ledger.tracker_sync([synced("hv1", "uuid-1", HV1_URI, [domain(instance, "web-1")]),
                                synced("hv2", "uuid-1", HV2_URI)])
    assert [entry["host"] for entry in both["hypervisors"]] == ["hv1"]
    assert [(c["host"], c["owner"]) for c in both["identity_conflicts"]] == [("hv2", "hv1")]


def test_the_same_name_at_another_address_is_a_conflict_too_but_other_parameters_are_not(ledger):
    ledger.tracker_sync([synced("hv1", "uuid-1", HV1_URI)])
    moved = ledger.tracker_sync([synced("hv1", "uuid-1", "qemu+ssh://elsewhere.example.net/system")])
    assert [(c["host"], c["owner_uri"]) for c in moved["identity_conflicts"]] == [("hv1", HV1_URI)]
    [row] = ledger.hypervisors()
    assert (row["uri"], row["sync_status"]) == (HV1_URI, "up")
    keyed = ledger.tracker_sync([synced("hv1", "uuid-1", HV1_URI + "?keyfile=/root/.ssh/other")],
                                uri_policy=UriPolicy.from_settings({"allow_parameters": ["keyfile"]}))
    assert keyed["identity_conflicts"] == [] and keyed["hypervisors"][0]["host"] == "hv1"


def test_two_new_hosts_reporting_one_uuid_in_one_sync_are_both_refused(ledger):
    report = ledger.tracker_sync([synced("hv1", "uuid-x", HV1_URI), synced("hv2", "uuid-x", HV2_URI)])
    assert sorted((c["host"], c["owner"], c["owned"]) for c in report["identity_conflicts"]) == [
        ("hv1", "hv2", False), ("hv2", "hv1", False)]
    assert ledger.hypervisors() == []


def test_the_test_drivers_derived_uuids_keep_syncing_as_they_always_have(ledger):
    # The test driver reports no UUID of its own: each node file's URI gives one (uuid5 of it).
    first = ledger.tracker_sync([synced("lab1", "derived-1", "test:///srv/lab1.xml"),
                                 synced("lab2", "derived-2", "test:///srv/lab2.xml")],
                                uri_policy=UriPolicy.from_settings({"allow_test_files": True}))
    again = ledger.tracker_sync([synced("lab1", "derived-1", "test:///srv/lab1.xml"),
                                 synced("lab2", "derived-2", "test:///srv/lab2.xml")],
                                uri_policy=UriPolicy.from_settings({"allow_test_files": True}))
    assert first["identity_conflicts"] == again["identity_conflicts"] == []
    assert sorted(entry["host"] for entry in again["hypervisors"]) == ["lab1", "lab2"]


def test_only_the_operator_rehomes_a_uuid_with_the_reason_recorded_and_its_instances_follow(ledger):
    ledger.tracker_sync([synced("hv1", "uuid-1", HV1_URI)])
    instance = launch_on_hv1(ledger)
    dry = ledger.rehome_hypervisor("uuid-1", "hv1b", "qemu+ssh://hv1b.example.com/system", "renamed", dry_run=True)
    assert dry["changed"] and ledger.hypervisors()[0]["host"] == "hv1"
    done = ledger.rehome_hypervisor("hv1", "hv1b", "qemu+ssh://hv1b.example.com/system", "renamed, OPS-1300")
    assert (done["changed"], done["was"]) == (True, {"host": "hv1", "uri": HV1_URI})
    [row] = ledger.hypervisors()
    assert (row["host"], row["uri"], row["rehomed_reason"]) == (
        "hv1b", "qemu+ssh://hv1b.example.com/system", "renamed, OPS-1300") and row["rehomed_at"]
    assert ledger.instances(["web-1"])[0]["host"] == "hv1b"
    # The new owner syncs; the old name is the conflict now.
    report = ledger.tracker_sync([synced("hv1b", "uuid-1", "qemu+ssh://hv1b.example.com/system",
                                         [domain(instance, "web-1")]),
                                  synced("hv1", "uuid-1", HV1_URI)])
    assert [entry["host"] for entry in report["hypervisors"]] == ["hv1b"]
    assert [(c["host"], c["owner"]) for c in report["identity_conflicts"]] == [("hv1", "hv1b")]
    assert not ledger.rehome_hypervisor("hv1b", "hv1b", None, "again")["changed"]


def test_a_rehome_onto_a_name_another_uuid_holds_is_refused_naming_it(ledger):
    ledger.tracker_sync([synced("hv1", "uuid-1", HV1_URI), synced("hv2", "uuid-2", HV2_URI)])
    with pytest.raises(InputError, match="hypervisor hv2 is in the ledger already, with host UUID uuid-2"):
        ledger.rehome_hypervisor("hv1", "hv2", None, "merge")


def test_a_uri_the_policy_refuses_is_never_recorded(ledger):
    evil = "qemu+ext:///system?command=/tmp/evil"
    report = ledger.tracker_sync([synced("hv1", "uuid-1", evil)])
    assert report["hypervisors"] == [] and ledger.hypervisors() == []
    ledger.tracker_sync([synced("hv1", "uuid-1", HV1_URI)])
    ledger.tracker_sync([synced("hv1", "uuid-1", evil)])
    [row] = ledger.hypervisors()
    assert row["uri"] == HV1_URI and row["sync_status"] == "down"
    assert "ext transport runs the program" in row["down_reason"]
    assert ledger.sync_hypervisors([synced("hv1", "uuid-1", evil)]) == []
    assert ledger.hypervisors()[0]["uri"] == HV1_URI


def test_a_recorded_uri_berth_would_never_open_is_no_address_to_defend(ledger):
    ledger.tracker_sync([synced("hv1", "uuid-1", HV1_URI)])
    # Someone with write access to the ledger points hv1's row at a program of theirs.
    with ledger.engine.begin() as db:
        db.exec_driver_sql("UPDATE hypervisors SET uri = 'qemu+ext:///system?command=/tmp/evil'")
    report = ledger.tracker_sync([synced("hv1", "uuid-1", HV1_URI)])
    assert report["identity_conflicts"] == []
    assert ledger.hypervisors()[0]["uri"] == HV1_URI


def test_a_launch_on_live_facts_takes_no_host_the_ledger_did_not_record(ledger):
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
    from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import NOT_TAKEN, read_fleet
    from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

    ledger.tracker_sync([synced("hv1", "uuid-1", HV1_URI)])
    # The inventory's live facts: hv2 reports hv1's UUID. A claim on it would land on hv1's row.
    states = [host("hv1", "uuid-1"), host("hv2", "uuid-1")]
    fleet = read_fleet(Settings(source="inventory"), {}, RequestSpec(flavor=TINY), ledger, sync=True, hosts=states)
    seen = {state["host"]: state for state in (fleet.hosts[i].to_dict() for i in range(len(fleet.hosts)))}
    assert seen["hv1"]["service_up"] and not seen["hv2"]["service_up"]
    assert seen["hv2"]["down_reason"] == NOT_TAKEN
