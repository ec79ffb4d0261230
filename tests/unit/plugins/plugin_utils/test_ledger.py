"""The ledger on a real SQLite file: migration, sync, tracker view, the claim's re-check."""

from __future__ import annotations

import sqlite3

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import LedgerError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    ACTIVE,
    ERROR,
    ClaimConflict,
    Ledger,
    safe_url,
)

TINY = Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1)


def host(name="hv1", uuid="hv-1", total_ram_mb=2048, vcpus_total=2, domains=()):
    return {
        "host": name, "nodename": name, "uuid": uuid, "service_up": True, "disabled": False,
        "vcpus_total": vcpus_total, "vcpus_used": 0, "total_usable_ram_mb": total_ram_mb,
        "free_ram_mb": total_ram_mb - 512, "total_usable_disk_gb": 100, "free_disk_mb": 100 * 1024,
        "num_instances": 0, "num_io_ops": 0, "cpu_allocation_ratio": 1.0, "ram_allocation_ratio": 1.0,
        "disk_allocation_ratio": 1.0, "reserved_host_memory_mb": 512, "reserved_host_disk_mb": 0,
        "domains": list(domains),
    }


@pytest.fixture
def ledger(tmp_path):
    return Ledger(f"sqlite:///{tmp_path}/ledger.sqlite3").open()


def placement(name, state=None):
    state = state or host()
    return {"name": name, "host": state["host"], "hypervisor_uuid": state["uuid"]}


def test_open_migrates_to_head_and_records_the_revision(ledger, tmp_path):
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        revision = db.execute("SELECT version_num FROM alembic_version").fetchone()[0]
    assert {"hypervisors", "instances", "claims"} <= tables
    assert revision == "0001"


def test_newer_schema_is_refused_with_the_url(tmp_path):
    Ledger(f"sqlite:///{tmp_path}/l.sqlite3").open()
    with sqlite3.connect(tmp_path / "l.sqlite3") as db:
        db.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(LedgerError, match=r"l\.sqlite3 has schema revision 9999, newer than this Berth knows"):
        Ledger(f"sqlite:///{tmp_path}/l.sqlite3").open()


def test_password_never_shown():
    assert "s3cret" not in safe_url("postgresql+psycopg://berth:s3cret@db.example/berth")


def test_claim_fills_a_host_then_conflicts_without_writing(ledger):
    ledger.sync_hypervisors([host()])
    # 2048 MB total, 512 reserved: room for three 512 MB instances, and vCPUs for two (ratio 1.0).
    ledger.claim([placement("web-1"), placement("web-2")], TINY, "test")
    with pytest.raises(ClaimConflict, match="vCPU"):
        ledger.claim([placement("web-3")], TINY, "test")
    assert [row["name"] for row in ledger.instances()] == ["web-1", "web-2"]
    assert len(ledger.claims()) == 2


def test_one_request_is_all_or_nothing(ledger):
    ledger.sync_hypervisors([host()])
    with pytest.raises(ClaimConflict):
        ledger.claim([placement("web-1"), placement("web-2"), placement("web-3")], TINY, "test")
    assert ledger.instances() == [] and ledger.claims() == []


def test_tracker_view_counts_claims_and_orphans_not_berth_domains_twice(ledger):
    ledger.sync_hypervisors([host()])
    [row] = ledger.claim([placement("web-1")], TINY, "test")
    orphan = {"name": "handmade", "uuid": "x", "vcpus": 1, "memory_mb": 256, "disks": [], "berth": None}
    ours = {"name": "web-1", "uuid": row["uuid"], "vcpus": 1, "memory_mb": 512, "disks": [],
            "berth": {"instance_uuid": row["uuid"]}}
    ledger.sync_hypervisors([host(domains=[orphan, ours])])
    [view] = ledger.tracker_states([host(domains=[orphan, ours])])
    assert view["vcpus_used"] == 1 + 1
    assert view["free_ram_mb"] == 2048 - 512 - 512 - 256
    assert view["num_instances"] == 2


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
