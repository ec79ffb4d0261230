"""The volume operation (operations/volume.py) through fake hypervisors (fake_hypervisor.py) and a
real SQLite ledger: a data volume is claimed against its hypervisor's disk as it is made, attached
to a running instance (its definition and the guest at once), detached and deleted; bad input is
refused naming the field with nothing changed; a failure leaves no volume, claim or attachment;
every second run changes nothing; a migration carries the attached volume and its claim. The same
through real libvirt and ansible-playbook: tests/integration/test_volumes.py."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from fake_hypervisor import POOL, POOL_PATH, FakeHypervisor, connect_to, synced_state
from test_rebuild_operation import DieAt, Killed

from ansible_collections.berth.fleet.plugins.module_utils._guest import Guest
from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import Built, Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import data_volume_name, root_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import (
    AFTER_VOLUME_ATTACH_RECORD,
    AFTER_VOLUME_RECORD,
    AFTER_VOLUME_REMOVE,
    AFTER_VOLUME_UNPLUG,
    NO_HOOKS,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import DEFAULT_TEMPLATE, DomainTemplate
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.migrate import Migrate
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.volume import Volume
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

TINY = Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1)
FILE = data_volume_name("data-1")


class Fleet:
    """hv1 and hv2 (100 GB of disk each) in a SQLite ledger; web-1 ACTIVE on hv1 and web-2 on hv2,
    each launched with a request and a build record, its domain defined as Berth defines it and
    running."""

    def __init__(self, tmp_path, ledger_url=None):
        self.ledger = (Ledger(ledger_url).open(create=True) if ledger_url
                       else Ledger(f"sqlite:///{tmp_path}/ledger.sqlite3").open())
        self.ledger.sync_hypervisors([synced_state("hv1", "hv-1"), synced_state("hv2", "hv-2")])
        self.hvs = {"hv1": FakeHypervisor("hv1"), "hv2": FakeHypervisor("hv2")}
        self.uuids = {name: self._launch(name, host) for name, host in (("web-1", "hv1"), ("web-2", "hv2"))}

    def _launch(self, name, host):
        request = Request(flavor=TINY, domain_type="qemu")
        [row] = self.ledger.claim([{"name": name, "host": host, "hypervisor_uuid": f"hv-{host[-1]}"}], TINY,
                                  "launch", request=request.to_record())
        uuid = row["uuid"]
        self.ledger.mark_active(uuid, Built(seed=False).to_record())
        hv = self.hvs[host]
        hv.add_volume(root_volume_name(uuid), capacity_mb=1024, data=b"the guest's disk")
        made = {"disk": {"path": f"{POOL_PATH}/{root_volume_name(uuid)}"}, "seed": None, "nvram": None}
        hv.add_domain(DomainTemplate(DEFAULT_TEMPLATE).render(request, name, uuid, made, "qemu",
                                                              Settings().serial_log_dir))
        return uuid

    def volume(self, state="present", check_mode=False, hooks=NO_HOOKS, settings=None, **args):
        options = {"name": "data-1", "state": state, "size_gb": None, "host": None, "instance": None,
                   "timeout": 30, **args}
        return Volume(options, settings or Settings(), self.ledger, check_mode,
                      connect=connect_to(*self.hvs.values()), hooks=hooks).run()

    def used_disk_mb(self, host):
        hv = next(item for item in self.ledger.hypervisors() if item["host"] == host)
        return hv["inventories"]["DISK_MB"]["total"] - hv["usage"]["free_disk_mb"]

    def disks(self, host, instance):
        """The instance's disks in its definition on ``host``: {target: source file}."""
        root = ET.fromstring(self.hvs[host].domain_xml(self.uuids[instance]))
        return {disk.find("target").get("dev"): disk.find("source").get("file")
                for disk in root.findall("devices/disk")}

    def state(self):
        """What a refused or failed run must leave as it was."""
        return ({host: hv.snapshot() for host, hv in self.hvs.items()}, self.ledger.volumes(),
                self.used_disk_mb("hv1"), self.used_disk_mb("hv2"))


@pytest.fixture
def fleet(tmp_path):
    made = Fleet(tmp_path)
    yield made
    made.ledger.close()


def test_create_claims_the_disk_and_a_second_run_changes_nothing(fleet):
    before = fleet.state()
    dry = fleet.volume(size_gb=10, host="hv1", check_mode=True)
    assert dry["changed"] and dry["msg"] == "would create volume data-1 (10 GB) in storage pool default on hv1"
    assert fleet.state() == before
    made = fleet.volume(size_gb=10, host="hv1")
    assert made["changed"] and made["volume"]["host"] == "hv1" and made["volume"]["size_gb"] == 10
    assert fleet.hvs["hv1"].volume(POOL, FILE)["capacity_mb"] == 10 * 1024
    # Its claim: the host's used disk is the instance's 1 GB and the volume's 10.
    assert fleet.used_disk_mb("hv1") == 11 * 1024 and fleet.used_disk_mb("hv2") == 1024
    again = fleet.volume(size_gb=10, host="hv1")
    assert not again["changed"] and again["msg"] == "volume data-1 exists"
    assert fleet.used_disk_mb("hv1") == 11 * 1024


@pytest.mark.parametrize(("args", "field", "message"), [
    ({"size_gb": 0}, "size_gb", "size_gb"),
    ({"size_gb": 10 * 1024 * 1024 * 1024}, "size_gb", "size_gb: 10737418240 is over the limit of 16384 GiB"),
    ({"name": "Data_1"}, "name", "name must be a DNS label"),
    ({"host": None}, "host", "host (the hypervisor whose storage pool holds the volume) is required"),
    ({"host": "hv9"}, "host", "no hypervisor 'hv9' in the ledger"),
], ids=["size-0", "size-10PiB", "not-a-dns-label", "no-host", "unknown-host"])
def test_bad_input_to_create_is_refused_naming_the_field(fleet, args, field, message):
    before = fleet.state()
    with pytest.raises(InputError, match=re.escape(message)) as refused:
        fleet.volume(**{"size_gb": 10, "host": "hv1", **args})
    assert refused.value.field == field
    assert fleet.state() == before


def test_a_volume_larger_than_the_room_left_is_refused(fleet):
    before = fleet.state()
    with pytest.raises(BerthError, match="cannot create volume data-1 of 100 GB on hv1: no room for 100 GB"):
        fleet.volume(size_gb=100, host="hv1")
    assert fleet.state() == before


def test_a_volume_libvirt_cannot_make_leaves_no_record_and_no_claim(fleet):
    fleet.hvs["hv1"].faults["create_volume"] = HypervisorError("hv1", "internal error: no space")
    before = fleet.state()
    with pytest.raises(HypervisorError, match="no space"):
        fleet.volume(size_gb=10, host="hv1")
    assert fleet.state() == before and fleet.ledger.volumes() == []


def test_a_volume_made_whose_answer_is_lost_is_removed_with_its_record(fleet):
    hv1 = fleet.hvs["hv1"]

    def lost():
        raise HypervisorError("hv1", "timed out")
    hv1.after["create_volume"] = lost
    before = fleet.state()
    with pytest.raises(HypervisorError, match="timed out"):
        fleet.volume(size_gb=10, host="hv1")
    assert fleet.state() == before and FILE not in hv1.volume_names_of()


def test_a_volume_that_may_be_there_keeps_its_record_and_claim_until_it_is_surely_gone(fleet):
    hv1 = fleet.hvs["hv1"]

    def lost():
        raise HypervisorError("hv1", "timed out")
    hv1.after["create_volume"] = lost
    hv1.faults["delete_volume"] = HypervisorError("hv1", "connection lost")
    with pytest.raises(HypervisorError, match="connection lost"):
        fleet.volume(size_gb=10, host="hv1")
    # The file is there and the ledger says so: its row, its claim; state=absent removes both.
    assert FILE in hv1.volume_names_of() and [v["name"] for v in fleet.ledger.volumes()] == ["data-1"]
    assert fleet.used_disk_mb("hv1") == 1024 + 10 * 1024
    del hv1.faults["delete_volume"]
    assert fleet.volume("absent")["changed"]
    assert FILE not in hv1.volume_names_of() and fleet.ledger.volumes() == []


def test_an_unrecorded_volume_file_of_that_name_is_adopted_if_it_is_what_create_makes_else_refused(fleet):
    hv1 = fleet.hvs["hv1"]
    hv1.add_volume(FILE, capacity_mb=3 * 1024)
    before = fleet.state()
    with pytest.raises(InputError) as raised:
        fleet.volume(size_gb=2, host="hv1")
    assert raised.value.field == "name" and "that no ledger recorded (qcow2, 3072 MB)" in str(raised.value)
    assert fleet.state() == before and fleet.ledger.volumes() == []
    adopted = fleet.volume(size_gb=3, host="hv1")
    assert adopted["changed"] and adopted["msg"] == ("adopted volume data-1 (3 GB) found in storage pool default "
                                                     "on hv1, which no ledger recorded")
    assert [v["name"] for v in fleet.ledger.volumes()] == ["data-1"] and fleet.used_disk_mb("hv1") == 1024 + 3 * 1024
    assert not fleet.volume(size_gb=3, host="hv1")["changed"]


def test_another_volume_of_that_name_is_refused(fleet):
    fleet.volume(size_gb=10, host="hv1")
    with pytest.raises(InputError, match="volume data-1 exists already, 10 GB in storage pool default on hv1"):
        fleet.volume(size_gb=20, host="hv1")


def test_attach_hot_plugs_into_the_running_guest_and_its_definition(fleet):
    fleet.volume(size_gb=10, host="hv1")
    dry = fleet.volume("attached", instance="web-1", check_mode=True)
    assert dry["changed"] and dry["msg"] == "would attach volume data-1 to web-1 as vde"
    assert "attach_disk" not in fleet.hvs["hv1"].calls and fleet.ledger.volumes()[0]["instance"] is None
    done = fleet.volume("attached", instance="web-1")
    assert done["changed"] and done["msg"] == "attached volume data-1 to web-1 as vde (hot-plugged)"
    assert fleet.disks("hv1", "web-1")["vde"] == f"{POOL_PATH}/{FILE}"
    [volume] = fleet.ledger.volumes(instance_uuid=fleet.uuids["web-1"])
    assert (volume["instance"], volume["target"]) == ("web-1", "vde")
    calls = len(fleet.hvs["hv1"].calls)
    again = fleet.volume("attached", instance="web-1")
    assert not again["changed"] and "attach_disk" not in fleet.hvs["hv1"].calls[calls:]


def test_attach_refusals_name_the_field_and_change_nothing(fleet):
    fleet.volume(size_gb=10, host="hv1")
    fleet.volume("attached", instance="web-1")
    before = fleet.state()
    with pytest.raises(InputError, match="volume data-1 is attached to web-1 already") as twice:
        fleet.volume("attached", instance="web-2")
    assert twice.value.field == "name"
    with pytest.raises(InputError, match="no instance named web-9") as unknown:
        fleet.volume("attached", name="data-1", instance="web-9")
    assert unknown.value.field == "instance"
    with pytest.raises(InputError, match="volume data-1 is attached to web-1: detach it first"):
        fleet.volume("absent")
    assert fleet.state() == before


def test_a_volume_of_another_host_is_refused_naming_both(fleet):
    fleet.volume(size_gb=10, host="hv1")
    before = fleet.state()
    with pytest.raises(InputError, match="volume data-1 is on hv1 and instance web-2 runs on hv2") as refused:
        fleet.volume("attached", instance="web-2")
    assert refused.value.field == "instance" and fleet.state() == before


def test_an_attach_libvirt_refuses_leaves_no_attachment(fleet):
    fleet.volume(size_gb=10, host="hv1")
    fleet.hvs["hv1"].faults["attach_disk"] = HypervisorError("hv1", "internal error: unable to execute QEMU command")
    before = fleet.state()
    with pytest.raises(HypervisorError, match="unable to execute QEMU command"):
        fleet.volume("attached", instance="web-1")
    assert fleet.state() == before and fleet.ledger.volumes()[0]["instance_uuid"] is None


def test_detach_then_delete_gives_the_disk_back(fleet):
    fleet.volume(size_gb=10, host="hv1")
    fleet.volume("attached", instance="web-1")
    done = fleet.volume("detached")
    assert done["changed"] and done["msg"] == "detached volume data-1 from web-1 (unplugged from the running guest)"
    assert "vde" not in fleet.disks("hv1", "web-1") and fleet.ledger.volumes()[0]["instance"] is None
    assert not fleet.volume("detached")["changed"]
    assert fleet.used_disk_mb("hv1") == 11 * 1024  # detached, still claimed
    gone = fleet.volume("absent")
    assert gone["changed"] and FILE not in fleet.hvs["hv1"].volume_names_of()
    assert fleet.ledger.volumes() == [] and fleet.used_disk_mb("hv1") == 1024
    assert not fleet.volume("absent")["changed"]


@pytest.mark.parametrize("mode", ["cold", "live"])
def test_a_migration_carries_the_attached_volume_and_its_claim(fleet, mode):
    fleet.volume(size_gb=10, host="hv1")
    fleet.volume("attached", instance="web-1")
    fleet.hvs["hv1"].pools[POOL]["volumes"][FILE]["data"] = b"written before the move"
    moved = Migrate({"name": "web-1", "mode": mode, "to_host": "hv2", "carry_definition": False, "template": None,
                     "timeout": 30}, Settings(), fleet.ledger, {}, False,
                    connect=connect_to(*fleet.hvs.values())).run()
    assert (moved["to_host"], moved["mode"]) == ("hv2", mode)
    assert fleet.disks("hv2", "web-1")["vde"] == f"{POOL_PATH}/{FILE}"
    assert FILE in fleet.hvs["hv2"].volume_names_of() and FILE not in fleet.hvs["hv1"].volume_names_of()
    if mode == "cold":
        assert fleet.hvs["hv2"].pools[POOL]["volumes"][FILE]["data"] == b"written before the move"
    [volume] = fleet.ledger.volumes()
    assert (volume["host"], volume["instance"], volume["target"]) == ("hv2", "web-1", "vde")
    assert fleet.used_disk_mb("hv1") == 0 and fleet.used_disk_mb("hv2") == 2 * 1024 + 10 * 1024


def test_a_move_to_a_host_without_room_for_the_attached_volume_is_refused(fleet):
    fleet.volume(size_gb=60, host="hv1")
    fleet.volume("attached", instance="web-1")
    fleet.volume(name="data-2", size_gb=60, host="hv2")
    before = fleet.state()
    with pytest.raises(BerthError, match="cannot claim hv2 for web-1: no room for its disks and its attached volumes "
                                         r"\(62464 MB\)"):
        Migrate({"name": "web-1", "mode": "cold", "to_host": "hv2", "carry_definition": False, "template": None,
                 "timeout": 30}, Settings(), fleet.ledger, {}, False, connect=connect_to(*fleet.hvs.values())).run()
    assert fleet.state() == before and fleet.ledger.volumes(name="data-1")[0]["host"] == "hv1"


def test_the_scheduler_asks_a_destination_for_room_for_the_attached_volumes_too(fleet):
    # Without to_host the scheduler chooses: hv2 has room for web-1's 1 GB root disk, not for it
    # and its 60 GB volume, and DiskFilter says so before any claim is tried.
    fleet.volume(size_gb=60, host="hv1")
    fleet.volume("attached", instance="web-1")
    fleet.volume(name="data-2", size_gb=60, host="hv2")
    before = fleet.state()
    with pytest.raises(BerthError, match=r"cannot migrate web-1: no valid host: .*hv2: insufficient disk: "
                                         r"needs 62464 MB, free 39936 MB"):
        Migrate({"name": "web-1", "mode": "cold", "to_host": None, "carry_definition": False, "template": None,
                 "timeout": 30}, Settings(), fleet.ledger, {}, False, connect=connect_to(*fleet.hvs.values())).run()
    assert fleet.state() == before


def test_an_ide_guest_takes_no_volume(fleet):
    request = Request(flavor=TINY, domain_type="qemu", guest=Guest.from_options({"disk_bus": "ide"}))
    [row] = fleet.ledger.claim([{"name": "ide-1", "host": "hv1", "hypervisor_uuid": "hv-1"}], TINY, "launch",
                               request=request.to_record())
    fleet.ledger.mark_active(row["uuid"], Built(seed=False).to_record())
    fleet.volume(size_gb=1, host="hv1")
    before = fleet.state()
    with pytest.raises(InputError, match="ide-1's disks are on the ide bus, which has no device left") as refused:
        fleet.volume("attached", instance="ide-1")
    assert refused.value.field == "instance" and fleet.state() == before


def test_deleting_the_instance_detaches_its_volume_which_stays_claimed(fleet):
    fleet.volume(size_gb=10, host="hv1")
    fleet.volume("attached", instance="web-1")
    assert fleet.ledger.delete_instance(fleet.uuids["web-1"])
    [volume] = fleet.ledger.volumes()
    assert (volume["instance"], volume["target"], volume["host"]) == (None, None, "hv1")
    assert fleet.used_disk_mb("hv1") == 10 * 1024


def test_a_stopped_instance_gets_the_volume_in_its_definition_only(fleet):
    fleet.volume(size_gb=10, host="hv1")
    fleet.hvs["hv1"].stop(fleet.uuids["web-1"])
    done = fleet.volume("attached", instance="web-1")
    assert done["msg"] == "attached volume data-1 to web-1 as vde"
    assert fleet.disks("hv1", "web-1")["vde"] == f"{POOL_PATH}/{FILE}"
    assert fleet.volume("detached")["msg"] == "detached volume data-1 from web-1"


# Each step a run may die at, with the volume's state before the run: the ledger then holds at
# least what is on the host, and the same run again finishes it. (The lab does it with SIGKILL:
# tests/integration/test_disk_verbs_torture.py.)
KILLS = [
    (AFTER_VOLUME_RECORD, "absent", {"state": "present", "size_gb": 2, "host": "hv1"}),
    (AFTER_VOLUME_ATTACH_RECORD, "detached", {"state": "attached", "instance": "web-1"}),
    (AFTER_VOLUME_UNPLUG, "attached", {"state": "detached"}),
    (AFTER_VOLUME_REMOVE, "detached", {"state": "absent"}),
]


@pytest.mark.parametrize("point, before, args", KILLS, ids=[kill[0] for kill in KILLS])
def test_a_run_that_dies_between_the_ledger_and_the_host_is_finished_by_the_same_run_again(
        fleet, point, before, args):
    if before != "absent":
        fleet.volume("present", size_gb=2, host="hv1")
    if before == "attached":
        fleet.volume("attached", instance="web-1")
    with pytest.raises(Killed):
        fleet.volume(hooks=DieAt(point), **args)
    [row] = fleet.ledger.volumes()
    on_host = FILE in fleet.hvs["hv1"].volume_names_of()
    plugged = any(source.endswith(FILE) for source in fleet.disks("hv1", "web-1").values())
    # Never less in the ledger than on the host: its row (its claim) while the file may be there,
    # the attachment while the disk may be plugged.
    assert (on_host, plugged, row["instance_uuid"] is not None) == {
        AFTER_VOLUME_RECORD: (False, False, False), AFTER_VOLUME_ATTACH_RECORD: (True, False, True),
        AFTER_VOLUME_UNPLUG: (True, False, True), AFTER_VOLUME_REMOVE: (False, False, False)}[point]
    assert fleet.used_disk_mb("hv1") == 1024 + 2 * 1024
    done = fleet.volume(**args)
    assert done["changed"]
    volumes = fleet.ledger.volumes()
    plugged = any(source.endswith(FILE) for source in fleet.disks("hv1", "web-1").values())
    if point == AFTER_VOLUME_REMOVE:
        assert volumes == [] and FILE not in fleet.hvs["hv1"].volume_names_of()
        assert fleet.used_disk_mb("hv1") == 1024
    else:
        assert FILE in fleet.hvs["hv1"].volume_names_of()
        assert plugged == (volumes[0]["instance_uuid"] is not None) == (point == AFTER_VOLUME_ATTACH_RECORD)


# A pool both fake hosts see: the same dict of volumes behind the same path, as an NFS mount.
SHARED, SHARED_PATH = "nfs", "/mnt/nfs"
SHARING = Settings(shared_pools=(SHARED,))


def cache_of(fleet, host, instance, target):
    """The host cache mode of the instance's disk on ``target`` in its definition on ``host``."""
    root = ET.fromstring(fleet.hvs[host].domain_xml(fleet.uuids[instance]))
    [disk] = [disk for disk in root.findall("devices/disk") if disk.find("target").get("dev") == target]
    return disk.find("driver").get("cache")


def share_a_pool(fleet):
    volumes = {}
    for hv in fleet.hvs.values():
        hv.pools[SHARED] = {"path": SHARED_PATH, "volumes": volumes}


def test_a_pool_neither_the_storage_pool_nor_shared_is_refused_naming_pool(fleet):
    share_a_pool(fleet)
    before = fleet.state()
    with pytest.raises(InputError, match=re.escape("pool 'nfs' is neither the storage pool nor one of "
                                                   "berth_shared_pools (allowed: default)")) as refused:
        fleet.volume(size_gb=10, host="hv1", pool=SHARED)
    assert refused.value.field == "pool" and fleet.state() == before


@pytest.fixture
def fleet_on_each_database(tmp_path, ledger_url):
    """The fleet on SQLite and on PostgreSQL: the claims' sums and re-checks are SQL of their own."""
    made = Fleet(tmp_path, ledger_url)
    yield made
    made.ledger.close()


@pytest.mark.parametrize("mode", ["cold", "live"])
def test_a_shared_pool_volume_is_charged_to_no_host_and_moves_without_being_copied(fleet_on_each_database, mode):
    fleet = fleet_on_each_database
    share_a_pool(fleet)
    made = fleet.volume(size_gb=60, host="hv1", pool=SHARED, settings=SHARING)
    assert made["changed"] and made["volume"]["shared"] and made["volume"]["pool"] == SHARED
    # 60 GB would not fit with the 60 GB volume below on a host of 100: a shared one is no host's.
    assert fleet.used_disk_mb("hv1") == 1024 and fleet.used_disk_mb("hv2") == 1024
    fleet.volume(name="data-2", size_gb=60, host="hv1")
    # Made through hv1, attached to web-2 on hv2: the same file, wherever the instance runs.
    attached = fleet.volume("attached", instance="web-2", settings=SHARING)
    assert attached["volume"]["host"] == "hv2" and fleet.disks("hv2", "web-2")["vde"] == f"{SHARED_PATH}/{FILE}"
    assert cache_of(fleet, "hv2", "web-2", "vde") == "none"
    the_file = fleet.hvs["hv1"].pools[SHARED]["volumes"][FILE]
    the_file["data"] = b"written before the move"
    moved = Migrate({"name": "web-2", "mode": mode, "to_host": "hv1", "carry_definition": False, "template": None,
                     "timeout": 30}, Settings(), fleet.ledger, {}, False,
                    connect=connect_to(*fleet.hvs.values())).run()
    assert (moved["to_host"], moved["mode"]) == ("hv1", mode)
    # The same file, never copied nor removed, attached on the destination at the same device.
    assert fleet.hvs["hv1"].pools[SHARED]["volumes"][FILE] is the_file
    assert the_file["data"] == b"written before the move"
    assert fleet.disks("hv1", "web-2")["vde"] == f"{SHARED_PATH}/{FILE}"
    # Uncached on the destination too (the domain template's rendering): a later live move needs it.
    assert cache_of(fleet, "hv1", "web-2", "vde") == "none"
    if mode == "live":
        assert fleet.hvs["hv2"].migrations[-1]["shared_paths"] == [f"{SHARED_PATH}/{FILE}"]
    [volume] = fleet.ledger.volumes(name="data-1")
    assert (volume["host"], volume["instance"], volume["target"]) == ("hv1", "web-2", "vde")
    # hv1 holds both instances and the local 60 GB volume; nothing of the shared one anywhere.
    assert fleet.used_disk_mb("hv1") == 2 * 1024 + 60 * 1024 and fleet.used_disk_mb("hv2") == 0
    fleet.volume("detached")
    deleted = fleet.volume("absent")
    assert deleted["changed"] and FILE not in fleet.hvs["hv2"].pools[SHARED]["volumes"]


def test_the_sync_reports_a_data_volume_file_no_volume_of_the_ledger_is_and_leaves_it(ledger):
    """A file named as a data volume that this ledger never made (another ledger's, made by
    hand, or a name that escapes the pattern) is reported by gather, never removed; a recorded
    volume is not reported."""
    from test_evacuate_operation import sync

    hv1 = FakeHypervisor("hv1")
    sync(ledger, hv1)
    Volume({"name": "kept", "state": "present", "size_gb": 1, "host": "hv1", "instance": None, "timeout": 30},
           Settings(), ledger, False, connect=connect_to(hv1)).run()
    hv1.add_volume(data_volume_name("stray"))
    hv1.add_volume("berth-volume-Not_A_Label.qcow2")
    synced = sync(ledger, hv1)
    assert synced["report"]["unrecorded_volumes"] == [{"host": "hv1", "pool": POOL, "name": data_volume_name("stray")}]
    assert any(f"unrecorded data volume {POOL}/{data_volume_name('stray')}" in line for line in synced["drift"])
    assert {data_volume_name("stray"), data_volume_name("kept")} <= hv1.volume_names_of()
