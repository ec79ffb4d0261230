"""The adopt operation (operations/adopt.py) through the fake hypervisor (fake_hypervisor.py) and
a real SQLite ledger: a handmade domain is labelled and recorded once; check mode, a transient
domain and a domain with another instance's metadata change nothing; a ledger write that fails
after the domain was labelled gives the domain its metadata back. The same through real libvirt
and ansible-playbook: tests/integration/test_adopt.py."""

from __future__ import annotations

import pytest
from fake_hypervisor import FakeHypervisor, connect_to, domain_xml, synced_state

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ACTIVE, Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.adopt import Adopt
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

UUID = "5a2d6c1e-7b3f-4c8d-9e0a-1b2c3d4e5f60"
OTHER = "0f9e8d7c-6b5a-4938-8271-605f4e3d2c1b"
TINY = Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1)
ARGS = {"host": "hv1", "domain": "handmade", "name": None, "timeout": 30}


@pytest.fixture
def ledger(tmp_path):
    opened = Ledger(f"sqlite:///{tmp_path}/ledger.sqlite3").open()
    opened.sync_hypervisors([synced_state("hv1", "hv-1")])
    yield opened
    opened.close()


@pytest.fixture
def hv1():
    """hv1 with the domain ``handmade`` (1 vCPU, 96 MiB, a 1 GiB volume of the pool), running."""
    hv = FakeHypervisor("hv1")
    hv.add_volume("handmade.qcow2", capacity_mb=1024)
    hv.add_domain(domain_xml("handmade", UUID, disks=("handmade.qcow2",)))
    return hv


def adopt(ledger, hv, check_mode=False, flavor=None, **args):
    """Adopt through the fake, the host known to the ledger only (the inventory lists nothing)."""
    return Adopt({**ARGS, **args}, Settings(), flavor, ledger, {}, check_mode, connect=connect_to(hv)).run()


def test_a_handmade_domain_is_labelled_and_recorded_once(ledger, hv1):
    adopted = adopt(ledger, hv1)
    assert adopted["changed"] and adopted["msg"] == (
        "adopted domain handmade on hv1 as instance handmade (1 vCPUs, 96 MB, 1 GB, flavor adopted)")
    [row] = ledger.instances(["handmade"])
    assert (row["uuid"], row["host"], row["state"], row["flavor"]) == (UUID, "hv1", ACTIVE, "adopted")
    assert hv1.metadata(UUID) == {"uuid": UUID, "name": "handmade", "flavor": "adopted", "metadata": {}}
    assert adopted["domain"]["berth"]["instance_uuid"] == UUID
    # Reached at the URI of the ledger's last sync of hv1, and closed after.
    assert hv1.connections[0]["uri"] == "qemu+ssh://hv1/system" and not hv1.is_open
    again = adopt(ledger, hv1)
    assert not again["changed"] and again["msg"] == "handmade on hv1 is instance handmade already"


def test_check_mode_says_what_it_would_do_and_writes_nothing(ledger, hv1):
    before = hv1.snapshot()
    dry = adopt(ledger, hv1, check_mode=True)
    assert dry["changed"] and dry["msg"].startswith("would adopt domain handmade on hv1 as instance handmade")
    assert hv1.snapshot() == before and "set_berth_metadata" not in hv1.calls
    assert ledger.instances() == []


@pytest.mark.parametrize(("prepare", "why"), [
    (lambda hv: hv.domains[UUID].update(persistent=False), "domain handmade on hv1 is transient"),
    (lambda hv: hv.set_berth_metadata(UUID, {"uuid": OTHER, "name": "web-1", "flavor": "m1.tiny"}),
     f"domain handmade on hv1 carries Berth metadata of another instance \\({OTHER}\\)"),
], ids=["transient", "another-instances-metadata"])
def test_a_domain_that_is_not_berths_to_adopt_is_refused_and_nothing_changes(ledger, hv1, prepare, why):
    prepare(hv1)
    before = hv1.snapshot()
    with pytest.raises(InputError, match=why) as refused:
        adopt(ledger, hv1)
    assert refused.value.field == "domain"
    assert hv1.snapshot() == before and ledger.instances() == []


def test_a_flavor_that_is_not_what_the_domain_runs_with_is_refused(ledger, hv1):
    with pytest.raises(InputError, match="flavor m1.tiny has 1 vCPUs and 512 MB, but domain handmade has 1 vCPUs "
                                         "and 96 MB") as refused:
        adopt(ledger, hv1, flavor=TINY)
    assert refused.value.field == "flavor" and hv1.metadata(UUID) is None and ledger.instances() == []
    assert adopt(ledger, hv1, flavor=Flavor(name="small", vcpus=1, memory_mb=96, root_gb=1))["instance"]["flavor"] == "small"


@pytest.mark.parametrize("marked", [None, {"uuid": UUID, "name": "old", "flavor": "adopted", "metadata": {"team": "a"}}],
                         ids=["unlabelled", "labelled-with-another-name"])
def test_a_failed_ledger_write_gives_the_domain_its_metadata_back(ledger, hv1, marked):
    if marked is not None:
        hv1.set_berth_metadata(UUID, marked)
    # Once the domain is labelled, another run takes the name in the ledger: the adoption's own
    # write is refused, after its dry run had passed.
    hv1.after["set_berth_metadata"] = lambda: ledger.claim(
        [{"name": "web", "host": "hv1", "hypervisor_uuid": "hv-1"}], TINY, "another-run")
    with pytest.raises(InputError, match="name web is already instance"):
        adopt(ledger, hv1, name="web")
    assert hv1.calls.count("set_berth_metadata") == (3 if marked else 2)  # labelled, then put back
    assert hv1.metadata(UUID) == marked
    assert not any(row["uuid"] == UUID for row in ledger.instances())
