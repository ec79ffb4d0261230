"""The soak's invariant check (benchmarks/soak.py ``violations``) on hand-made snapshots: each
broken invariant is found, named, and only where it applies (leftovers only once settled)."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import soak  # noqa: E402  (benchmarks/soak.py)

NOW = dt.datetime(2026, 1, 1, 12, 0, 0)
HV = {"hv1": "11111111-1111-1111-1111-111111111111", "hv2": "22222222-2222-2222-2222-222222222222"}
WEB = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
DB = "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb"


def hypervisor(name: str, vcpus_used: int = 0, memory_mb_used: int = 0, disk_mb_used: int = 0,
               num_instances: int = 0) -> dict:
    """A hypervisor row as the soak reads it: 2 CPUs x 2.0, 4096 MB (512 reserved), 10 GB."""
    return {"uuid": HV[name], "name": name, "vcpus_total": 2, "cpu_allocation_ratio": 2.0, "vcpus_used": vcpus_used,
            "total_usable_ram_mb": 4096, "reserved_host_memory_mb": 512, "ram_allocation_ratio": 1.0,
            "memory_mb_used": memory_mb_used, "free_ram_mb": 4096 - 512 - memory_mb_used,
            "total_usable_disk_gb": 10, "reserved_host_disk_mb": 0, "disk_allocation_ratio": 1.0,
            "disk_mb_used": disk_mb_used, "free_disk_mb": 10 * 1024 - disk_mb_used, "num_instances": num_instances}


def instance(uuid: str, name: str, host: str | None, state: str = "ACTIVE") -> dict:
    return {"uuid": uuid, "name": name, "host": host, "hypervisor_uuid": HV.get(host), "state": state,
            "failure_reason": None}


def claim(claim_id: int, uuid: str, host: str, lease: dt.datetime | None = None) -> dict:
    return {"id": claim_id, "instance_uuid": uuid, "hypervisor_uuid": HV[host], "vcpus": 1, "memory_mb": 128,
            "disk_mb": 1024, "lease_expires_at": lease}


def domain(name: str, running: bool = True) -> dict:
    return {"name": name, "running": running, "vcpus": 1, "memory_mb": 128}


def fleet(**changes) -> dict:
    """web-1 ACTIVE on hv1 with its claim, domain and volume; hv2 empty; one anti-affinity group."""
    snap = {
        "now": NOW,
        "hypervisors": [hypervisor("hv1", 1, 128, 1024, 1), hypervisor("hv2")],
        "instances": [instance(WEB, "web-1", "hv1")],
        "claims": [claim(1, WEB, "hv1")],
        "unmanaged_usage": [],
        "server_groups": [{"uuid": "g", "name": "spread", "policy": "anti-affinity", "max_server_per_host": None}],
        "server_group_members": [{"group_uuid": "g", "instance_uuid": WEB}],
        "libvirt": {"hv1": {"domains": {WEB: domain("web-1")}, "volumes": [f"berth-{WEB}-root.qcow2", "debian.qcow2"]},
                    "hv2": {"domains": {}, "volumes": []}},
    }
    snap.update(changes)
    return snap


def found(snap: dict, settled: bool) -> list[str]:
    return sorted({key[0] for key, _message in soak.violations(snap, settled)})


def test_a_consistent_fleet_breaks_nothing():
    assert found(fleet(), settled=False) == []
    assert found(fleet(), settled=True) == []


def test_a_dead_build_is_allowed_until_a_gather_past_its_lease():
    """A BUILDING instance with its claim and volume: a launch may be running (cheap checks);
    once settled it is a build that outlived its lease."""
    snap = fleet(instances=[instance(WEB, "web-1", "hv1"), instance(DB, "db-1", "hv2", "BUILDING")],
                 claims=[claim(1, WEB, "hv1"), claim(2, DB, "hv2", lease=NOW - dt.timedelta(seconds=5))],
                 hypervisors=[hypervisor("hv1", 1, 128, 1024, 1), hypervisor("hv2", 1, 128, 1024, 1)])
    snap["libvirt"]["hv2"]["volumes"] = [f"berth-{DB}-root.qcow2"]
    assert found(snap, settled=False) == []
    assert found(snap, settled=True) == ["BUILDING after a gather past its lease"]
    [(_key, message)] = soak.violations(snap, settled=True)
    assert "db-1" in message and "volumes root.qcow2" in message


@pytest.mark.parametrize("state", ["ERROR", None], ids=["error-instance", "deleted-instance"])
def test_a_leaked_volume_is_an_orphan_once_settled(state):
    snap = fleet()
    if state:
        snap["instances"].append(instance(DB, "db-1", "hv2", state))
    snap["libvirt"]["hv2"]["volumes"] = [f"berth-{DB}-root.qcow2"]
    assert found(snap, settled=False) == []
    assert found(snap, settled=True) == ["volume without instance"]


def test_a_domain_on_the_wrong_host():
    snap = fleet()
    snap["libvirt"]["hv2"]["domains"][WEB] = snap["libvirt"]["hv1"]["domains"].pop(WEB)
    assert found(snap, settled=False) == ["placed instance without its domain"]
    assert found(snap, settled=True) == ["domain without claim", "placed instance without its domain"]


def test_a_domain_the_ledger_does_not_know():
    snap = fleet()
    snap["libvirt"]["hv2"]["domains"][DB] = domain("stray")
    assert found(snap, settled=False) == ["domain without instance"]


def test_claims_of_an_active_instance_on_two_hosts():
    snap = fleet(claims=[claim(1, WEB, "hv1"), claim(2, WEB, "hv2", lease=NOW)],
                 hypervisors=[hypervisor("hv1", 1, 128, 1024, 1), hypervisor("hv2", 1, 128, 1024, 1)])
    assert found(snap, settled=False) == ["claims of a placed instance"]


def test_a_stopped_instance_keeps_its_claim_and_a_domain_that_does_not_run():
    snap = fleet(instances=[instance(WEB, "web-1", "hv1", "STOPPED")])
    snap["libvirt"]["hv1"]["domains"][WEB]["running"] = False
    assert found(snap, settled=True) == []
    snap["libvirt"]["hv1"]["domains"].pop(WEB)
    assert found(snap, settled=True) == ["placed instance without its domain"]


def test_an_anti_affinity_group_with_two_members_on_one_host():
    snap = fleet(instances=[instance(WEB, "web-1", "hv1"), instance(DB, "web-2", "hv1")],
                 claims=[claim(1, WEB, "hv1"), claim(2, DB, "hv1")],
                 server_group_members=[{"group_uuid": "g", "instance_uuid": WEB},
                                       {"group_uuid": "g", "instance_uuid": DB}],
                 hypervisors=[hypervisor("hv1", 2, 256, 2048, 2), hypervisor("hv2")])
    snap["libvirt"]["hv1"]["domains"][DB] = domain("web-2")
    assert {key for key, _message in soak.violations(snap, settled=False)} == {
        ("server group", "spread", "claims"), ("server group", "spread", "libvirt")}


def test_over_the_limit_and_usage_columns_that_do_not_add_up():
    """hv1's columns say 5 vCPUs (limit 2 x 2.0 = 4) where its one claim holds 1."""
    snap = fleet(hypervisors=[hypervisor("hv1", 5, 128, 1024, 1), hypervisor("hv2")])
    [(key, message), (key2, _message2)] = sorted(soak.violations(snap, settled=False))
    assert key == ("over its limit in the ledger", "hv1", "vCPUs") and "5 vCPUs used, limit 4" in message
    assert key2 == ("usage columns", "hv1")


def test_an_unreachable_host_is_skipped_until_a_full_check():
    snap = fleet()
    snap["libvirt"]["hv2"] = None
    assert found(snap, settled=False) == []
    assert found(snap, settled=True) == ["host unreachable at a full check"]
