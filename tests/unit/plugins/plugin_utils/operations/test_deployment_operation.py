"""berth.fleet.deployment's work (operations/deployment.py): several entries placed together and
claimed in one transaction, all or nothing. On a real SQLite ledger."""

from __future__ import annotations

from collections import Counter

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ClaimConflict, Ledger
from ansible_collections.berth.fleet.plugins.action.deployment import checked_entries
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.deployment import Deployment as Operation
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

pytest.importorskip("ortools")

PACKING = Settings(placement="packing", packing_time_limit=20)
SMALL = {"name": "small", "vcpus": 1, "memory_mb": 4096, "root_gb": 1}
LARGE = {"name": "large", "vcpus": 2, "memory_mb": 12288, "root_gb": 1}


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
    opened.sync_hypervisors([hypervisor(number) for number in range(1, 6)])
    opened.create_server_group("tiers", "anti-affinity")
    yield opened
    opened.close()


# Two tiers of one anti-affinity group (one member per host, across both entries) and a 12 GiB
# database: web and app take four different 16 GiB hosts, the database joins one of them (4 + 12).
ENTRIES = [{"name": "web", "flavor": SMALL, "count": 2, "server_group": "tiers"},
           {"name": "app", "flavor": SMALL, "count": 2, "server_group": "tiers"},
           {"name": "db", "flavor": LARGE, "count": 1}]


def deploy(entries, settings, ledger, task_vars, check_mode):
    """The action's work: the entries checked, then the operation."""
    return Operation(checked_entries(entries, settings), settings, ledger, task_vars, check_mode)


def hosts_by_entry(result):
    return {entry["name"]: Counter(p["host"] for p in entry["placements"]) for entry in result["entries"]}


def test_check_mode_prints_the_packed_placement_and_claims_nothing(ledger):
    result = deploy(ENTRIES, PACKING, ledger, {}, check_mode=True).run()
    placed = hosts_by_entry(result)
    assert len(set(placed["web"]) | set(placed["app"])) == 4
    assert set(placed["db"]) <= set(placed["web"]) | set(placed["app"])
    assert result["packing"]["method"] == "packing" and result["packing"]["hosts_used"] == 4
    assert {p["state"] for p in result["placements"]} == {"PLANNED"}
    assert ledger.claims() == []


def test_the_run_claims_every_entry_and_the_group_holds_across_entries(ledger):
    result = deploy(ENTRIES, PACKING, ledger, {}, check_mode=False).run()
    assert result["changed"]
    assert len(ledger.claims()) == 5
    members = [row["host"] for row in ledger.instances(["web-1", "web-2", "app-1", "app-2"])]
    assert len(set(members)) == 4
    again = deploy(ENTRIES, PACKING, ledger, {}, check_mode=False).run()
    assert not again["changed"] and len(ledger.claims()) == 5


def test_a_claim_that_no_longer_fits_claims_nothing(ledger, monkeypatch):
    def lost(*_args, **_kwargs):
        raise ClaimConflict("hv1", "no room left")

    monkeypatch.setattr(Ledger, "claim_batch", lost)
    result = deploy(ENTRIES, PACKING, ledger, {}, check_mode=False).run()
    assert result["failed"] and result["msg"].startswith("nothing of the deployment was claimed: ")
    assert ledger.claims() == []


def test_claim_batch_is_one_transaction(ledger):
    """The second entry's claim finds no room (hv1 has 16 GiB): the first entry's is undone too."""
    first = {"placements": [{"name": "a-1", "host": "hv1", "hypervisor_uuid": "hv-1"}],
             "flavor": _flavor(LARGE)}
    second = {"placements": [{"name": "b-1", "host": "hv1", "hypervisor_uuid": "hv-1"}], "flavor": _flavor(LARGE)}
    with pytest.raises(ClaimConflict):
        ledger.claim_batch([first, second], "test")
    assert ledger.claims() == [] and ledger.instances(["a-1", "b-1"]) == []


def test_a_deployment_that_does_not_fit_claims_nothing(ledger):
    entries = [{"name": "huge", "flavor": LARGE, "count": 6}]
    result = deploy(entries, PACKING, ledger, {}, check_mode=False).run()
    assert result["failed"] and "nothing of the deployment was claimed" in result["msg"]
    assert ledger.claims() == []


def test_with_placement_greedy_the_entries_go_in_nova_order(ledger):
    result = deploy(ENTRIES, Settings(), ledger, {}, check_mode=True).run()
    assert result["packing"]["method"] == "greedy" and result["packing"]["reason"] == "berth_placement is greedy"


@pytest.mark.parametrize("entries, field", [
    ([], "entries"),
    ([{"name": "web", "flavor": SMALL, "size": 3}], "entries[0].size"),
    ([{"name": "web"}], "entries[0].flavor"),
    ([{"name": "web", "flavor": SMALL}, {"name": "web", "flavor": SMALL}], "entries"),
])
def test_bad_entries_name_the_field(ledger, entries, field):
    with pytest.raises(InputError) as raised:
        deploy(entries, PACKING, ledger, {}, check_mode=True).run()
    assert raised.value.field == field


def _flavor(data):
    return Flavor.from_dict(data)
