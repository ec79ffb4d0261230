"""The migrate operation (operations/migrate.py) through fake hypervisors (fake_hypervisor.py) and
a real SQLite ledger: check mode decides and claims nothing; a live move carries the domain and
its volumes to the destination at the migration address, and the ledger follows; a move that
fails leaves the domain running on the source and gives the destination's claim back. The same
through real libvirt and ansible-playbook: tests/integration/test_migrate.py."""

from __future__ import annotations

import pytest
from fake_hypervisor import FakeHypervisor, connect_to, domain_xml, synced_state

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, HypervisorError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import root_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ACTIVE, Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.migrate import Migrate
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

TINY = Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1)
# An instance without a build record (as an adopted one): moved with its own definition.
ARGS = {"name": "web-1", "mode": "auto", "to_host": None, "carry_definition": True, "template": None, "timeout": 30}


@pytest.fixture
def placed(tmp_path):
    """web-1 ACTIVE on hv1 in the ledger, its domain running there with its root volume; hv2 empty."""
    ledger = Ledger(f"sqlite:///{tmp_path}/ledger.sqlite3").open()
    ledger.sync_hypervisors([synced_state("hv1", "hv-1"), synced_state("hv2", "hv-2")])
    [row] = ledger.claim([{"name": "web-1", "host": "hv1", "hypervisor_uuid": "hv-1"}], TINY, "launch")
    ledger.mark_active(row["uuid"])
    hv1, hv2 = FakeHypervisor("hv1"), FakeHypervisor("hv2")
    hv1.add_volume(root_volume_name(row["uuid"]), capacity_mb=1024, data=b"the guest's disk")
    hv1.add_domain(domain_xml("web-1", row["uuid"], disks=(root_volume_name(row["uuid"]),)))
    yield ledger, row["uuid"], hv1, hv2
    ledger.close()


def migrate(ledger, hv1, hv2, check_mode=False, address=None, **args):
    return Migrate({**ARGS, **args}, Settings(), ledger, {}, check_mode, migration_address=lambda host: address,
                   connect=connect_to(hv1, hv2)).run()


def claimed_hosts(ledger, uuid):
    return [claim["hypervisor_uuid"] for claim in ledger.claims(uuid)]


def test_check_mode_names_the_destination_and_changes_nothing(placed):
    ledger, uuid, hv1, hv2 = placed
    before = hv1.snapshot(), hv2.snapshot()
    dry = migrate(ledger, hv1, hv2, check_mode=True)
    assert dry["changed"] and (dry["from_host"], dry["to_host"]) == ("hv1", "hv2")
    assert dry["msg"].startswith("would migrate web-1 from hv1 to hv2 (chosen by the scheduler")
    assert (hv1.snapshot(), hv2.snapshot()) == before
    assert claimed_hosts(ledger, uuid) == ["hv-1"] and ledger.instances(["web-1"])[0]["host"] == "hv1"
    assert not hv1.is_open and not hv2.is_open


def test_a_live_move_carries_the_domain_and_the_ledger_follows(placed):
    ledger, uuid, hv1, hv2 = placed
    moved = migrate(ledger, hv1, hv2, address="192.0.2.2")
    assert (moved["to_host"], moved["mode"]) == ("hv2", "live")
    assert hv1.migrations == [{"uuid": uuid, "to": "hv2", "address": "192.0.2.2"}]
    assert hv2.domain_state(uuid) == "running" and hv1.domain_state(uuid) is None
    assert hv2.volume_names_of() == {root_volume_name(uuid)} and hv1.volume_names_of() == set()
    [row] = ledger.instances(["web-1"])
    assert (row["host"], row["state"]) == ("hv2", ACTIVE) and claimed_hosts(ledger, uuid) == ["hv-2"]
    assert not hv1.is_open and not hv2.is_open


@pytest.mark.parametrize(("mode", "fault", "error", "why"), [
    ("cold", "define", HypervisorError, "hv2: internal error: injected"),
    ("live", "live_migrate", BerthError, "cannot live-migrate web-1: live migration failed: hv1: internal error"),
], ids=["cold-define-fails", "live-migration-fails"])
def test_a_failed_move_leaves_the_domain_on_the_source_and_gives_the_destination_back(placed, mode, fault, error, why):
    ledger, uuid, hv1, hv2 = placed
    (hv2 if fault == "define" else hv1).faults[fault] = HypervisorError(
        "hv2" if fault == "define" else "hv1", "internal error: injected")
    with pytest.raises(error, match=why):
        migrate(ledger, hv1, hv2, mode=mode)
    # Copied, defined or not, nothing of it stays on hv2; it runs on hv1 again with its disk.
    assert hv2.domains == {} and hv2.volume_names_of() == set()
    assert hv1.domain_state(uuid) == "running" and hv1.volume_names_of() == {root_volume_name(uuid)}
    [row] = ledger.instances(["web-1"])
    assert (row["host"], row["state"]) == ("hv1", ACTIVE) and claimed_hosts(ledger, uuid) == ["hv-1"]


def test_an_ordinary_guest_floats_over_the_destination_s_own_shared_cpus(tmp_path):
    """A move defines on the destination what Berth would define there: for a guest without
    pinned CPUs, its vCPUs (<vcpu cpuset>) on the destination's cpu_shared_set, as its last sync
    recorded it, never the source's (issue 38)."""
    from fake_hypervisor import POOL_PATH

    from ansible_collections.berth.fleet.plugins.module_utils.request import Built, Request
    from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import DEFAULT_TEMPLATE, DomainTemplate

    ledger = Ledger(f"sqlite:///{tmp_path}/ledger.sqlite3").open()
    try:
        ledger.sync_hypervisors([
            {**synced_state("hv1", "hv-1"), "numa_topology": {"cells": [], "cpu_shared_set": [0, 1],
                                                              "cpu_dedicated_set": [2, 3]}},
            {**synced_state("hv2", "hv-2"), "numa_topology": {"cells": [], "cpu_shared_set": [4, 5],
                                                              "cpu_dedicated_set": [6, 7]}}])
        request = Request(flavor=TINY, domain_type="qemu")
        [row] = ledger.claim([{"name": "web-1", "host": "hv1", "hypervisor_uuid": "hv-1"}], TINY, "launch",
                             request=request.to_record())
        uuid = row["uuid"]
        ledger.mark_active(uuid, Built(seed=False).to_record())
        hv1, hv2 = FakeHypervisor("hv1"), FakeHypervisor("hv2")
        hv1.add_volume(root_volume_name(uuid), capacity_mb=1024, data=b"the guest's disk")
        made = {"disk": {"path": f"{POOL_PATH}/{root_volume_name(uuid)}"}, "seed": None, "nvram": None}
        hv1.add_domain(DomainTemplate(DEFAULT_TEMPLATE).render(request, "web-1", uuid, made, "qemu",
                                                               Settings().serial_log_dir, shared_cpus=[0, 1]))
        assert "<vcpu cpuset='0-1'>" in hv1.domain_xml(uuid)
        moved = migrate(ledger, hv1, hv2, carry_definition=False, to_host="hv2")
        assert moved["to_host"] == "hv2" and hv2.domain_state(uuid) == "running"
        assert "<vcpu cpuset='4-5'>1</vcpu>" in hv2.domain_xml(uuid)
    finally:
        ledger.close()
