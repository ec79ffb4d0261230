"""A launch of many instances with berth_placement=packing (packing.py): decided together, claimed
together, and the recorded decision says how. On a real SQLite ledger."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.request import instance_names
from ansible_collections.berth.fleet.plugins.module_utils.scheduler import packing
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import check_request
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.schedule import Schedule
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

pytest.importorskip("ortools")

PACKING = Settings(placement="packing", packing_time_limit=20)
FLAVOR = {"name": "m1.small", "vcpus": 1, "memory_mb": 2048, "root_gb": 1}


def hypervisor(index):
    name = f"hv{index}"
    return {
        "host": name, "nodename": name, "uuid": f"hv-{index}", "uri": f"qemu+ssh://{name}/system",
        "service_up": True, "disabled": False, "vcpus_total": 8, "vcpus_used": 0,
        "total_usable_ram_mb": 16384, "free_ram_mb": 0, "total_usable_disk_gb": 200, "free_disk_mb": 0,
        "num_instances": 0, "num_io_ops": 0, "cpu_allocation_ratio": 4.0, "ram_allocation_ratio": 1.0,
        "disk_allocation_ratio": 1.0, "reserved_host_memory_mb": 0, "reserved_host_disk_mb": 0, "domains": [],
        "supported_instances": [["x86_64", "qemu", "hvm"]], "availability_zone": None, "aggregates": [],
    }


@pytest.fixture
def ledger(tmp_path):
    opened = Ledger(f"sqlite:///{tmp_path}/ledger.sqlite3").open()
    opened.sync_hypervisors([hypervisor(1), hypervisor(2), hypervisor(3)])
    yield opened
    opened.close()


def launch(ledger, settings, count, check_mode=False):
    request = check_request({"flavor": FLAVOR}, settings)
    return Schedule(request, settings, instance_names("web", count), "web", ledger, {}, check_mode).run()


def test_greedy_spreads_packing_fills_one_host_and_claims_them_all(ledger):
    # 16 GiB hosts take eight 2 GiB instances each: six fit on one host, where greedy (RAMWeigher)
    # spreads them over all three.
    assert len({p["host"] for p in launch(ledger, Settings(), 6, check_mode=True)["placements"]}) == 3
    result = launch(ledger, PACKING, 6)
    assert len({p["host"] for p in result["placements"]}) == 1
    assert result["decision"]["packing"]["method"] == "packing"
    assert result["decision"]["packing"]["gap_percent"] == 0.0
    claims = ledger.claims()
    assert len(claims) == 6 and len({claim["hypervisor_uuid"] for claim in claims}) == 1
    [recorded] = ledger.decisions("web")
    assert "packed by CP-SAT" in recorded["decision"]["summary"]


def test_without_ortools_the_launch_places_in_the_greedy_order_and_says_so(ledger, monkeypatch):
    monkeypatch.setattr(packing, "load_solver", lambda: None)
    result = launch(ledger, PACKING, 6, check_mode=True)
    assert len({p["host"] for p in result["placements"]}) == 3
    assert result["decision"]["packing"]["method"] == "greedy"
    assert "ortools is not installed" in result["summary"]


def test_one_instance_is_never_packed(ledger):
    result = launch(ledger, PACKING, 1, check_mode=True)
    assert "packing" not in result["decision"]
