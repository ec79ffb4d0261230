"""What builds make on hypervisors, and what the tracker sync decides is left of dead builds: the
pure sorting (artefacts.sort_out), then the ledger on a real SQLite file and a real PostgreSQL
server, then the drift report's lines."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from test_ledger import TINY, domain, host, migrated_to, placement

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import root_volume_name, seed_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    DOMAIN,
    ERROR,
    VOLUME,
    ClaimLost,
    Ledger,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.artefacts import sort_out
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.sync import host_lines

U1, U2, U3 = ("11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222",
              "33333333-3333-4333-8333-333333333333")


def built(uuid, name, seed=False, pool="default"):
    """What a build of ``uuid`` records: its root disk, its seed, its domain (as _provisioning.plan lists them)."""
    items = [{"kind": VOLUME, "pool": pool, "name": root_volume_name(uuid)}]
    if seed:
        items.append({"kind": VOLUME, "pool": pool, "name": seed_volume_name(uuid)})
    return items + [{"kind": DOMAIN, "pool": None, "name": name}]


def rows(uuid, name, **options):
    return [{"id": index, "instance_uuid": uuid, "instance_name": name, **item}
            for index, item in enumerate(built(uuid, name, **options))]


def state(domains=(), volumes=(), **fields):
    """A hypervisor's host state as a sync gathers it, with the pool volumes named as a build's."""
    return {**host(vcpus_total=8, total_ram_mb=8192, domains=domains, **fields), "storage_pool": "default",
            "instance_volumes": sorted(volumes)}


def leftovers(report):
    return [(group["instance_name"], sorted((item["kind"], item["name"], item["present"]) for item in group["items"]))
            for group in report["leftovers"]]


# ---- the sorting itself (pure) --------------------------------------------------------------------

SORTING = [
    # (case, claimed, recorded rows, domains, volumes found) -> (leftover groups, orphan volumes)
    ("a build in progress or a running instance is never a leftover",
     {U1}, rows(U1, "a-1", seed=True), [domain(U1, "a-1", state="shutoff")],
     [root_volume_name(U1), seed_volume_name(U1)],
     [], []),
    ("a dead build's recorded artefacts, each as the state shows it",
     set(), rows(U1, "a-1", seed=True), [], [root_volume_name(U1)],
     [("a-1", False, [(DOMAIN, "a-1", False), (VOLUME, root_volume_name(U1), True),
                      (VOLUME, seed_volume_name(U1), False)])], []),
    ("a volume of another pool: the state cannot tell",
     set(), rows(U1, "a-1", pool="other"), [], [],
     [("a-1", False, [(DOMAIN, "a-1", False), (VOLUME, root_volume_name(U1), None)])], []),
    ("a leftover whose domain runs is marked running (nothing of it may go)",
     set(), rows(U1, "a-1"), [domain(U1, "a-1")], [root_volume_name(U1)],
     [("a-1", True, [(DOMAIN, "a-1", True), (VOLUME, root_volume_name(U1), True)])], []),
    ("a build's volume that nothing recorded and no claim holds is an orphan, not a leftover",
     {U1}, [], [], [root_volume_name(U1), root_volume_name(U2), seed_volume_name(U3)],
     [], [root_volume_name(U2), seed_volume_name(U3)]),
    ("recorded, it is a leftover and no orphan",
     set(), rows(U2, "b-1"), [], [root_volume_name(U2)],
     [("b-1", False, [(DOMAIN, "b-1", False), (VOLUME, root_volume_name(U2), True)])], []),
]


@pytest.mark.parametrize("claimed, recorded, domains, volumes, groups, orphans",
                         [case[1:] for case in SORTING], ids=[case[0] for case in SORTING])
def test_sort_out_tells_live_from_dead_from_unknown(claimed, recorded, domains, volumes, groups, orphans):
    found_groups, found_orphans = sort_out(state(domains, volumes), claimed, recorded)
    assert [(group["instance_name"], group["running"],
             sorted((item["kind"], item["name"], item["present"]) for item in group["items"]))
            for group in found_groups] == [(name, running, sorted(items)) for name, running, items in groups]
    assert found_orphans == orphans


# ---- recording -----------------------------------------------------------------------------------

def test_a_build_records_only_under_a_live_claim_on_that_host(ledger):
    ledger.sync_hypervisors([host(), host("hv2", "hv-2")])
    [live] = ledger.claim([placement("web-1")], TINY, "run", lease_s=600)
    [expired] = ledger.claim([placement("web-2")], TINY, "run", lease_s=-1)

    assert ledger.record_artefacts(live["uuid"], "hv1", built(live["uuid"], "web-1"), "run") == "hv-1"
    # Again (a retry on the same host): nothing twice.
    ledger.record_artefacts(live["uuid"], "hv1", built(live["uuid"], "web-1", seed=True), "run")
    assert sorted(row["name"] for row in ledger.artefacts(live["uuid"])) == sorted(
        [root_volume_name(live["uuid"]), seed_volume_name(live["uuid"]), "web-1"])
    with pytest.raises(BerthError, match="the lease of instance web-2's claim on hv1 expired at .*: a sync may "
                                         "release it at any moment, so nothing is built there"):
        ledger.record_artefacts(expired["uuid"], "hv1", built(expired["uuid"], "web-2"), "run")
    with pytest.raises(BerthError, match="instance web-1 holds no claim on hv2 .a sync released it when its lease "
                                         "expired, or its build moved on.: nothing is built there"):
        ledger.record_artefacts(live["uuid"], "hv2", built(live["uuid"], "web-1"), "run")
    assert ledger.artefacts(expired["uuid"]) == []


def test_an_instance_that_runs_owns_what_its_build_recorded_there(ledger):
    ledger.sync_hypervisors([host(), host("hv2", "hv-2")])
    [row] = ledger.claim([placement("web-1")], TINY, "run", lease_s=600)
    ledger.record_artefacts(row["uuid"], "hv1", built(row["uuid"], "web-1"), "run")
    # The build failed on hv1 and its cleanup too; it goes on to hv2 and runs there.
    ledger.claim_alternate(row["uuid"], "hv2", "hv-2", "run", 600)
    ledger.record_artefacts(row["uuid"], "hv2", built(row["uuid"], "web-1"), "run")
    ledger.mark_active(row["uuid"])
    assert {item["host"] for item in ledger.artefacts(row["uuid"])} == {"hv1"}

    report = ledger.tracker_sync([state(volumes=[root_volume_name(row["uuid"])])])
    [group] = report["leftovers"]
    assert group["why"] == "web-1 went on to hv2 (ACTIVE): left by a failed build or a move"
    assert sorted((item["name"], item["present"]) for item in group["items"]) == [
        (root_volume_name(row["uuid"]), True), ("web-1", False)]
    # Its own volumes on hv2 are neither leftovers nor orphans.
    there = ledger.tracker_sync([state(volumes=[root_volume_name(row["uuid"])], name="hv2", uuid="hv-2")])
    assert there["leftovers"] == [] and there["orphan_volumes"] == []


def test_a_build_in_progress_is_left_alone_and_a_dead_one_is_reclaimed(ledger):
    ledger.sync_hypervisors([host(vcpus_total=8, total_ram_mb=8192)])
    [building] = ledger.claim([placement("web-1")], TINY, "run", lease_s=600)
    uuid = building["uuid"]
    ledger.record_artefacts(uuid, "hv1", built(uuid, "web-1", seed=True), "run")
    made = [root_volume_name(uuid), seed_volume_name(uuid)]
    defined = [domain(uuid, "web-1", state="shutoff")]

    within = ledger.tracker_sync([state(defined, made)])
    assert within["leftovers"] == [] and within["orphan_volumes"] == [] and within["released_claims"] == []

    with ledger.engine.begin() as db:  # the run died and its lease ran out
        db.execute(text("UPDATE claims SET lease_expires_at = created_at"))
    dry = ledger.tracker_sync([state(defined, made)], dry_run=True)
    assert leftovers(dry) == [("web-1", [(DOMAIN, "web-1", True), (VOLUME, made[0], True), (VOLUME, made[1], True)])]
    assert ledger.instances(["web-1"])[0]["state"] == "BUILDING" and len(ledger.claims()) == 1

    late = ledger.tracker_sync([state(defined, made)])
    assert leftovers(late) == leftovers(dry)
    assert "lease expired" in late["leftovers"][0]["why"] and ledger.claims() == []
    assert ledger.instances(["web-1"])[0]["state"] == ERROR
    # The caller removed them (libvirt), and the ledger forgets them: nothing left to do.
    assert ledger.forget_artefacts(item["id"] for item in late["leftovers"][0]["items"]) == 3
    again = ledger.tracker_sync([state()])
    assert again["leftovers"] == [] and again["orphan_volumes"] == [] and again["changed"] is False


def test_a_dead_build_of_an_older_berth_is_reclaimed_from_what_the_hypervisor_shows(ledger):
    """Nothing recorded its volumes: the sync records what it finds of it before it lets go."""
    ledger.sync_hypervisors([host(vcpus_total=8, total_ram_mb=8192)])
    [dead] = ledger.claim([placement("old-1")], TINY, "old-run", lease_s=-1)
    uuid = dead["uuid"]
    report = ledger.tracker_sync([state(volumes=[root_volume_name(uuid), seed_volume_name(uuid)])])
    assert leftovers(report) == [("old-1", [(VOLUME, root_volume_name(uuid), True),
                                            (VOLUME, seed_volume_name(uuid), True)])]
    assert report["orphan_volumes"] == []


def test_a_relaunch_never_hides_what_the_instance_it_replaces_left(ledger):
    ledger.sync_hypervisors([host(vcpus_total=8, total_ram_mb=8192)])
    [first] = ledger.claim([placement("web-1")], TINY, "run", lease_s=600)
    ledger.record_artefacts(first["uuid"], "hv1", built(first["uuid"], "web-1"), "run")
    ledger.mark_error(first["uuid"], "injected")
    [second] = ledger.claim([placement("web-1")], TINY, "run", lease_s=600)
    assert [row["uuid"] for row in ledger.instances(["web-1"])] == [second["uuid"]]

    # Its earlier instance's records outlive the row the relaunch replaced.
    assert {row["instance_uuid"] for row in ledger.artefacts(second["uuid"], "web-1")} == {first["uuid"]}
    report = ledger.tracker_sync([state(volumes=[root_volume_name(first["uuid"])])])
    [group] = report["leftovers"]
    assert group["instance_uuid"] == first["uuid"]
    assert group["why"] == f"instance web-1 was replaced by a relaunch, now {second['uuid']}"
    # delete.yml of web-1 removes them with it and has the ledger forget them.
    assert ledger.delete_instance(second["uuid"], [row["id"] for row in ledger.artefacts(second["uuid"], "web-1")])
    assert ledger.artefacts() == [] and ledger.instances() == []


def test_an_unknown_build_volume_is_an_orphan_reported_never_a_leftover(ledger):
    ledger.sync_hypervisors([host()])
    report = ledger.tracker_sync([state(volumes=[root_volume_name(U3)])])
    assert report["leftovers"] == []
    assert report["orphan_volumes"] == [{"host": "hv1", "pool": "default", "name": root_volume_name(U3)}]


def test_a_build_whose_claim_a_sync_released_cannot_become_active(ledger):
    ledger.sync_hypervisors([host()])
    [row] = ledger.claim([placement("web-1")], TINY, "run", lease_s=-1)
    ledger.tracker_sync([state()])
    with pytest.raises(ClaimLost, match="instance web-1 no longer holds its claim on hv1 .build abandoned by run"):
        ledger.mark_active(row["uuid"])
    assert ledger.instances(["web-1"])[0]["state"] == ERROR


def test_a_move_makes_the_instance_own_what_a_build_recorded_on_its_new_host(ledger):
    ledger.sync_hypervisors([host(), host("hv2", "hv-2")])
    [row] = ledger.claim([placement("web-1")], TINY, "run", lease_s=600)
    ledger.record_artefacts(row["uuid"], "hv1", built(row["uuid"], "web-1"), "run")
    ledger.claim_alternate(row["uuid"], "hv2", "hv-2", "run", 600)
    ledger.mark_active(row["uuid"])
    ledger.finish_move(row["uuid"], ledger.claim_move(row["uuid"], "hv-1", "run")["id"])
    assert ledger.artefacts() == []


def test_retiring_a_hypervisor_forgets_its_records(ledger):
    ledger.sync_hypervisors([host()])
    [row] = ledger.claim([placement("web-1")], TINY, "run", lease_s=600)
    ledger.record_artefacts(row["uuid"], "hv1", built(row["uuid"], "web-1"), "run")
    ledger.retire_hypervisor("hv1")
    assert ledger.artefacts() == []


def test_schema_0005_records_what_error_instances_of_an_older_berth_may_have_left(tmp_path):
    url = f"sqlite:///{tmp_path}/old.sqlite3"
    when = "2026-11-24 10:00:00"
    migrated_to(
        url, "0004",
        ("INSERT INTO hypervisors (uuid, name, nodename, generation, synced_at, disabled, sync_status) "
         "VALUES ('hv-1', 'hv1', 'hv1', 1, :when, 0, 'up')", {"when": when}),
        ("INSERT INTO hypervisor_facts (hypervisor_uuid, storage_pool) VALUES ('hv-1', 'instances')", {}),
        *(("INSERT INTO instances (uuid, name, flavor_name, vcpus, memory_mb, root_gb, ephemeral_gb, swap, "
           "hypervisor_uuid, host, state, created_at, updated_at) VALUES (:uuid, :name, 'm1.tiny', 1, 512, 1, 0, 0, "
           "'hv-1', 'hv1', :state, :when, :when)", {"uuid": uuid, "name": name, "state": instance_state, "when": when})
          for uuid, name, instance_state in ((U1, "failed-1", "ERROR"), (U2, "fine-1", "ACTIVE"))),
    )
    opened = Ledger(url).open(create=True)
    assert sorted((row["kind"], row["pool"], row["name"], row["host"]) for row in opened.artefacts()) == [
        (DOMAIN, None, "failed-1", "hv1"), (VOLUME, "instances", root_volume_name(U1), "hv1"),
        (VOLUME, "instances", seed_volume_name(U1), "hv1")]
    opened.close()


# ---- the drift report ------------------------------------------------------------------------------

def leftover_group(outcome, present=True, **fields):
    items = [{"id": 1, "kind": DOMAIN, "pool": None, "name": "web-1", "present": present},
             {"id": 2, "kind": VOLUME, "pool": "default", "name": root_volume_name(U1), "present": present}]
    return {"host": "hv1", "instance_uuid": U1, "instance_name": "web-1", "running": outcome == "running",
            "why": "web-1 is ERROR: build abandoned", "items": items, "outcome": outcome,
            "removed": items if outcome == "removed" else [], "error": "timeout" if outcome == "failed" else None,
            **fields}


def drift_report(states, report, hypervisors):
    """The drift report's lines, each about hv1 here."""
    pairs = host_lines(states, report, hypervisors)
    assert {host for host, _line in pairs} == {"hv1"}
    return [line for _host, line in pairs]


def test_the_drift_report_says_what_was_removed_kept_or_left_and_why():
    released = {"id": 7, "instance_uuid": U2, "instance_name": "gone-1", "host": "hv1", "owner": "c:2",
                "lease_expires_at": "2026-11-25T10:00:00"}
    report = {"missing_instances": [], "found_again": [], "kept_expired_claims": [],
              "released_claims": [{**released, "domain_state": None}, {**released, "domain_state": "shutoff"}],
              "finished_builds": [{"instance_name": "up-1", "host": "hv1", "domain_state": "running", "owner": "c:1",
                                   "lease_expires_at": "2026-11-25T10:00:00"}],
              "leftovers": [leftover_group("removed"), leftover_group("removed", removed=[]),
                            leftover_group("would remove"), leftover_group("kept"), leftover_group("running"),
                            leftover_group("failed")],
              "orphan_volumes": [{"host": "hv1", "pool": "default", "name": root_volume_name(U3)}]}
    lines = drift_report([], report, {})
    volume = f"volume default/{root_volume_name(U1)}"
    assert lines[:2] == [
        f"claim 7 of instance gone-1 ({U2}) on hv1 released: lease of c:2 expired at 2026-11-25T10:00:00, no domain",
        f"claim 7 of instance gone-1 ({U2}) on hv1 released: lease of c:2 expired at 2026-11-25T10:00:00, its "
        f"domain is shutoff"]
    assert lines[2:] == [
        "up-1: build finished by this sync: its domain is running on hv1 though c:1 never said so before its "
        "lease expired at 2026-11-25T10:00:00; ACTIVE",
        f"hv1: removed what a dead build left: domain web-1, {volume} (web-1 is ERROR: build abandoned)",
        "hv1: forgot the records of 2 artefact(s) of a build of web-1, already gone (web-1 is ERROR: build abandoned)",
        f"hv1: would remove what a dead build left: domain web-1, {volume} (web-1 is ERROR: build abandoned)",
        f"hv1: kept for inspection (berth_keep_leftovers): what a dead build left: domain web-1, {volume} (web-1 is "
        f"ERROR: build abandoned); a gather without berth_keep_leftovers removes it, and so does delete.yml with "
        f"instance web-1",
        f"hv1: left alone, its domain runs: what a dead build of web-1 left: domain web-1, {volume} (web-1 is ERROR: "
        f"build abandoned); delete.yml of web-1 removes it",
        f"hv1: could not remove what a dead build left: domain web-1, {volume} (web-1 is ERROR: build abandoned): "
        f"timeout; the next sync tries again",
        f"hv1: orphan volume default/{root_volume_name(U3)}: named as Berth names a build's volume, but no instance "
        f"holds a claim here and this ledger recorded no build of it; left alone (another ledger's, or older than "
        f"Berth's records: virsh vol-delete removes it)",
    ]
    assert drift_report([], {**report, "leftovers": [leftover_group("would remove", present=False)]}, {})[3] == (
        "hv1: would remove what a dead build left: nothing left (2 record(s) to forget) "
        "(web-1 is ERROR: build abandoned)")
