"""The ledger on a real SQLite file and a real PostgreSQL server: migration, sync, tracker view,
claims and their re-check, server groups, tracker sync, decisions, errors."""

from __future__ import annotations

import datetime as dt
import json
import random
import sqlite3
import threading

import pytest
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, select, text

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError, LedgerError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
    Flavor,
    HostState,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    ACTIVE,
    BUILDING,
    ERROR,
    MIGRATIONS_DIR,
    SCHEMA_REVISION,
    ClaimConflict,
    Ledger,
    mask_secrets,
    safe_url,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import claims as claims_module
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import host_states
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import hypervisor_facts

TINY = Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1)


def host(name="hv1", uuid="hv-1", total_ram_mb=2048, vcpus_total=2, domains=(), up=True):
    return {
        "host": name, "nodename": name, "uuid": uuid, "service_up": up, "disabled": False,
        "vcpus_total": vcpus_total, "vcpus_used": 0, "total_usable_ram_mb": total_ram_mb,
        "free_ram_mb": total_ram_mb - 512, "total_usable_disk_gb": 100, "free_disk_mb": 100 * 1024,
        "num_instances": 0, "num_io_ops": 0, "cpu_allocation_ratio": 1.0, "ram_allocation_ratio": 1.0,
        "disk_allocation_ratio": 1.0, "reserved_host_memory_mb": 512, "reserved_host_disk_mb": 0,
        "domains": list(domains),
    }


def domain(uuid, name="dom", vcpus=1, memory_mb=512, state="running"):
    return {"name": name, "uuid": uuid, "state": state, "vcpus": vcpus, "memory_mb": memory_mb, "disks": [],
            "berth": None}


def placement(name, state=None):
    state = state or host()
    return {"name": name, "host": state["host"], "hypervisor_uuid": state["uuid"]}


def revision(url):
    engine = create_engine(url)
    with engine.connect() as conn:
        found = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    engine.dispose()
    return found


def test_open_migrates_to_head_and_records_the_revision(ledger, ledger_url):
    assert revision(ledger_url) == SCHEMA_REVISION
    assert ledger.hypervisors() == [] and ledger.server_groups() == [] and ledger.decisions() == []


def test_newer_schema_is_refused_with_the_url(tmp_path):
    Ledger(f"sqlite:///{tmp_path}/l.sqlite3").open(create=True).close()
    with sqlite3.connect(tmp_path / "l.sqlite3") as db:
        db.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(LedgerError, match=r"l\.sqlite3 has schema revision 9999, newer than this Berth knows"
                                          r".*upgrade the berth.fleet collection"):
        Ledger(f"sqlite:///{tmp_path}/l.sqlite3").open(create=True)


def test_corrupt_file_says_so_and_what_to_do(tmp_path):
    (tmp_path / "bad.sqlite3").write_bytes(b"this is not a database, just text " * 200)
    with pytest.raises(LedgerError, match=r"bad\.sqlite3 is corrupt .*Restore it from a backup"):
        Ledger(f"sqlite:///{tmp_path}/bad.sqlite3").open(create=True)


def test_locked_file_says_another_process_holds_it(tmp_path):
    url = f"sqlite:///{tmp_path}/l.sqlite3"
    Ledger(url).open(create=True).close()
    holder = sqlite3.connect(tmp_path / "l.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(LedgerError, match=r"l\.sqlite3\?timeout=0\.2 is locked by another process .*wait for it"):
            Ledger(url + "?timeout=0.2").open(create=True).sync_hypervisors([host()])
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_missing_postgres_database_and_unreachable_server_name_the_url_not_the_password(postgres):
    url = postgres.create_database("exists").replace("/exists", "/nowhere")
    with pytest.raises(LedgerError, match=r"database at postgresql\+psycopg://berth:\*\*\*@.*/nowhere does not "
                                          r"exist.*createdb") as caught:
        Ledger(url).open(create=True)
    assert postgres.password not in str(caught.value)
    unreachable = f"postgresql+psycopg://berth:{postgres.password}@127.0.0.1:1/berth"
    with pytest.raises(LedgerError, match="cannot reach the ledger .*is the PostgreSQL server running") as caught:
        Ledger(unreachable).open(create=True)
    assert postgres.password not in str(caught.value)


def test_unwritable_directory_is_refused(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(LedgerError, match="cannot create the ledger or its directory at .*Not a directory"):
        Ledger(f"sqlite:///{blocker}/sub/l.sqlite3").open(create=True)


def test_password_never_shown():
    assert "s3cret" not in safe_url("postgresql+psycopg://berth:s3cret@db.example/berth")


@pytest.mark.parametrize("url", [
    "postgresql+psycopg://berth:s3cret@db.example/berth",
    "postgresql+psycopg://berth@db.example/berth?password=s3cret",
    "postgresql+psycopg://berth@db.example/berth?sslpassword=s3cret&sslkey=/etc/berth/client.key",
    "postgresql+psycopg://berth@db.example/berth?oauth_client_secret=s3cret",
    "postgresql+psycopg://berth@db.example/berth?PASSWORD=s3cret",
    "postgresql+psycopg://berth@db.example/berth?password=first&password=s3cret",
    "postgresql+psycopg://berth@db.example/berth?service=postgresql://other:s3cret@elsewhere/db",
], ids=["userinfo", "password", "sslpassword", "oauth-secret", "upper-case", "repeated", "nested-url"])
def test_every_secret_of_a_ledger_url_is_masked_where_it_is_shown(url):
    shown = safe_url(url)
    assert "s3cret" not in shown and "***" in shown and "db.example/berth" in shown
    assert mask_secrets(url, f"FATAL: password s3cret refused for {url}").count("s3cret") == 0
    # What is not secret stays, so that the URL can still be told apart.
    assert ("sslkey=" in shown) == ("sslkey" in url)


def test_an_error_naming_the_secret_parameter_is_masked_in_the_message():
    url = "postgresql+psycopg://berth@127.0.0.1:1/berth?password=s3cret-param&sslpassword=keypass"
    with pytest.raises(LedgerError) as caught:
        Ledger(url).open()
    assert "s3cret-param" not in str(caught.value) and "keypass" not in str(caught.value)
    assert "password=***" in str(caught.value)


def test_sync_writes_inventories_per_resource_and_moves_the_generation_only_on_change(ledger):
    [first] = ledger.sync_hypervisors([host()])
    [again] = ledger.sync_hypervisors([host()])
    [changed] = ledger.sync_hypervisors([host(total_ram_mb=4096)])
    assert (first["changed"], again["changed"], changed["changed"]) == (True, False, True)
    assert again["generation"] == first["generation"] and changed["generation"] == first["generation"] + 1
    [row] = ledger.hypervisors()
    assert row["inventories"] == {
        "VCPU": {"total": 2, "reserved": 0, "allocation_ratio": 1.0},
        "MEMORY_MB": {"total": 4096, "reserved": 512, "allocation_ratio": 1.0},
        "DISK_MB": {"total": 100 * 1024, "reserved": 0, "allocation_ratio": 1.0},
    }


def test_claim_fills_a_host_then_conflicts_without_writing(ledger):
    ledger.sync_hypervisors([host()])
    # 2048 MB total, 512 reserved: room for three 512 MB instances, and vCPUs for two (ratio 1.0).
    ledger.claim([placement("web-1"), placement("web-2")], TINY, "test")
    with pytest.raises(ClaimConflict, match="vCPU"):
        ledger.claim([placement("web-3")], TINY, "test")
    assert [row["name"] for row in ledger.instances()] == ["web-1", "web-2"]
    assert len(ledger.claims()) == 2


def test_instances_of_a_launch_are_read_by_name_prefix_with_wildcards_escaped(ledger):
    ledger.sync_hypervisors([host(vcpus_total=16, total_ram_mb=16384)])
    names = ["web-1", "web-2", "web", "webx-1", "web_1-1", "w_b-1", "w%b-1", "web-1-x"]
    ledger.claim([placement(name) for name in names], TINY, "test")
    assert [row["name"] for row in ledger.instances(launch="web")] == ["web", "web-1", "web-1-x", "web-2"]
    # _ and % are LIKE wildcards: the ledger must match them literally.
    assert [row["name"] for row in ledger.instances(launch="w_b")] == ["w_b-1"]
    assert [row["name"] for row in ledger.instances(launch="w%b")] == ["w%b-1"]
    assert len(ledger.instances()) == len(names)


def test_the_instances_inventory_reads_states_groups_and_hypervisor_uris(ledger):
    ledger.sync_hypervisors([{**host(vcpus_total=8, total_ram_mb=8192), "uri": "qemu+ssh://hv1.example/system"},
                             host("hv2", "hv-2", vcpus_total=8, total_ram_mb=8192)])
    ledger.create_server_group("web", "anti-affinity")
    [web] = ledger.claim([{**placement("web-1"), "project_id": "team-a"}], TINY, "t", server_group="web")
    ledger.mark_active(web["uuid"])
    ledger.claim([placement("db-1", host("hv2", "hv-2"))], TINY, "t")  # still BUILDING
    [active] = ledger.inventory_instances([ACTIVE])
    assert {key: active[key] for key in ("name", "uuid", "host", "state", "project_id", "server_group", "uri",
                                         "hypervisor_status")} == {
        "name": "web-1", "uuid": web["uuid"], "host": "hv1", "state": ACTIVE, "project_id": "team-a",
        "server_group": {"name": "web", "policy": "anti-affinity"}, "uri": "qemu+ssh://hv1.example/system",
        "hypervisor_status": "up"}
    both = ledger.inventory_instances([ACTIVE, BUILDING])
    assert [(row["name"], row["state"], row["server_group"], row["uri"]) for row in both] == [
        ("db-1", BUILDING, None, None), ("web-1", ACTIVE, {"name": "web", "policy": "anti-affinity"},
                                         "qemu+ssh://hv1.example/system")]
    assert ledger.inventory_instances([ERROR]) == []


def test_one_request_is_all_or_nothing(ledger):
    ledger.sync_hypervisors([host()])
    with pytest.raises(ClaimConflict):
        ledger.claim([placement("web-1"), placement("web-2"), placement("web-3")], TINY, "test")
    assert ledger.instances() == [] and ledger.claims() == []


def test_instances_keep_their_project_and_image_properties_and_hosts_give_them_back(ledger):
    ledger.sync_hypervisors([{**host(vcpus_total=8, total_ram_mb=8192), "host_ip": "192.0.2.11"},
                             host("hv2", "hv-2", vcpus_total=8, total_ram_mb=8192)])
    props = {"hw_architecture": "x86_64", "os_distro": "debian"}
    [web] = ledger.claim([{**placement("web-1"), "project_id": "team-a", "image_properties": props}], TINY, "t")
    [db] = ledger.claim([placement("db-1", host("hv2", "hv-2"))], TINY, "t")
    assert (web["project_id"], web["image_properties"]) == ("team-a", props)
    # Nothing said: the single team's project, no image properties.
    assert (db["project_id"], db["image_properties"]) == ("default", {})
    assert {row["name"]: (row["project_id"], row["image_properties"]) for row in ledger.instances()} == {
        "web-1": ("team-a", props), "db-1": ("default", {})}
    table, _generations = ledger.host_table({"instance_image_properties", "host_ip"})
    by_host = {state.host: state for state in (table[index] for index in range(len(table)))}
    assert by_host["hv1"].instance_image_properties == [props] and by_host["hv1"].host_ip == "192.0.2.11"
    assert by_host["hv2"].instance_image_properties == [{}] and by_host["hv2"].host_ip is None
    # Live states (source: inventory) get the instances' image properties from the ledger too.
    [live] = ledger.tracker_states([host()], {"instance_image_properties"})
    assert live["instance_image_properties"] == [props]


def test_claim_carries_owner_and_lease_and_reports_a_moved_generation(ledger):
    [synced] = ledger.sync_hypervisors([host(vcpus_total=8)])
    [row] = ledger.claim([{**placement("web-1"), "generation": synced["generation"]}], TINY, "run-a", lease_s=60)
    [claim] = ledger.claims()
    assert (claim["owner"], claim["instance_uuid"], claim["host"]) == ("run-a", row["uuid"], "hv1")
    lease = dt.datetime.fromisoformat(claim["lease_expires_at"]) - dt.datetime.fromisoformat(claim["created_at"])
    assert lease == dt.timedelta(seconds=60)
    assert row["generation_moved"] is False and row["state"] == BUILDING
    # The first claim moved the generation: a second decision made on the old one is told so.
    [second] = ledger.claim([{**placement("web-2"), "generation": synced["generation"]}], TINY, "run-b")
    assert second["generation_moved"] is True
    ledger.mark_active(row["uuid"])
    assert [c["lease_expires_at"] for c in ledger.claims()][0] is None


def test_tracker_view_counts_claims_and_orphans_not_berth_domains_twice(ledger):
    ledger.sync_hypervisors([host()])
    [row] = ledger.claim([placement("web-1")], TINY, "test")
    orphan = domain("x", "handmade", memory_mb=256)
    ours = {**domain(row["uuid"], "web-1"), "berth": {"instance_uuid": row["uuid"]}}
    [synced] = ledger.sync_hypervisors([host(domains=[orphan, ours])])
    assert synced["orphans"] == ["handmade"]
    [view] = ledger.tracker_states([host(domains=[orphan, ours])])
    assert view["vcpus_used"] == 1 + 1
    assert view["free_ram_mb"] == 2048 - 512 - 512 - 256
    assert view["num_instances"] == 2
    # The orphan goes away: so does its usage.
    ledger.sync_hypervisors([host(domains=[ours])])
    [view] = ledger.tracker_states([host(domains=[ours])])
    assert view["free_ram_mb"] == 2048 - 512 - 512


def test_adoption_turns_an_orphan_into_an_instance_with_its_claim_in_one_step(ledger):
    orphan = domain("d-1", "handmade", memory_mb=256)
    ledger.sync_hypervisors([host(domains=[orphan])])
    [before] = ledger.tracker_states([host(domains=[orphan])])
    sized = Flavor(name="adopted", vcpus=1, memory_mb=256, root_gb=2)

    planned, changed = ledger.adopt_instance("hv1", "d-1", "legacy", sized, "test", dry_run=True)
    assert changed and planned["name"] == "legacy"
    assert ledger.instances() == [] and ledger.claims() == []  # check mode wrote nothing

    adopted, changed = ledger.adopt_instance("hv1", "d-1", "legacy", sized, "test")
    assert changed
    assert (adopted["uuid"], adopted["host"], adopted["state"]) == ("d-1", "hv1", ACTIVE)
    [claim] = ledger.claims()
    assert (claim["instance_uuid"], claim["vcpus"], claim["memory_mb"], claim["disk_mb"]) == ("d-1", 1, 256, 2048)
    assert claim["lease_expires_at"] is None
    # Its usage moved from unmanaged to claimed: counted once, no orphan left.
    assert [row["unmanaged"] for row in ledger.hypervisors()] == [[]]
    [after] = ledger.tracker_states([host(domains=[orphan])])
    assert after["free_ram_mb"] == before["free_ram_mb"]
    assert ledger.sync_hypervisors([host(domains=[orphan])])[0]["orphans"] == []

    again, changed = ledger.adopt_instance("hv1", "d-1", "legacy", sized, "test")
    assert not changed and again["uuid"] == "d-1" and len(ledger.claims()) == 1


def test_adoption_refuses_a_taken_name_and_a_domain_the_ledger_places_elsewhere(ledger):
    ledger.sync_hypervisors([host(), host("hv2", "hv-2")])
    [row] = ledger.claim([placement("web-1")], TINY, "test")
    with pytest.raises(InputError, match="name web-1 is already instance") as taken:
        ledger.adopt_instance("hv1", "d-9", "web-1", TINY, "test")
    assert taken.value.field == "name"
    with pytest.raises(InputError, match=f"domain {row['uuid']} is instance web-1 of the ledger, which places "
                                         f"it on hv1, not hv2"):
        ledger.adopt_instance("hv2", row["uuid"], "other", TINY, "test")
    with pytest.raises(InputError, match="no hypervisor 'hv7' in the ledger"):
        ledger.adopt_instance("hv7", "d-9", "legacy", TINY, "test")
    # A dry run (check mode, which syncs nothing) plans for a host the ledger has not seen yet,
    # and still finds a taken name.
    planned, changed = ledger.adopt_instance("hv7", "d-9", "legacy", TINY, "test", dry_run=True)
    assert changed and (planned["host"], planned["hypervisor_uuid"]) == ("hv7", None)
    with pytest.raises(InputError, match="name web-1 is already instance"):
        ledger.adopt_instance("hv7", "d-9", "web-1", TINY, "test", dry_run=True)
    assert [r["name"] for r in ledger.instances()] == ["web-1"] and len(ledger.claims()) == 1


def test_failed_build_releases_the_claim_and_a_relaunch_replaces_it(ledger):
    ledger.sync_hypervisors([host()])
    [row] = ledger.claim([placement("web-1")], TINY, "test")
    ledger.mark_error(row["uuid"], "start refused")
    [failed] = ledger.instances()
    assert (failed["state"], failed["failure_reason"]) == (ERROR, "start refused")
    assert ledger.claims() == []
    [again] = ledger.claim([placement("web-1")], TINY, "test")
    ledger.mark_active(again["uuid"])
    assert [(r["uuid"], r["state"]) for r in ledger.instances()] == [(again["uuid"], ACTIVE)]


def test_marking_an_instance_that_holds_no_claim_in_error_moves_its_updated_at(ledger, monkeypatch):
    # The first failure released the claim; a later one (the last alternate failing too) finds
    # none to release, and must still say when the instance changed.
    ledger.sync_hypervisors([host()])
    [row] = ledger.claim([placement("web-1")], TINY, "test")
    ledger.mark_error(row["uuid"], "start refused")
    assert ledger.claims() == []
    later = dt.datetime(2031, 5, 6, 7, 8, 9)
    monkeypatch.setattr(claims_module, "utcnow", lambda: later)
    ledger.mark_error(row["uuid"], "no alternate left")
    [failed] = ledger.instances()
    assert (failed["state"], failed["failure_reason"], failed["updated_at"]) == (
        ERROR, "no alternate left", later.isoformat())


def test_an_active_instance_is_never_claimed_twice(ledger):
    ledger.sync_hypervisors([host(vcpus_total=8)])
    [row] = ledger.claim([placement("web-1")], TINY, "test")
    ledger.mark_active(row["uuid"])
    with pytest.raises(ClaimConflict, match="launched meanwhile"):
        ledger.claim([placement("web-1")], TINY, "test")


def test_delete_forgets_instance_and_claim(ledger):
    ledger.sync_hypervisors([host()])
    [row] = ledger.claim([placement("web-1")], TINY, "test")
    assert ledger.delete_instance(row["uuid"]) is True
    assert ledger.delete_instance(row["uuid"]) is False
    assert ledger.instances() == [] and ledger.claims() == []


# ---- server groups ----------------------------------------------------------------------------

HV1, HV2 = host("hv1", "hv-1", vcpus_total=8, total_ram_mb=8192), host("hv2", "hv-2", vcpus_total=8,
                                                                       total_ram_mb=8192)


def test_server_group_create_is_idempotent_and_its_rules_never_change(ledger):
    group, changed = ledger.create_server_group("web", "anti-affinity", max_server_per_host=2)
    assert changed is True and group["rules"] == {"max_server_per_host": 2} and group["members"] == []
    again, changed = ledger.create_server_group("web", "anti-affinity", max_server_per_host=2)
    assert changed is False and again["uuid"] == group["uuid"]
    with pytest.raises(InputError, match="rules cannot change"):
        ledger.create_server_group("web", "affinity")


@pytest.mark.parametrize(("policy", "rule", "field"), [
    ("spread", None, "policy"),
    ("affinity", 2, "max_server_per_host"),
    ("anti-affinity", 0, "max_server_per_host"),
], ids=["unknown-policy", "rule-on-affinity", "rule-below-one"])
def test_server_group_bad_input_names_the_field(ledger, policy, rule, field):
    with pytest.raises(InputError) as caught:
        ledger.create_server_group("g", policy, max_server_per_host=rule)
    assert caught.value.field == field
    assert ledger.server_groups() == []


def test_server_group_dry_run_writes_nothing(ledger):
    _group, changed = ledger.create_server_group("web", "affinity", dry_run=True)
    assert changed is True and ledger.server_groups() == []
    ledger.create_server_group("web", "affinity")
    assert ledger.delete_server_group("web", dry_run=True) is True
    assert [g["name"] for g in ledger.server_groups()] == ["web"]
    assert ledger.delete_server_group("web") is True and ledger.delete_server_group("web") is False


def test_anti_affinity_claim_refuses_a_second_member_on_a_host(ledger):
    ledger.sync_hypervisors([HV1, HV2])
    ledger.create_server_group("db", "anti-affinity")
    [first] = ledger.claim([placement("db-1", HV1)], TINY, "a", server_group="db")
    with pytest.raises(ClaimConflict, match="anti-affinity group db would have 2 members on it"):
        ledger.claim([placement("db-2", HV1)], TINY, "b", server_group="db")
    ledger.claim([placement("db-2", HV2)], TINY, "b", server_group="db")
    [group] = ledger.server_groups("db")
    assert group["hosts"] == ["hv1", "hv2"] and first["uuid"] in group["members"]


def test_anti_affinity_with_max_server_per_host(ledger):
    ledger.sync_hypervisors([HV1])
    ledger.create_server_group("db", "anti-affinity", max_server_per_host=2)
    ledger.claim([placement("db-1", HV1), placement("db-2", HV1)], TINY, "a", server_group="db")
    with pytest.raises(ClaimConflict, match="at most 2"):
        ledger.claim([placement("db-3", HV1)], TINY, "a", server_group="db")


def test_anti_affinity_claim_counts_every_member_of_one_request_on_a_host(ledger):
    """The re-check counts each placement of the request, not each host once: two members of one
    request on one host break the group as two requests would. (The scheduler spreads them
    itself, but a forced host skips its filters: the claim has the last word.)"""
    ledger.sync_hypervisors([HV1, HV2])
    ledger.create_server_group("db", "anti-affinity")
    with pytest.raises(ClaimConflict, match="anti-affinity group db would have 2 members on it"):
        ledger.claim([placement("db-1", HV1), placement("db-2", HV1)], TINY, "a", server_group="db")
    assert ledger.instances() == [] and ledger.claims() == [] and ledger.server_groups("db")[0]["members"] == []
    # At most two per host: two of one request on hv1 are taken, a third of the same request is not.
    ledger.create_server_group("pairs", "anti-affinity", max_server_per_host=2)
    with pytest.raises(ClaimConflict, match=r"anti-affinity group pairs would have 3 members on it \(at most 2\)"):
        ledger.claim([placement(f"pair-{number}", HV1) for number in (1, 2, 3)], TINY, "a", server_group="pairs")
    assert ledger.instances() == []
    pairs = ledger.claim([placement("pair-1", HV1), placement("pair-2", HV1)], TINY, "a", server_group="pairs")
    spread = ledger.claim([placement("db-1", HV1), placement("db-2", HV2)], TINY, "a", server_group="db")
    assert [row["host"] for row in pairs] == ["hv1", "hv1"] and [row["host"] for row in spread] == ["hv1", "hv2"]


def test_affinity_claim_refuses_a_second_host_even_within_one_request(ledger):
    ledger.sync_hypervisors([HV1, HV2])
    ledger.create_server_group("app", "affinity")
    with pytest.raises(ClaimConflict, match="affinity group app would span hv1, hv2"):
        ledger.claim([placement("app-1", HV1), placement("app-2", HV2)], TINY, "a", server_group="app")
    ledger.claim([placement("app-1", HV1)], TINY, "a", server_group="app")
    with pytest.raises(ClaimConflict, match="would span"):
        ledger.claim([placement("app-2", HV2)], TINY, "b", server_group="app")


def test_an_errored_member_no_longer_pins_the_group(ledger):
    ledger.sync_hypervisors([HV1, HV2])
    ledger.create_server_group("app", "affinity")
    [row] = ledger.claim([placement("app-1", HV1)], TINY, "a", server_group="app")
    ledger.mark_error(row["uuid"], "failed")
    ledger.claim([placement("app-2", HV2)], TINY, "b", server_group="app")
    assert ledger.server_groups("app")[0]["hosts"] == ["hv2"]


def test_claim_into_an_unknown_group_is_bad_input(ledger):
    ledger.sync_hypervisors([HV1])
    with pytest.raises(InputError, match="no server group named 'nope'"):
        ledger.claim([placement("x-1", HV1)], TINY, "a", server_group="nope")
    assert ledger.instances() == []


def test_two_concurrent_claims_seeding_an_empty_affinity_group_cannot_split_it(ledger_url):
    """Two ledgers (two connections) claim into the same empty group at the same moment, on two
    different hosts: the group lock lets exactly one win.

    On PostgreSQL that lock is the group row's SELECT ... FOR UPDATE (server_groups.lock): without
    it the two transactions lock different hypervisor rows, both read an empty group and both
    insert, and this test fails (checked with the FOR UPDATE removed: it failed on PostgreSQL in
    three runs out of three). SQLite cannot show it, by construction: SQLite has no row locks, so
    SQLAlchemy's SQLite dialect compiles FOR UPDATE to nothing (the statement is the same text with
    or without it), and the ledger begins every writing transaction with BEGIN IMMEDIATE
    (ledger/database.py), which takes the database's single writer lock: the second claim's
    transaction starts only once the first has committed, and reads its member. The SQLite case
    runs to hold that serialisation to the same rule."""
    setup = Ledger(ledger_url).open(create=True)
    setup.sync_hypervisors([HV1, HV2])
    setup.create_server_group("app", "affinity")
    barrier = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def run(name, hv):
        ledger = Ledger(ledger_url).open(create=True)
        barrier.wait()
        try:
            outcomes[name] = ledger.claim([placement(name, hv)], TINY, name, server_group="app")
        except ClaimConflict as exc:
            outcomes[name] = exc
        finally:
            ledger.close()

    threads = [threading.Thread(target=run, args=("app-1", HV1)), threading.Thread(target=run, args=("app-2", HV2))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    conflicts = [o for o in outcomes.values() if isinstance(o, ClaimConflict)]
    assert len(outcomes) == 2 and len(conflicts) == 1, outcomes
    assert "would span" in str(conflicts[0])
    assert len(setup.server_groups("app")[0]["hosts"]) == 1
    setup.close()


def test_concurrent_claims_never_oversubscribe_a_host(ledger_url):
    """Eight claimers race for a host with room for three; exactly three win."""
    setup = Ledger(ledger_url).open(create=True)
    setup.sync_hypervisors([host(vcpus_total=3, total_ram_mb=8192)])
    barrier = threading.Barrier(8)
    won = []

    def run(index):
        ledger = Ledger(ledger_url).open(create=True)
        barrier.wait()
        try:
            won.extend(ledger.claim([placement(f"c{index}-1")], TINY, str(index)))
        except ClaimConflict:
            pass
        finally:
            ledger.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(won) == 3 and len(setup.claims()) == 3
    setup.close()


def test_concurrent_claims_never_oversubscribe_a_host_s_disk_with_launch_volumes(ledger_url):
    """Eight claimers race for a host of 100 GB of disk, each instance with its 1 GB root disk and
    a 30 GB launch volume: room for three, RAM and vCPUs for all eight; exactly three win, and the
    host's used disk is their disks and volumes."""
    setup = Ledger(ledger_url).open(create=True)
    setup.sync_hypervisors([host(vcpus_total=8, total_ram_mb=8192)])
    barrier = threading.Barrier(8)
    won = []

    def run(index):
        ledger = Ledger(ledger_url).open(create=True)
        name = f"c{index}-1"
        volumes = {name: [{"name": f"{name}-data", "size_gb": 30, "delete_on_termination": False, "target": "vde"}]}
        barrier.wait()
        try:
            won.extend(ledger.claim([placement(name)], TINY, str(index), volumes=volumes, pool="default"))
        except ClaimConflict:
            pass
        finally:
            ledger.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(won) == 3 and len(setup.claims()) == 3
    assert sorted(volume["instance_uuid"] for volume in setup.volumes()) == sorted(row["uuid"] for row in won)
    [hv] = setup.hypervisors()
    assert hv["inventories"]["DISK_MB"]["total"] - hv["usage"]["free_disk_mb"] == 3 * 31 * 1024
    setup.close()


# ---- moves: two claims for one instance ------------------------------------------------------

def test_a_move_claims_the_destination_first_and_releases_the_source_after(ledger):
    ledger.sync_hypervisors([HV1, HV2])
    [row] = ledger.claim([placement("vm-1", HV1)], TINY, "a")
    ledger.mark_active(row["uuid"])
    destination = ledger.claim_move(row["uuid"], "hv-2", "mover", lease_s=60)
    assert sorted(c["host"] for c in ledger.claims(row["uuid"])) == ["hv1", "hv2"]
    moved = ledger.finish_move(row["uuid"], destination["id"])
    assert moved["host"] == "hv2"
    [only] = ledger.claims(row["uuid"])
    assert (only["id"], only["lease_expires_at"]) == (destination["id"], None)


def test_a_move_that_does_not_happen_gives_the_destination_back(ledger):
    ledger.sync_hypervisors([HV1, HV2])
    [row] = ledger.claim([placement("vm-1", HV1)], TINY, "a")
    destination = ledger.claim_move(row["uuid"], "hv-2", "mover")
    assert ledger.release_claim(destination["id"]) is True
    assert [c["host"] for c in ledger.claims()] == ["hv1"]
    assert ledger.instances()[0]["state"] == BUILDING


def test_a_move_keeps_anti_affinity(ledger):
    ledger.sync_hypervisors([HV1, HV2])
    ledger.create_server_group("db", "anti-affinity")
    [one] = ledger.claim([placement("db-1", HV1)], TINY, "a", server_group="db")
    ledger.claim([placement("db-2", HV2)], TINY, "a", server_group="db")
    with pytest.raises(ClaimConflict, match="anti-affinity"):
        ledger.claim_move(one["uuid"], "hv-2", "mover")


# ---- operators: disable, retire ----------------------------------------------------------------

def test_disabled_hypervisor_shows_in_the_tracker_view_with_its_reason(ledger):
    ledger.sync_hypervisors([HV1])
    assert ledger.set_disabled("hv1", True, "disk swap", dry_run=True)["changed"] is True
    assert ledger.tracker_states([HV1])[0]["disabled"] is False
    assert ledger.set_disabled("hv1", True, "disk swap")["changed"] is True
    assert ledger.set_disabled("hv1", True, "disk swap")["changed"] is False
    [view] = ledger.tracker_states([HV1])
    assert (view["disabled"], view["disabled_reason"]) == (True, "disk swap")
    decision = schedule([HostState.from_dict(view)], RequestSpec(flavor=TINY))
    assert not decision.ok and "disk swap" in decision.rejections[0].message()
    assert ledger.set_disabled("hv-1", False)["changed"] is True
    assert ledger.tracker_states([HV1])[0]["disabled"] is False


def test_unknown_hypervisor_is_bad_input_listing_the_known(ledger):
    ledger.sync_hypervisors([HV1])
    with pytest.raises(InputError, match=r"no hypervisor 'hv9' in the ledger \(known: hv1\)"):
        ledger.set_disabled("hv9", True, "x")


def test_retire_drops_the_claims_and_errors_their_instances(ledger):
    ledger.sync_hypervisors([HV1, HV2])
    [row] = ledger.claim([placement("vm-1", HV1)], TINY, "a")
    ledger.claim([placement("vm-2", HV2)], TINY, "a")
    report = ledger.retire_hypervisor("hv1", dry_run=True)
    assert report["changed"] and len(ledger.claims()) == 2
    report = ledger.retire_hypervisor("hv1")
    assert [c["instance_uuid"] for c in report["released_claims"]] == [row["uuid"]]
    assert [h["host"] for h in ledger.hypervisors()] == ["hv2"]
    vm1 = ledger.instances(["vm-1"])[0]
    assert (vm1["state"], vm1["failure_reason"]) == (ERROR, "hypervisor hv1 was retired")
    assert ledger.retire_hypervisor("hv1")["changed"] is False


# ---- the tracker sync ----------------------------------------------------------------------------

def test_tracker_sync_settles_only_expired_claims_finishing_builds_whose_domain_runs(ledger):
    ledger.sync_hypervisors([HV1])
    [expired_gone] = ledger.claim([placement("a-1", HV1)], TINY, "dead-run", lease_s=-1)
    [expired_running] = ledger.claim([placement("b-1", HV1)], TINY, "slow-run", lease_s=-1)
    [expired_defined] = ledger.claim([placement("d-1", HV1)], TINY, "dead-run", lease_s=-1)
    [live] = ledger.claim([placement("c-1", HV1)], TINY, "live-run", lease_s=3600)
    state = host("hv1", "hv-1", vcpus_total=8, total_ram_mb=8192,
                 domains=[domain(expired_running["uuid"], "b-1"), domain(expired_defined["uuid"], "d-1", state="shutoff"),
                          domain(live["uuid"], "c-1", state="shutoff")])

    dry = ledger.tracker_sync([state], dry_run=True)
    assert sorted(c["instance_uuid"] for c in dry["released_claims"]) == sorted(
        [expired_gone["uuid"], expired_defined["uuid"]])
    assert len(ledger.claims()) == 4 and ledger.instances(["b-1"])[0]["state"] == BUILDING

    report = ledger.tracker_sync([state])
    assert sorted(c["instance_uuid"] for c in report["released_claims"]) == sorted(
        [expired_gone["uuid"], expired_defined["uuid"]])
    # The run died after starting the domain: only its last word to the ledger was lost.
    assert [(c["instance_name"], c["domain_state"]) for c in report["finished_builds"]] == [("b-1", "running")]
    assert report["kept_expired_claims"] == []
    assert sorted(c["instance_uuid"] for c in ledger.claims()) == sorted([expired_running["uuid"], live["uuid"]])
    assert [c["lease_expires_at"] is None for c in ledger.claims(expired_running["uuid"])] == [True]
    assert ledger.instances(["b-1"])[0]["state"] == ACTIVE
    gone = ledger.instances(["a-1"])[0]
    assert gone["state"] == ERROR and "lease expired" in gone["failure_reason"] and "no domain" in gone["failure_reason"]
    defined = ledger.instances(["d-1"])[0]
    assert defined["state"] == ERROR and "its domain is shutoff" in defined["failure_reason"]
    # What the dead build left (its defined domain) is recorded, to be removed.
    assert [(group["instance_name"], [(i["kind"], i["name"], i["present"]) for i in group["items"]])
            for group in report["leftovers"]] == [("d-1", [("domain", "d-1", True)])]


def test_tracker_sync_never_releases_on_a_hypervisor_that_did_not_answer(ledger):
    ledger.sync_hypervisors([HV1])
    ledger.claim([placement("a-1", HV1)], TINY, "dead-run", lease_s=-1)
    report = ledger.tracker_sync([host("hv1", "hv-1", up=False)])
    assert report["released_claims"] == [] and report["kept_expired_claims"][0]["why"] == "its hypervisor did not answer"
    assert [h["host"] for h in report["down"]] == ["hv1"]


def test_tracker_sync_of_some_hypervisors_leaves_the_others_and_missing_needs_staleness(ledger):
    ledger.sync_hypervisors([HV1, HV2])
    [row] = ledger.claim([placement("vm-1", HV1)], TINY, "a")
    ledger.mark_active(row["uuid"])

    # A sync of hv1 alone (a --limit run, a slice) says nothing about hv2.
    some = ledger.tracker_sync([HV1])
    assert [i["name"] for i in some["missing_instances"]] == ["vm-1"]
    assert [h["host"] for h in some["hypervisors"]] == ["hv1"] and some["down"] == []
    assert {h["host"]: h["sync_status"] for h in ledger.hypervisors()} == {"hv1": "up", "hv2": "up"}
    assert ledger.instances()[0]["missing_since"] is not None

    again = ledger.tracker_sync([{**HV1, "domains": [domain(row["uuid"], "vm-1")]}])
    assert [i["name"] for i in again["found_again"]] == ["vm-1"]
    # hv2 is not in this inventory, but something synced it within the age: left as it is.
    recent = ledger.mark_missing(["hv1"], stale_after_s=3600)
    assert [h["host"] for h in recent["synced_elsewhere"]] == ["hv2"] and recent["missing"] == []
    assert ledger.mark_missing(["hv1"], stale_after_s=0, dry_run=True)["changed"] is True
    assert {h["host"]: h["sync_status"] for h in ledger.hypervisors()} == {"hv1": "up", "hv2": "up"}
    stale = ledger.mark_missing(["hv1"], stale_after_s=0)
    assert [h["host"] for h in stale["missing"]] == ["hv2"] and stale["changed"] is True
    assert {h["host"]: h["sync_status"] for h in ledger.hypervisors()} == {"hv1": "up", "hv2": "missing"}
    assert ledger.mark_missing(["hv1"], stale_after_s=0)["changed"] is False
    # Missing is not retired: its capacity and claims stay until an operator retires it.
    assert len(ledger.hypervisors()) == 2


# ---- decisions ----------------------------------------------------------------------------------

def test_a_recorded_decision_replays_to_the_same_answer(ledger):
    states = [host("hv1", "hv-1", total_ram_mb=4096), host("hv2", "hv-2", total_ram_mb=8192)]
    spec = RequestSpec(flavor=TINY, count=2)
    decision = schedule([HostState.from_dict(s) for s in states], spec)
    request = {"flavor": TINY.to_dict(), "count": 2}
    ledger.record_decision("web", "run", request, states, decision.to_dict(), "claimed")
    [stored] = ledger.decisions("web")
    # By hand, with the default weighers (RAM and CPU count; the rest are equal or 0 here):
    # 1st: RAM free 3584 / 7680 -> 0.467 / 1.0, CPU free 2 / 2 -> 1.0 / 1.0: hv2 (2.0 > 1.467).
    # 2nd: RAM 3584 / 7168 -> 0.5 / 1.0, CPU 2 / 1 -> 1.0 / 0.5: a tie at 1.5, kept in input
    # order, so hv1.
    assert stored["choice"] == ["hv2", "hv1"] and stored["alternates"] == [["hv1"], ["hv2"]]
    replayed = schedule([HostState.from_dict(s) for s in stored["host_states"]],
                        RequestSpec.from_dict(stored["request"]))
    assert replayed.to_dict() == stored["decision"]


def test_scheduler_group_counts_members_per_host_for_the_engine(ledger):
    ledger.sync_hypervisors([HV1, HV2])
    ledger.create_server_group("db", "anti-affinity", max_server_per_host=2)
    assert ledger.scheduler_group("db") == {"name": "db", "policy": "anti-affinity",
                                            "rules": {"max_server_per_host": 2}, "hosts": [], "members": {}}
    ledger.claim([placement("db-1", HV1), placement("db-2", HV1), placement("db-3", HV2)], TINY, "a",
                 server_group="db")
    group = ledger.scheduler_group("db")
    assert (group["hosts"], group["members"]) == (["hv1", "hv2"], {"hv1": 2, "hv2": 1})
    assert ledger.scheduler_group("nope") is None


def at_once(count, work):
    """Run ``work`` in ``count`` threads released together; the LedgerErrors they raised."""
    barrier = threading.Barrier(count)
    errors = []

    def run():
        barrier.wait()
        try:
            work()
        except LedgerError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _thread in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return errors


def test_first_syncs_of_a_new_fleet_at_once_all_succeed(ledger_url):
    """Eight first launches sync the same new hypervisors at the same moment."""
    Ledger(ledger_url).open(create=True).close()

    def sync():
        ledger = Ledger(ledger_url).open(create=True)
        try:
            ledger.sync_hypervisors([HV1, HV2])
        finally:
            ledger.close()

    assert at_once(8, sync) == []
    check = Ledger(ledger_url).open(create=True)
    assert [(h["host"], h["generation"]) for h in check.hypervisors()] == [("hv1", 1), ("hv2", 1)]
    check.close()


def test_a_retry_on_an_alternate_moves_the_claim_in_one_step(ledger):
    ledger.sync_hypervisors([HV1, HV2])
    [row] = ledger.claim([placement("vm-1", HV1)], TINY, "a")
    retried = ledger.claim_alternate(row["uuid"], "hv2", "hv-2", "a", lease_s=60)
    assert (retried["uuid"], retried["name"], retried["host"], retried["state"]) == (row["uuid"], "vm-1", "hv2", BUILDING)
    [claim] = ledger.claims(row["uuid"])
    assert (claim["id"], claim["host"]) == (retried["claim_id"], "hv2")


def test_a_retry_on_a_full_alternate_changes_nothing(ledger):
    small = host("hv2", "hv-2", vcpus_total=1)
    ledger.sync_hypervisors([HV1, small])
    ledger.claim([placement("other-1", small)], TINY, "b")
    [row] = ledger.claim([placement("vm-1", HV1)], TINY, "a")
    with pytest.raises(ClaimConflict, match="vCPU"):
        ledger.claim_alternate(row["uuid"], "hv2", "hv-2", "a")
    assert [c["host"] for c in ledger.claims(row["uuid"])] == ["hv1"]


def test_release_claim_refuses_an_instance_uuid(ledger):
    with pytest.raises(LedgerError, match="release_claim takes a claim id"):
        ledger.release_claim("6f1c-not-a-claim-id")


def alembic_config():
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def test_schema_revision_is_the_newest_migration():
    # Ledger.open trusts SCHEMA_REVISION to skip alembic; a new migration must move it.
    scripts = ScriptDirectory.from_config(alembic_config())
    assert SCHEMA_REVISION == scripts.get_current_head(), "set ledger.SCHEMA_REVISION to the new migration's revision"


def downgraded_columns(url, target, table):
    """The columns of ``table`` once the ledger at ``url`` is downgraded to schema ``target``."""
    config = alembic_config()
    engine = create_engine(url)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, target)
        columns = list(connection.execute(text(f"SELECT * FROM {table}")).keys())
    engine.dispose()
    return columns


def migrated_to(url, target, *statements):
    """A ledger at schema ``target`` (alembic, as an older Berth left it), with rows of its own."""
    config = alembic_config()
    engine = create_engine(url)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, target)
        for statement, params in statements:
            connection.execute(text(statement), params)
    engine.dispose()


def test_ledger_at_an_older_revision_is_migrated_on_open(tmp_path):
    url = f"sqlite:///{tmp_path}/old.sqlite3"
    migrated_to(url, "0001")
    assert revision(url) == "0001"
    Ledger(url).open(create=True).close()
    assert revision(url) == SCHEMA_REVISION


def test_migration_0008_gives_known_hypervisors_no_pci_devices_and_goes_back(tmp_path):
    """A ledger synced before PCI devices were gathered: its rows read as having none."""
    url = f"sqlite:///{tmp_path}/old.sqlite3"
    migrated_to(url, "0007")
    ledger = Ledger(url).open(create=True)
    ledger.sync_hypervisors([HV1])
    ledger.close()
    config = alembic_config()
    engine = create_engine(url)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0007")
        config.attributes["connection"] = connection
        command.upgrade(config, "0008")
        assert connection.execute(text("SELECT pci_devices FROM hypervisor_facts")).scalars().all() == ["[]"]
    engine.dispose()


def test_migration_0010_leaves_old_rows_to_the_next_sync_which_moves_their_free_counts_apart(ledger_url):
    """A ledger of schema 0009 synced with free counts inside numa_topology's pages."""
    counted = {"cells": [{"id": 0, "memory_mb": 2048, "cpus": [0, 1],
                          "pages": [{"size_kb": 2048, "total": 64, "free": 60}]}]}
    migrated_to(ledger_url, "0009",
                ("INSERT INTO hypervisors (uuid, name, nodename, generation, synced_at, disabled, sync_status) "
                 "VALUES ('hv-1', 'hv1', 'hv1', 0, '2026-11-26 10:00:00', false, 'up')", {}),
                ("INSERT INTO hypervisor_facts (hypervisor_uuid, numa_topology) VALUES ('hv-1', :topology)",
                 {"topology": json.dumps(counted)}))
    ledger = Ledger(ledger_url).open(create=True)
    assert revision(ledger_url) == SCHEMA_REVISION
    facts = "SELECT numa_topology, free_pages FROM hypervisor_facts"
    with ledger.engine.connect() as db:
        [(topology, free)] = db.execute(text(facts)).all()
    # Nothing reads the counts where they were: they stay until the next sync.
    assert (json.loads(topology) if isinstance(topology, str) else topology, free) == (counted, None)
    ledger.sync_hypervisors([{**host("hv1", "hv-1"), "numa_topology": counted}])
    with ledger.engine.connect() as db:
        [(topology, free)] = db.execute(select(hypervisor_facts.c.numa_topology, hypervisor_facts.c.free_pages)).all()
    assert topology["cells"][0]["pages"] == [{"size_kb": 2048, "total": 64}] and free == {"0": {"2048": 60}}
    ledger.close()
    # And back: 0009 has no such column.
    assert "free_pages" not in downgraded_columns(ledger_url, "0009", "hypervisor_facts")


CELLS = {"cells": [{"id": 0, "memory_mb": 2048, "cpus": [0, 1], "pages": [{"size_kb": 2048, "total": 64}]}]}
OTHER_CELLS = {"cells": [{"id": 0, "memory_mb": 4096, "cpus": [0, 1, 2, 3], "pages": [{"size_kb": 2048, "total": 64}]}]}


def test_migration_0011_hosts_without_digests_are_read_as_they_are_until_a_sync_writes_them(ledger_url):
    """Rows of schema 0010 have no digests: the scheduler's read takes each such host's own
    topology and devices; the next sync writes the digests, and from then on hosts with the
    same facts share one parsed value while the others keep theirs."""
    rows = [("hv-1", "hv1", CELLS), ("hv-2", "hv2", CELLS), ("hv-3", "hv3", OTHER_CELLS)]
    migrated_to(ledger_url, "0010", *[statement for uuid, name, topology in rows for statement in (
        ("INSERT INTO hypervisors (uuid, name, nodename, generation, synced_at, disabled, sync_status) "
         "VALUES (:uuid, :name, :name, 0, '2026-11-26 10:00:00', false, 'up')", {"uuid": uuid, "name": name}),
        ("INSERT INTO hypervisor_facts (hypervisor_uuid, numa_topology) VALUES (:uuid, :topology)",
         {"uuid": uuid, "topology": json.dumps(topology)}))])
    ledger = Ledger(ledger_url).open(create=True)
    assert revision(ledger_url) == SCHEMA_REVISION

    def read():
        table, _generations = ledger.host_table({"numa_topology", "pci_devices"})
        return dict(zip(table.column("host"), table.column("numa_topology")))

    before = read()
    assert before == {"hv1": CELLS, "hv2": CELLS, "hv3": OTHER_CELLS}
    ledger.sync_hypervisors([{**host(name, uuid), "numa_topology": topology} for uuid, name, topology in rows])
    with ledger.engine.connect() as db:
        digests = dict(db.execute(select(hypervisor_facts.c.hypervisor_uuid, hypervisor_facts.c.numa_topology_digest)).all())
    assert digests["hv-1"] == digests["hv-2"] != digests["hv-3"] and None not in digests.values()
    after = read()
    assert after == before and after["hv1"] is after["hv2"] and after["hv3"] is not after["hv1"]
    ledger.close()
    assert "numa_topology_digest" not in downgraded_columns(ledger_url, "0010", "hypervisor_facts")


def test_hosts_whose_facts_moved_on_after_the_digests_were_read_are_read_as_they_are_now(ledger):
    """The read takes the digests first and one text per digest after (host_states._by_digest):
    where a sync rewrote the sampled host in between, every host of that digest reads its own
    text, never the sample's new one."""
    ledger.sync_hypervisors([{**host(name, uuid), "numa_topology": CELLS} for uuid, name in (("hv-1", "hv1"),
                                                                                             ("hv-2", "hv2"))])
    with ledger.engine.connect() as db:
        seen = [digest for _uuid, digest in sorted(db.execute(
            select(hypervisor_facts.c.hypervisor_uuid, hypervisor_facts.c.numa_topology_digest)))]
    ledger.sync_hypervisors([{**host("hv1", "hv-1"), "numa_topology": OTHER_CELLS},
                             {**host("hv2", "hv-2"), "numa_topology": CELLS}])
    with ledger.engine.connect() as db:
        assert host_states._by_digest(db, "numa_topology", ["hv-1", "hv-2"], seen) == [OTHER_CELLS, CELLS]
        # Unmoved digests: one text for both.
        now = [digest for _uuid, digest in sorted(db.execute(
            select(hypervisor_facts.c.hypervisor_uuid, hypervisor_facts.c.numa_topology_digest)))]
        assert host_states._by_digest(db, "numa_topology", ["hv-1", "hv-2", "hv-9"], [*now, None]) == [
            OTHER_CELLS, CELLS, None]


# ---- the scheduler's read ---------------------------------------------------------------------

def test_host_table_is_the_tracker_view_of_every_hypervisor_in_one_read(ledger):
    orphan = domain("x", "handmade", memory_mb=256)
    first = {**HV1, "domains": [orphan], "images": ["debian.qcow2", "alpine.raw"], "networks": ["default"],
             "refused_images": {"linked.qcow2": "image linked.qcow2 ... is a symbolic link"},
             "uri": "qemu+ssh://hv1/system", "supported_instances": [["x86_64", "kvm", "hvm"]],
             "numa_topology": {"cells": [], "cpu_dedicated_set": [1, 2, 3], "cpu_shared_set": [0]}}
    ledger.sync_hypervisors([first, HV2])
    ledger.claim([placement("web-1", HV2)], TINY, "run", lease_s=60)
    table, generations = ledger.host_table()
    assert list(table.column("host")) == ["hv1", "hv2"]
    views = {view["host"]: view for view in ledger.tracker_states([first, HV2])}
    for position, name in enumerate(["hv1", "hv2"]):
        state = table[position]
        for field in ("vcpus_used", "free_ram_mb", "free_disk_mb", "num_instances", "vcpus_total"):
            assert getattr(state, field) == views[name][field], (name, field)
        assert generations[position] == views[name]["generation"]
        assert state.service_up and 0 <= state.sync_age_s < 60
    # A build in progress (a claim with a lease) is an io op, as in Nova.
    assert (table[0].num_io_ops, table[1].num_io_ops) == (0, 1)
    # Optional facts are read when a filter needs them; images and networks by the names asked.
    assert table[0].images == [] and table[0].supported_instances == []
    table, _generations = ledger.host_table(fields={"supported_instances"},
                                            images=["debian.qcow2", "linked.qcow2"], networks=["default"])
    assert table[0].supported_instances == [["x86_64", "kvm", "hvm"]]
    assert (table[0].images, table[1].images) == (["debian.qcow2"], [])
    assert table[0].refused_images == {"linked.qcow2": "image linked.qcow2 ... is a symbolic link"}
    assert (table[0].networks, table[1].networks) == (["default"], [])
    # A build's target: how to reach it, and its guests' CPUs (ordinary guests float over its
    # cpu_shared_set).
    targets = ledger.build_targets(["hv-1", "hv-2"])
    assert targets == {"hv-1": {"host": "hv1", "hypervisor_uuid": "hv-1", "uri": "qemu+ssh://hv1/system",
                                "domain_types": ["kvm"], "cpu": None, "cpu_shared_set": [0]},
                       "hv-2": {**targets["hv-2"], "cpu_shared_set": None}}


def test_a_hypervisor_that_did_not_answer_is_down_with_why_and_keeps_its_last_state(ledger):
    ledger.sync_hypervisors([HV1, HV2])
    report = ledger.tracker_sync([{**host("hv2", up=False), "down_reason": "hv2: connection refused"}])
    assert [(d["host"], d["reason"]) for d in report["down"]] == [("hv2", "hv2: connection refused")]
    table, _generations = ledger.host_table()
    down = table[1]
    assert (down.host, down.service_up, down.down_reason) == ("hv2", False, "hv2: connection refused")
    assert down.vcpus_total == 8  # the last synced capacity stays
    ledger.sync_hypervisors([HV2])
    assert ledger.host_table()[0][1].service_up is True


def test_the_usage_summary_always_equals_the_claims_and_unmanaged_rows(ledger):
    """Every write keeps each hypervisor row's usage summary equal to its rows, whatever order."""
    rng = random.Random(5)
    ledger.sync_hypervisors([HV1, HV2])
    live: list[dict] = []
    for step in range(40):
        action = rng.choice(["claim", "active", "error", "delete", "move", "alternate", "orphans"])
        try:
            if action == "claim" or not live:
                where = rng.choice([HV1, HV2])
                live += ledger.claim([placement(f"vm-{step}", where)], TINY, "run", lease_s=rng.choice([60, -1]))
            elif action == "active":
                ledger.mark_active(rng.choice(live)["uuid"])
            elif action == "error":
                ledger.mark_error(live.pop(rng.randrange(len(live)))["uuid"], "test")
            elif action == "delete":
                ledger.delete_instance(live.pop(rng.randrange(len(live)))["uuid"])
            elif action in ("move", "alternate"):
                row = ledger.instances([rng.choice(live)["name"]])[0]
                other = "hv-2" if row["hypervisor_uuid"] == "hv-1" else "hv-1"
                if action == "move" and row["state"] == ACTIVE:
                    ledger.finish_move(row["uuid"], ledger.claim_move(row["uuid"], other, "run")["id"])
                else:
                    ledger.claim_alternate(row["uuid"], other[3:], other, "run")
            else:
                orphans = [domain(f"o-{step}-{n}", f"orphan-{n}", memory_mb=64) for n in range(rng.randint(0, 2))]
                ledger.tracker_sync([{**rng.choice([HV1, HV2]), "domains": orphans}])
        except ClaimConflict:
            pass
        with ledger.engine.connect() as db:
            for hv_uuid, used_vcpus, used_mb, used_disk, count, io_ops in db.execute(text(
                    "SELECT uuid, vcpus_used, memory_mb_used, disk_mb_used, num_instances, num_io_ops "
                    "FROM hypervisors")):
                sums = db.execute(text(
                    "SELECT (SELECT COALESCE(SUM(vcpus), 0) FROM claims WHERE hypervisor_uuid = :u) + "
                    "(SELECT COALESCE(SUM(vcpus), 0) FROM unmanaged_usage WHERE hypervisor_uuid = :u), "
                    "(SELECT COALESCE(SUM(memory_mb), 0) FROM claims WHERE hypervisor_uuid = :u) + "
                    "(SELECT COALESCE(SUM(memory_mb), 0) FROM unmanaged_usage WHERE hypervisor_uuid = :u), "
                    "(SELECT COALESCE(SUM(disk_mb), 0) FROM claims WHERE hypervisor_uuid = :u) + "
                    "(SELECT COALESCE(SUM(disk_mb), 0) FROM unmanaged_usage WHERE hypervisor_uuid = :u), "
                    "(SELECT COUNT(*) FROM claims WHERE hypervisor_uuid = :u) + "
                    "(SELECT COUNT(*) FROM unmanaged_usage WHERE hypervisor_uuid = :u), "
                    "(SELECT COUNT(*) FROM claims WHERE hypervisor_uuid = :u AND lease_expires_at IS NOT NULL)"),
                    {"u": hv_uuid}).one()
                assert (used_vcpus, used_mb, used_disk, count, io_ops) == tuple(sums), (step, action, hv_uuid)


def test_a_ledger_of_schema_0002_keeps_its_capacity_and_usage_through_0003(tmp_path):
    url = f"sqlite:///{tmp_path}/old.sqlite3"
    when = "2026-11-20 10:00:00"
    migrated_to(
        url, "0002",
        ("INSERT INTO hypervisors (uuid, name, nodename, generation, synced_at, disabled, sync_status) "
         "VALUES ('hv-1', 'hv1', 'hv1', 3, :when, 0, 'up')", {"when": when}),
        *(("INSERT INTO inventories VALUES ('hv-1', :r, :t, :v, :a)", {"r": resource, "t": total, "v": reserved,
                                                                       "a": ratio})
          for resource, total, reserved, ratio in (("VCPU", 8, 0, 4.0), ("MEMORY_MB", 8192, 512, 1.5),
                                                   ("DISK_MB", 102400, 0, 1.0))),
        ("INSERT INTO instances (uuid, name, flavor_name, vcpus, memory_mb, root_gb, ephemeral_gb, swap, "
         "hypervisor_uuid, host, state, created_at, updated_at) VALUES ('i-1', 'vm-1', 'm1.tiny', 1, 512, 1, "
         "0, 0, 'hv-1', 'hv1', 'ACTIVE', :when, :when)", {"when": when}),
        ("INSERT INTO claims (instance_uuid, hypervisor_uuid, vcpus, memory_mb, disk_mb, owner, created_at) "
         "VALUES ('i-1', 'hv-1', 1, 512, 1024, 'old', :when)", {"when": when}),
        ("INSERT INTO unmanaged_usage VALUES ('hv-1', 'd-1', 'handmade', 2, 256, 0, :when)", {"when": when}),
    )
    ledger = Ledger(url).open(create=True)
    [row] = ledger.hypervisors()
    assert row["inventories"] == {
        "VCPU": {"total": 8, "reserved": 0, "allocation_ratio": 4.0},
        "MEMORY_MB": {"total": 8192, "reserved": 512, "allocation_ratio": 1.5},
        "DISK_MB": {"total": 102400, "reserved": 0, "allocation_ratio": 1.0},
    }
    assert (row["usage"]["vcpus_used"], row["usage"]["free_ram_mb"], row["usage"]["num_instances"]) == (
        3, 8192 - 512 - 512 - 256, 2)
    ledger.close()


def test_first_opens_of_a_new_ledger_at_once_migrate_it_once(ledger_url):
    """gather.yml's per-host tasks all open a new ledger at the same moment."""
    assert at_once(8, lambda: Ledger(ledger_url).open(create=True).close()) == []
    assert revision(ledger_url) == SCHEMA_REVISION
