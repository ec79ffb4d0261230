"""The ledger's side of the lifecycle verbs, on a real SQLite file and a real PostgreSQL server:
power states (claims kept), resize on the instance's own host (one transaction with the
re-check, the claim holding the larger size meanwhile, restored after a failure) and onto
another host (the destination claimed for the new flavor), and the tracker sync following
domains' power states."""

from __future__ import annotations

import time

import pytest
from test_ledger import HV1, HV2, domain, host, placement

from ansible_collections.berth.fleet.plugins.module_utils.errors import LedgerError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    ACTIVE,
    PAUSED,
    STOPPED,
    ClaimConflict,
)

MEDIUM = Flavor(name="medium", vcpus=2, memory_mb=4096, root_gb=10)
SMALL = Flavor(name="small", vcpus=1, memory_mb=2048, root_gb=10)
TINY = Flavor(name="tiny", vcpus=1, memory_mb=512, root_gb=1)
BIGGER = Flavor(name="bigger", vcpus=2, memory_mb=5120, root_gb=20)
TOO_BIG = Flavor(name="too-big", vcpus=2, memory_mb=6144, root_gb=20)
# More vCPUs, less memory than MEDIUM: during the resize the claim holds the larger of each.
WIDE = Flavor(name="wide", vcpus=4, memory_mb=2048, root_gb=10)


def active(ledger, name, flavor, state=None):  # noqa: F811  (the fixture's value, passed in)
    [row] = ledger.claim([placement(name, state or HV1)], flavor, "launch")
    return ledger.mark_active(row["uuid"])


def usage(ledger, hv_name="hv1"):
    [row] = [hv for hv in ledger.hypervisors() if hv["host"] == hv_name]
    return row["usage"]


def only_claim(ledger, instance):
    [claim] = ledger.claims(instance["uuid"])
    return claim


# ---- power states ------------------------------------------------------------------------------

def test_a_stopped_or_paused_instance_keeps_its_claim_and_a_building_one_has_no_power_state(ledger):  # noqa: F811
    ledger.sync_hypervisors([HV1])
    web = active(ledger, "web-1", SMALL)
    claim = only_claim(ledger, web)
    stopped, changed = ledger.set_instance_state(web["uuid"], STOPPED)
    assert (stopped["state"], changed) == (STOPPED, True)
    assert ledger.set_instance_state(web["uuid"], STOPPED)[1] is False
    assert ledger.set_instance_state(web["uuid"], PAUSED)[0]["state"] == PAUSED
    assert only_claim(ledger, web) == claim
    assert usage(ledger)["free_ram_mb"] == 7680 - 2048
    [building] = ledger.claim([placement("new-1", HV1)], SMALL, "launch")
    with pytest.raises(LedgerError, match="new-1 is BUILDING: only ACTIVE, STOPPED, PAUSED instances"):
        ledger.set_instance_state(building["uuid"], STOPPED)


def test_a_launch_name_stands_for_itself_and_its_indexed_instances_in_index_order(ledger):  # noqa: F811
    ledger.sync_hypervisors([host(vcpus_total=32, total_ram_mb=65536)])
    names = ["web-10", "web-2", "web", "web-1", "web-a", "web-2b", "web-1-x", "webx-1"]
    ledger.claim([placement(name) for name in names], SMALL, "launch")
    assert [row["name"] for row in ledger.launch_instances("web")] == ["web", "web-1", "web-2", "web-10"]
    assert ledger.launch_instances("nothing") == []


# ---- resize on the instance's own host -----------------------------------------------------------

def test_a_resize_in_place_counts_its_own_claim_as_room_and_finishes_with_the_new_flavor(ledger):  # noqa: F811
    ledger.sync_hypervisors([HV1])  # 8192 MB, 512 reserved: 7680 MB for instances
    web = active(ledger, "web-1", MEDIUM)
    active(ledger, "db-1", SMALL)
    assert usage(ledger)["free_ram_mb"] == 7680 - 4096 - 2048
    # 1536 MB free: a new 5120 MB instance would not fit, but web-1 gives its 4096 MB back first.
    claim = ledger.resize_claim(web["uuid"], BIGGER, "resizer", lease_s=60)
    assert (claim["memory_mb"], claim["vcpus"], claim["owner"]) == (5120, 2, "resizer")
    assert claim["lease_expires_at"] is not None
    assert usage(ledger)["free_ram_mb"] == 7680 - 5120 - 2048
    resized = ledger.finish_move(web["uuid"], claim["id"], BIGGER)
    assert (resized["flavor"], resized["memory_mb"], resized["root_gb"], resized["host"]) == ("bigger", 5120, 20, "hv1")
    held = only_claim(ledger, web)
    assert (held["id"], held["memory_mb"], held["disk_mb"], held["lease_expires_at"]) == (
        claim["id"], 5120, 20 * 1024, None)


def test_a_resize_in_place_that_does_not_fit_changes_nothing(ledger):  # noqa: F811
    ledger.sync_hypervisors([HV1])
    web = active(ledger, "web-1", MEDIUM)
    active(ledger, "db-1", SMALL)
    before = (only_claim(ledger, web), usage(ledger))
    with pytest.raises(ClaimConflict, match="hv1: insufficient RAM"):
        ledger.resize_claim(web["uuid"], TOO_BIG, "resizer")
    assert (only_claim(ledger, web), usage(ledger)) == before
    assert ledger.instances(["web-1"])[0]["flavor"] == "medium"


def test_a_resize_in_place_holds_the_larger_of_both_sizes_until_done_and_a_failure_restores_the_old(ledger):  # noqa: F811
    ledger.sync_hypervisors([HV1])
    web = active(ledger, "web-1", MEDIUM)
    old = only_claim(ledger, web)
    during = ledger.resize_claim(web["uuid"], WIDE, "resizer")
    assert (during["vcpus"], during["memory_mb"]) == (4, 4096)
    restored = ledger.restore_claim(during["id"], MEDIUM)
    assert {key: restored[key] for key in ("vcpus", "memory_mb", "disk_mb", "lease_expires_at")} == {
        key: old[key] for key in ("vcpus", "memory_mb", "disk_mb", "lease_expires_at")}
    assert ledger.instances(["web-1"])[0]["flavor"] == "medium"
    assert usage(ledger)["vcpus_used"] == 2
    # A restore never grows a claim: that needs resize_claim's re-check under lock.
    with pytest.raises(LedgerError, match="holds less vcpus, memory_mb than bigger asks"):
        ledger.restore_claim(restored["id"], Flavor(name="bigger", vcpus=3, memory_mb=5000, root_gb=10))


def test_a_resize_in_place_of_an_instance_that_is_moving_is_refused(ledger):  # noqa: F811
    ledger.sync_hypervisors([HV1, HV2])
    web = active(ledger, "web-1", SMALL)
    ledger.claim_move(web["uuid"], "hv-2", "mover")
    with pytest.raises(LedgerError, match="web-1 holds 2 claim.s., not one on hv1: a move of it is under way"):
        ledger.resize_claim(web["uuid"], MEDIUM, "resizer")


# ---- resize onto another host --------------------------------------------------------------------

def test_a_resize_elsewhere_claims_the_destination_for_the_new_flavor_then_drops_the_source(ledger):  # noqa: F811
    ledger.sync_hypervisors([HV1, HV2])
    web = active(ledger, "web-1", SMALL)
    destination = ledger.claim_move(web["uuid"], "hv-2", "resizer", lease_s=60, flavor=MEDIUM)
    assert sorted((c["host"], c["memory_mb"]) for c in ledger.claims(web["uuid"])) == [("hv1", 2048), ("hv2", 4096)]
    resized = ledger.finish_move(web["uuid"], destination["id"], MEDIUM)
    assert (resized["host"], resized["flavor"], resized["vcpus"]) == ("hv2", "medium", 2)
    held = only_claim(ledger, web)
    assert (held["host"], held["memory_mb"], held["lease_expires_at"]) == ("hv2", 4096, None)
    assert usage(ledger, "hv1")["free_ram_mb"] == 7680


def test_a_resize_elsewhere_that_does_not_fit_there_claims_nothing(ledger):  # noqa: F811
    ledger.sync_hypervisors([HV1, HV2])
    web = active(ledger, "web-1", SMALL)
    active(ledger, "big-1", Flavor(name="huge", vcpus=1, memory_mb=6000, root_gb=1), HV2)
    with pytest.raises(ClaimConflict, match="hv2: insufficient RAM"):
        ledger.claim_move(web["uuid"], "hv-2", "resizer", flavor=MEDIUM)
    assert [c["host"] for c in ledger.claims(web["uuid"])] == ["hv1"]


def test_a_stopped_instance_that_moves_keeps_no_lease(ledger):  # noqa: F811
    ledger.sync_hypervisors([HV1, HV2])
    web = active(ledger, "web-1", SMALL)
    ledger.set_instance_state(web["uuid"], STOPPED)
    destination = ledger.claim_move(web["uuid"], "hv-2", "mover", lease_s=60)
    moved = ledger.finish_move(web["uuid"], destination["id"])
    assert (moved["state"], only_claim(ledger, web)["lease_expires_at"]) == (STOPPED, None)


# ---- the tracker sync follows power states ----------------------------------------------------------

def with_domains(*domains, gathered_at=None):
    state = host("hv1", "hv-1", vcpus_total=8, total_ram_mb=8192, domains=list(domains))
    if gathered_at is not None:
        state["gathered_at"] = gathered_at
    return state


def test_the_sync_makes_the_ledger_follow_each_domains_power_state_and_reports_it(ledger):  # noqa: F811
    ledger.sync_hypervisors([HV1])
    off, on, paused, same = (active(ledger, name, TINY) for name in ("off-1", "on-1", "paused-1", "same-1"))
    ledger.set_instance_state(on["uuid"], STOPPED)
    state = with_domains({**domain(off["uuid"], "off-1"), "state": "shutoff"},
                         {**domain(on["uuid"], "on-1"), "state": "running"},
                         {**domain(paused["uuid"], "paused-1"), "state": "paused"},
                         {**domain(same["uuid"], "same-1"), "state": "running"})
    dry = ledger.tracker_sync([state], dry_run=True)
    assert len(dry["power_states"]) == 3
    assert {row["name"]: row["state"] for row in ledger.instances()}["off-1"] == ACTIVE

    report = ledger.tracker_sync([state])
    assert sorted((e["name"], e["was"], e["domain_state"], e["now"]) for e in report["power_states"]) == [
        ("off-1", ACTIVE, "shutoff", STOPPED), ("on-1", STOPPED, "running", ACTIVE),
        ("paused-1", ACTIVE, "paused", PAUSED)]
    assert report["missing_instances"] == []
    assert {row["name"]: row["state"] for row in ledger.instances()} == {
        "off-1": STOPPED, "on-1": ACTIVE, "paused-1": PAUSED, "same-1": ACTIVE}
    assert len(ledger.claims()) == 4  # claims stay, whatever the power state
    assert ledger.tracker_sync([state])["power_states"] == []


def test_the_sync_leaves_alone_what_changed_after_its_facts_and_what_is_moving(ledger):  # noqa: F811
    ledger.sync_hypervisors([HV1, HV2])
    stopped_since, moving = active(ledger, "new-1", SMALL), active(ledger, "mov-1", SMALL)
    ledger.set_instance_state(stopped_since["uuid"], STOPPED)
    ledger.claim_move(moving["uuid"], "hv-2", "mover")
    # Facts gathered an hour ago saw new-1 running: the stop recorded since is newer.
    state = with_domains({**domain(stopped_since["uuid"], "new-1"), "state": "running"},
                         {**domain(moving["uuid"], "mov-1"), "state": "paused"}, gathered_at=time.time() - 3600)
    assert ledger.tracker_sync([state])["power_states"] == []
    assert {row["name"]: row["state"] for row in ledger.instances()} == {"new-1": STOPPED, "mov-1": ACTIVE}


def test_a_stopped_instance_whose_domain_is_gone_is_reported_missing(ledger):  # noqa: F811
    ledger.sync_hypervisors([HV1])
    gone = active(ledger, "gone-1", SMALL)
    ledger.set_instance_state(gone["uuid"], STOPPED)
    report = ledger.tracker_sync([with_domains()])
    assert [(e["name"], e["state"]) for e in report["missing_instances"]] == [("gone-1", STOPPED)]


# ---- what a move re-schedules with, and failed builds (issue 21) -------------------------------

def failed_builds(ledger, hv_name):
    """The count as the scheduler's read of the ledger gives it to BuildFailureWeigher."""
    table, _generations = ledger.host_table()
    [count] = [state.failed_builds for state in table if state.host == hv_name]
    return count


def test_a_failed_build_counts_on_its_host_and_a_successful_one_there_forgives_them(ledger):  # noqa: F811
    ledger.sync_hypervisors([HV1, HV2])
    [first] = ledger.claim([placement("web-1", HV1)], SMALL, "launch")
    assert ledger.build_failed(first["uuid"]) == 1
    # Retried on hv2, where it fails too: each host counts its own.
    ledger.claim_alternate(first["uuid"], "hv2", "hv-2", "launch")
    assert ledger.build_failed(first["uuid"]) == 1
    ledger.claim_alternate(first["uuid"], "hv1", "hv-1", "launch")
    assert ledger.build_failed(first["uuid"]) == 2
    ledger.mark_error(first["uuid"], "build failed on 3 host(s)")
    assert (failed_builds(ledger, "hv1"), failed_builds(ledger, "hv2")) == (2, 1)
    # What the weigher reads, the fleet report and capacity show: the same column.
    assert {row["host"]: row["usage"]["failed_builds"] for row in ledger.hypervisors()} == {"hv1": 2, "hv2": 1}
    # A successful build on hv1 forgives hv1 only; a tracker sync leaves the count alone.
    active(ledger, "web-2", TINY)
    ledger.sync_hypervisors([HV1, HV2])
    assert (failed_builds(ledger, "hv1"), failed_builds(ledger, "hv2")) == (0, 1)


def test_an_instance_records_its_launch_request_and_a_resize_records_the_new_flavor(ledger):  # noqa: F811
    ledger.sync_hypervisors([HV1, HV2])
    request = {"flavor": SMALL.to_dict(), "availability_zone": "az1", "scheduler_hints": {"different_host": ["x"]},
               "server_group": "web", "project_id": "p1"}
    [row] = ledger.claim([placement("web-1", HV1)], SMALL, "launch", request=request)
    web = ledger.mark_active(row["uuid"])
    assert web["request"] == request
    [listed] = ledger.instances(["web-1"])
    assert listed["request"] == request
    claim = ledger.claim_move(web["uuid"], "hv-2", "resizer", flavor=MEDIUM)
    moved = ledger.finish_move(web["uuid"], claim["id"], MEDIUM)
    assert moved["request"] == {**request, "flavor": MEDIUM.to_dict()}
    assert ledger.instances(["web-1"])[0]["request"]["flavor"]["name"] == "medium"
    # A move without a new flavor keeps the request as it was; an adopted instance has none.
    back = ledger.claim_move(web["uuid"], "hv-1", "mover")
    assert ledger.finish_move(web["uuid"], back["id"])["request"] == {**request, "flavor": MEDIUM.to_dict()}
    [plain] = ledger.claim([placement("old-1", HV2)], TINY, "launch")
    assert plain["request"] is None
