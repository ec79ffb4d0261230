"""The tracker sync operation (operations/sync.py) over libvirt test-driver hypervisors opened in
this process, into SQLite and PostgreSQL ledgers."""

from __future__ import annotations

import threading

import pytest
from fake_hypervisor import FakeHypervisor, connect_to, domain_xml
from sqlalchemy import select

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils._rebalance_plan import imbalance
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import hypervisor_facts, hypervisors
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.sync import (
    Sync,
    SyncRequest,
    Target,
    imbalance_line,
)

# The operator's policy of a fleet of test-driver node files (labs only).
NODE_FILES = UriPolicy(allow_test_files=True)
SETTINGS = {"storage_pool": "default", "settings": {}, "aggregates": [], "availability_zone": "nova",
            "keepalive_interval": 5, "keepalive_count": 3}


def node(number: int) -> str:
    """A test-driver hypervisor with 2 x ``number`` CPUs and one domain Berth did not make."""
    return (f"<node><cpu><mhz>2400</mhz><model>Haswell</model><active>{2 * number}</active><max>{2 * number}</max>"
            f"<nodes>1</nodes><sockets>1</sockets><cores>{number}</cores><threads>2</threads></cpu>"
            f"<memory>{8 * 1024 * 1024}</memory>"
            "<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>"
            f"<name>orphan{number}</name><uuid>00000000-0000-0000-0000-{number:012d}</uuid>"
            "<memory unit='MiB'>512</memory><vcpu>1</vcpu><os><type>hvm</type></os>"
            "<test:runstate>1</test:runstate></domain>"
            "<pool type='dir'><name>default</name><target><path>/p</path></target></pool></node>")


@pytest.fixture
def fleet(tmp_path):
    """Targets of seven test-driver hypervisors, as gather.yml builds them from the inventory."""
    targets = []
    for number in range(1, 8):
        path = tmp_path / f"hv{number}.xml"
        path.write_text(node(number))
        variables = {"berth_libvirt_uri": f"test://{path}", "berth_hypervisor": {**SETTINGS, "timeout": 5.0}}
        targets.append(Target.from_hostvars(f"hv{number}", variables, NODE_FILES))
    return tuple(targets)


def test_a_sync_writes_every_host_in_batches_and_a_steady_one_moves_only_their_sync_time(ledger, fleet, writes_of):
    request = SyncRequest(uri_policy=NODE_FILES, targets=fleet, workers=2, batch_size=3)
    first = Sync(request, ledger).run()
    assert first["changed"] and first["summary"]["changed"] == 7 and first["summary"]["down"] == 0
    generations = {row["host"]: row["generation"] for row in ledger.hypervisors()}
    assert sorted(generations) == sorted(target.host for target in fleet)
    assert {row["host"]: row["inventories"]["VCPU"]["total"] for row in ledger.hypervisors()} == {
        f"hv{number}": 2 * number for number in range(1, 8)}
    # Every host's own lines are in the result; the play's summary lists those with findings.
    assert sorted(first["findings"]) == sorted(generations)
    assert all("orphans: orphan" in lines[0] for lines in first["findings"].values())
    # The summary line first, after a line naming the SQLite ledger this first sync created.
    created = [f"created a new ledger: {first['ledger_created']}"] if first["ledger_created"] else []
    assert first["drift"][:len(created)] == created
    assert first["drift"][len(created)].startswith("synced 7 hypervisor(s) in ")
    # Then the fleet's imbalance figure, as the rebalancer reads it from the ledger.
    figure = first["summary"]["imbalance"]
    assert figure == round(imbalance(ledger.host_table()[0]), 4) and figure > 0
    assert first["drift"][len(created) + 1] == imbalance_line(figure)

    written = writes_of(ledger)
    steady = Sync(request, ledger).run()
    assert not steady["changed"] and steady["summary"]["changed"] == 0
    assert {row["host"]: row["generation"] for row in ledger.hypervisors()} == generations
    # Three batches: each moves its hosts' sync time in one statement, and writes nothing else.
    assert len(written) == 3 and all(sql.startswith("UPDATE hypervisors SET synced_at=") for sql in written), written


def test_a_sync_reads_each_hypervisor_through_the_driver_it_is_given(ledger):
    hv = FakeHypervisor("hv1", vcpus_total=6)
    hv.add_domain(domain_xml("handmade", "00000000-0000-4000-8000-00000000000a"))
    uri = "qemu+ssh://192.0.2.1/system"
    target = Target.from_hostvars("hv1", {"berth_libvirt_uri": uri, "berth_hypervisor": {**SETTINGS, "timeout": 5.0}})
    result = Sync(SyncRequest(targets=(target,)), ledger, connect_to(hv)).run()
    assert result["summary"]["down"] == 0 and result["findings"]["hv1"][0].startswith("hv1: ")
    assert "orphans: handmade" in result["findings"]["hv1"][0]
    [row] = ledger.hypervisors()
    assert (row["host"], row["uri"], row["inventories"]["VCPU"]["total"]) == ("hv1", uri, 6)
    # Opened once, with the target's settings, for the reader that bounds the whole session itself.
    [opened] = hv.connections
    assert (opened["uri"], opened["timeout_s"], opened["bounded_by_caller"]) == (uri, 5.0, True) and not hv.is_open


def test_check_mode_works_it_out_and_writes_nothing(ledger, fleet):
    dry = Sync(SyncRequest(uri_policy=NODE_FILES, targets=fleet, dry_run=True), ledger).run()
    assert dry["changed"] and dry["summary"]["changed"] == 7
    assert ledger.hypervisors() == []


class ManualClock:
    """The sync's clock, moved only by the test (``advance``). A wait on it is a moment of real
    time whatever its timeout, after which the reader looks at this clock again: a deadline
    passes when the test moves the clock past it, never because the machine was slow."""

    def __init__(self) -> None:
        self.now_s = 0.0

    def now(self) -> float:
        return self.now_s

    def wait(self, condition: threading.Condition, timeout_s: float | None) -> None:
        condition.wait(0.005)

    def advance(self, seconds: float) -> None:
        self.now_s += seconds


class Slow:
    """A session that takes ``seconds`` of the sync's clock to open, then is ``inner``'s, or,
    without one, never answers until ``release`` is set."""

    def __init__(self, clock: ManualClock, seconds: float, inner=None, release: threading.Event | None = None) -> None:
        self.clock, self.seconds, self.inner, self.release = clock, seconds, inner, release

    def __enter__(self):
        self.clock.advance(self.seconds)
        if self.inner is not None:
            return self.inner.__enter__()
        self.release.wait(60)
        raise AssertionError("a hung hypervisor's session was waited for")

    def __exit__(self, *exc):
        return self.inner.__exit__(*exc) if self.inner is not None else False


def slow_first(fleet, clock, seconds, release=None):
    """``fleet`` with hv1's timeout 0.5 s (its deadline 1 s), and a connect whose hv1 session
    takes ``seconds`` of ``clock`` to open (and hangs, without ``release`` set); the others are
    the test driver's. Also the (host, timeout_s, bounded_by_caller) of each connection."""
    first = Target(**{**fleet[0].__dict__, "timeout_s": 0.5})
    opened = []

    def connect(host, uri, timeout_s, **connection):
        opened.append((host, timeout_s, connection["bounded_by_caller"]))
        real = Hypervisor(host, uri, timeout_s, **connection)
        return Slow(clock, seconds, None if release else real, release) if host == first.host else real

    return (first, *fleet[1:]), connect, opened


def test_a_hypervisor_that_does_not_answer_is_down_at_its_deadline_and_holds_up_no_one(ledger, fleet):
    clock, release = ManualClock(), threading.Event()
    targets, connect, opened = slow_first(fleet, clock, 1.0, release)
    try:
        # One worker: the hung hypervisor's thread is given up and another reads the rest.
        result = Sync(SyncRequest(uri_policy=NODE_FILES, targets=targets, workers=1, batch_size=2,
                                  service_down_time_s=2), ledger, connect, clock=clock).run()
        # The sync is over while hv1's session still hangs: nobody waited for it.
        assert not release.is_set()
    finally:
        release.set()
    assert result["findings"]["hv1"] == ["hv1: did not answer (hv1: no answer within 1 s); its claims are kept"]
    assert result["summary"]["down"] == 1
    assert sorted(row["host"] for row in ledger.hypervisors()) == [f"hv{number}" for number in range(2, 8)]
    # Its connection was given its timeout, bounded by the sync (which gives it up at twice that).
    assert opened[0] == ("hv1", 0.5, True)
    # On the sync's clock it took exactly hv1's deadline, half of service_down_time: the sync
    # says the fleet goes stale at this pace.
    assert result["summary"]["duration_s"] == 1.0
    [warning] = result["warnings"]
    assert "this sync took 1 s, 50% of service_down_time (2 s)" in warning


def test_a_hypervisor_that_answers_just_within_its_deadline_is_synced(ledger, fleet):
    clock = ManualClock()
    targets, connect, _opened = slow_first(fleet, clock, 0.99)
    result = Sync(SyncRequest(uri_policy=NODE_FILES, targets=targets, workers=1, batch_size=2,
                              service_down_time_s=600), ledger, connect, clock=clock).run()
    assert result["summary"]["down"] == 0 and result["warnings"] == []
    assert sorted(row["host"] for row in ledger.hypervisors()) == [f"hv{number}" for number in range(1, 8)]
    assert result["summary"]["duration_s"] == 0.99


def test_a_hypervisor_the_ledger_knows_is_marked_down_with_the_reason(ledger, fleet, tmp_path):
    Sync(SyncRequest(uri_policy=NODE_FILES, targets=fleet), ledger).run()
    gone = Target(**{**fleet[2].__dict__, "uri": f"test://{tmp_path}/nowhere.xml"})
    result = Sync(SyncRequest(uri_policy=NODE_FILES, targets=(gone,)), ledger).run()
    [down] = result["report"]["down"]
    assert (down["host"], down["changed"]) == ("hv3", True)
    [row] = [row for row in ledger.hypervisors() if row["host"] == "hv3"]
    assert row["sync_status"] == "down" and "nowhere.xml" in row["down_reason"]


@pytest.mark.parametrize("field, value, option", [("workers", 0, "workers"), ("batch_size", -1, "batch_size"),
                                                  ("service_down_time_s", True, "service_down_time")],
                         ids=["no-workers", "negative-batch", "bool"])
def test_a_request_names_the_option_it_refuses(fleet, field, value, option):
    with pytest.raises(InputError) as refused:
        SyncRequest(uri_policy=NODE_FILES, targets=fleet, **{field: value})
    assert refused.value.field == option


def test_a_host_listed_twice_or_without_the_inventory_s_variables_is_refused(fleet):
    with pytest.raises(InputError, match="listed twice: hv1"):
        SyncRequest(uri_policy=NODE_FILES, targets=(fleet[0], fleet[0]))
    with pytest.raises(InputError, match="does not come from a berth.fleet.hypervisors inventory source"):
        Target.from_hostvars("web1", {"ansible_host": "web1"})


def test_hooks_are_accepted(ledger, fleet):
    assert Sync(SyncRequest(uri_policy=NODE_FILES, targets=fleet[:1]), ledger, hooks=object()).run()["summary"]["hypervisors"] == 1


def test_a_host_reporting_another_hosts_uuid_is_reported_as_an_identity_conflict(ledger, fleet):
    Sync(SyncRequest(uri_policy=NODE_FILES, targets=fleet[:2]), ledger).run()
    owner = {row["host"]: row["uuid"] for row in ledger.hypervisors()}["hv1"]
    # hv2 answers with hv1's UUID, as a copied SMBIOS would make it.
    copied = Target(**{**fleet[1].__dict__})
    impostor = Sync(SyncRequest(uri_policy=NODE_FILES, targets=(copied,)), ledger,
                    connect=lambda *args, **connection: _reporting(Hypervisor(*args, **connection), owner)).run()
    [line] = impostor["findings"]["hv2"]
    assert line.startswith(f"hv2: IDENTITY CONFLICT: identity conflict: hv2 reports host UUID {owner}")
    assert [(c["host"], c["owner"]) for c in impostor["report"]["identity_conflicts"]] == [("hv2", "hv1")]
    assert impostor["summary"]["down"] == 1


class _reporting:
    """A session whose host reports ``uuid`` (the test driver's node files report none)."""

    def __init__(self, session, uuid):
        self.session, self.uuid = session, uuid

    def __enter__(self):
        hv = self.session.__enter__()
        facts = hv.facts
        hv.facts = lambda pool: {**facts(pool), "uuid": self.uuid}
        return hv

    def __exit__(self, *exc):
        return self.session.__exit__(*exc)


def test_numa_cpu_sets_and_pci_devices_land_in_the_ledger(ledger, tmp_path):
    """Issue 24's facts, as libvirt's test driver presents them, in the hypervisor's facts row."""
    devices = tmp_path / "devices.xml"
    devices.write_text(node(2).replace("</node>", (
        "<device><name>pci_0000_3b_02_0</name><parent>computer</parent><capability type='pci'>"
        "<domain>0</domain><bus>59</bus><slot>2</slot><function>0</function>"
        "<product id='0x154c'>VF</product><vendor id='0x8086'>Intel</vendor>"
        "<capability type='phys_function'><address domain='0x0000' bus='0x3b' slot='0x00' function='0x0'/>"
        "</capability><numa node='0'/></capability></device></node>")))
    numa_settings = {**SETTINGS, "storage_pool": "default-pool", "timeout": 5.0,
                     "settings": {"cpu_dedicated_set": "4-15", "cpu_shared_set": "0-3"}}
    targets = (
        Target.from_hostvars("numa", {"berth_libvirt_uri": "test:///default", "berth_hypervisor": numa_settings},
                             NODE_FILES),
        Target.from_hostvars("devices", {"berth_libvirt_uri": f"test://{devices}",
                                         "berth_hypervisor": {**SETTINGS, "timeout": 5.0}}, NODE_FILES),
    )
    report = Sync(SyncRequest(uri_policy=NODE_FILES, targets=targets), ledger).run()
    assert report["summary"]["down"] == 0
    with ledger.engine.connect() as db:
        rows = {row.name: row for row in db.execute(
            select(hypervisors.c.name, hypervisor_facts.c.numa_topology, hypervisor_facts.c.free_pages,
                   hypervisor_facts.c.pci_devices)
            .join(hypervisor_facts, hypervisor_facts.c.hypervisor_uuid == hypervisors.c.uuid))}
    numa = rows["numa"].numa_topology
    assert [cell["cpus"] for cell in numa["cells"]] == [list(range(8)), list(range(8, 16))]
    # The ledger keeps free page counts apart (free_pages); the test driver counts none.
    assert numa["cells"][0]["pages"][0] == {"size_kb": 4, "total": 524288}
    assert rows["numa"].free_pages is None
    assert numa["cells"][0]["cpu_topology"][1] == {"id": 1, "socket_id": 0, "die_id": 0, "core_id": 1,
                                                   "siblings": [1]}
    assert (numa["cpu_dedicated_set"], numa["cpu_shared_set"]) == (list(range(4, 16)), [0, 1, 2, 3])
    assert rows["numa"].pci_devices == []
    assert rows["devices"].pci_devices == [
        {"name": "pci_0000_3b_02_0", "address": "0000:3b:02.0", "vendor_id": "8086", "product_id": "154c",
         "numa_node": 0, "dev_type": "type-VF", "mdev_types": [], "parent_address": "0000:3b:00.0"}]
    assert rows["devices"].numa_topology == {"cells": [], "cpu_dedicated_set": None, "cpu_shared_set": None}


def test_a_cpu_set_the_host_cannot_have_puts_that_host_down_naming_the_setting(ledger, fleet):
    settings = {**SETTINGS, "storage_pool": "default-pool", "timeout": 5.0, "settings": {"cpu_dedicated_set": "0-99"}}
    wrong = Target.from_hostvars("numa", {"berth_libvirt_uri": "test:///default", "berth_hypervisor": settings},
                                 NODE_FILES)
    report = Sync(SyncRequest(uri_policy=NODE_FILES, targets=(*fleet[:2], wrong)), ledger).run()
    assert report["summary"]["down"] == 1 and report["summary"]["hypervisors"] == 3
    assert "hypervisors.numa.cpu_dedicated_set: numa has no CPU 16-99 (its CPUs: 0-15)" in report["findings"]["numa"][0]
    assert sorted(row["host"] for row in ledger.hypervisors()) == ["hv1", "hv2"]
