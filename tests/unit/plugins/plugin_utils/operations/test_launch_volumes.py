"""Volumes made with a launch (Nova's block device mapping of blank volumes, with its
delete_on_termination) through the real Launch operation: a real schedule and claim in a real
ledger (SQLite and PostgreSQL) and a real build on fake hypervisors (fake_hypervisor.py). Each
instance gets its own volumes, claimed on its host with it and counted by DiskFilter, recorded as
attached and made before its first start; a retry elsewhere takes them along, a failed launch
leaves none; deleting the instance deletes those marked delete_on_termination and keeps the
others, detached; bad input is refused naming the field, with nothing claimed. The same through
real libvirt and ansible-playbook: tests/integration/test_volumes.py."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from fake_hypervisor import POOL, FakeHypervisor, connect_to
from test_evacuate_operation import sync
from test_rebuild_operation import DieAt, Killed

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import volumes_option
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import data_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import AFTER_DEFINE
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ACTIVE, BUILDING, ERROR
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import DEFAULT_TEMPLATE, Build
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import Launch, check_request
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

VOLUMES = ({"name": "data", "size_gb": 5, "delete_on_termination": True}, {"name": "logs", "size_gb": 2})
TINY = {"vcpus": 1, "memory_mb": 512, "root_gb": 1}


class Fleet:
    """hv1 and hv2, synced into ``ledger``; hv1 has ``hv1_disk_gb`` of pool."""

    def __init__(self, ledger, hv1_disk_gb=100):
        self.ledger = ledger
        self.hvs = {"hv1": FakeHypervisor("hv1", pool_capacity_mb=hv1_disk_gb * 1024), "hv2": FakeHypervisor("hv2")}
        sync(ledger, *self.hvs.values())

    def launch(self, names, volumes=VOLUMES, check_mode=False, hooks=None, settings=None, **options):
        settings = settings or Settings()
        wanted = list(volumes) if isinstance(volumes, tuple) else volumes
        request = check_request({"flavor": TINY, "domain_type": "qemu", "volumes": wanted, **options}, settings)
        return Launch(request, settings, names, "web", self.ledger, {}, DEFAULT_TEMPLATE, check_mode, False,
                      connect=connect_to(*self.hvs.values()), **({"hooks": hooks} if hooks else {})).run()

    def remove(self, name, check_mode=False):
        [row] = self.ledger.instances([name])
        placement = {"name": name, "uuid": row["uuid"], "host": row["host"], "uri": f"fake://{row['host']}/system"}
        return Build(Settings(), self.ledger, DEFAULT_TEMPLATE, check_mode, False,
                     connect=connect_to(*self.hvs.values())).remove([placement])

    def used_disk_mb(self, host):
        hv = next(item for item in self.ledger.hypervisors() if item["host"] == host)
        return hv["inventories"]["DISK_MB"]["total"] - hv["usage"]["free_disk_mb"]

    def files(self, host):
        return {name: volume["capacity_mb"] for name, volume in self.hvs[host].pools[POOL]["volumes"].items()
                if name.startswith("berth-volume-")}

    def disks(self, name):
        [row] = self.ledger.instances([name])
        root = ET.fromstring(self.hvs[row["host"]].domain_xml(row["uuid"]))
        return {disk.find("target").get("dev"): disk.find("source").get("file").rsplit("/", 1)[1]
                for disk in root.findall("devices/disk") if disk.get("device") == "disk"}

    def state(self):
        return ({host: hv.snapshot() for host, hv in self.hvs.items()}, self.ledger.volumes(),
                self.ledger.instances(), self.used_disk_mb("hv1"), self.used_disk_mb("hv2"))


@pytest.fixture
def fleet(ledger):
    return Fleet(ledger)


def test_each_instance_gets_its_volumes_claimed_attached_and_made_before_its_first_start(fleet):
    done = fleet.launch(["web-1", "web-2"], scheduler_hints={}, server_group=None)
    assert not done.get("failed"), done.get("msg")
    for name in ("web-1", "web-2"):
        [row] = fleet.ledger.instances([name])
        assert row["state"] == ACTIVE
        volumes = fleet.ledger.volumes(instance_uuid=row["uuid"])
        assert [(v["name"], v["size_gb"], v["target"], v["host"], v["delete_on_termination"]) for v in volumes] == [
            (f"{name}-data", 5, "vde", row["host"], True), (f"{name}-logs", 2, "vdf", row["host"], False)]
        # Made in the instance's pool, of their sizes, and in its definition on those devices.
        assert {data_volume_name(f"{name}-data"): 5 * 1024, data_volume_name(f"{name}-logs"): 2 * 1024}.items() <= \
            fleet.files(row["host"]).items()
        disks = fleet.disks(name)
        assert (disks["vde"], disks["vdf"]) == (data_volume_name(f"{name}-data"), data_volume_name(f"{name}-logs"))
    # The claim counts them: each host holds a 1 GB root disk and 7 GB of volumes per instance.
    hosts = [fleet.ledger.instances([name])[0]["host"] for name in ("web-1", "web-2")]
    for host in ("hv1", "hv2"):
        assert fleet.used_disk_mb(host) == hosts.count(host) * 8 * 1024
    # A second launch of the same names changes nothing.
    before = fleet.state()
    again = fleet.launch(["web-1", "web-2"])
    assert not again["changed"] and fleet.state() == before


def test_check_mode_says_which_volumes_it_would_make_and_changes_nothing(fleet):
    before = fleet.state()
    planned = fleet.launch(["web-1"], check_mode=True)
    [result] = planned["build"]["results"]
    assert "with volume(s) berth-volume-web-1-data.qcow2 (5 GB on vde), berth-volume-web-1-logs.qcow2 (2 GB on vdf)" \
        in result["msg"]
    assert fleet.state() == before


def test_disk_filter_counts_the_volumes(ledger):
    # hv1 has room for the flavor's 1 GB but not for 7 GB of volumes beside it: hv2 gets both.
    fleet = Fleet(ledger, hv1_disk_gb=6)
    done = fleet.launch(["web-1"])
    assert not done.get("failed"), done.get("msg")
    assert fleet.ledger.instances(["web-1"])[0]["host"] == "hv2"
    # Too large for any host: no valid host, naming the disk asked for, nothing claimed.
    before = fleet.state()
    refused = fleet.launch(["big-1"], volumes=[{"name": "huge", "size_gb": 200}])
    # 1 GB of root disk and 200 GB of volume: 205,824 MB.
    assert refused["failed"] and "needs 205824 MB disk" in refused["msg"]
    assert "2 smaller than the flavor's disk and the volumes" in refused["msg"]
    assert fleet.state() == before


def test_deleting_the_instance_deletes_the_volumes_marked_so_and_keeps_the_others_detached(fleet):
    assert not fleet.launch(["web-1"]).get("failed")
    host = fleet.ledger.instances(["web-1"])[0]["host"]
    before = fleet.state()
    [planned] = fleet.remove("web-1", check_mode=True)["results"]
    assert planned["msg"] == f"would delete web-1 from {host} with its volume(s) web-1-data"
    assert fleet.state() == before
    assert fleet.remove("web-1")["changed"]
    assert fleet.ledger.instances(["web-1"]) == []
    [kept] = fleet.ledger.volumes()
    assert (kept["name"], kept["instance_uuid"], kept["target"], kept["delete_on_termination"]) == \
        ("web-1-logs", None, None, False)
    assert fleet.files(host) == {data_volume_name("web-1-logs"): 2 * 1024}
    # The kept volume is still claimed on its host; the deleted one is not.
    assert fleet.used_disk_mb(host) == 2 * 1024
    # Launching the name again refuses to take the kept volume's name, and claims nothing.
    before = fleet.state()
    with pytest.raises(InputError, match=r"volume web-1-logs \(on hv\d\) is in the ledger already") as refused:
        fleet.launch(["web-1"])
    assert refused.value.field == "volumes"
    assert fleet.state() == before


def test_a_failed_build_is_retried_elsewhere_with_its_volumes_and_leaves_none_behind(fleet):
    first = fleet.hvs["hv1"]
    first.faults["start"] = HypervisorError("hv1", "QEMU would not start")
    fleet.hvs["hv2"].faults["start"] = HypervisorError("hv2", "QEMU would not start")
    # Both fail: ERROR, no volume row, no file, no claimed disk anywhere.
    failed = fleet.launch(["web-1"], settings=Settings(max_attempts=2))
    assert failed["failed"]
    [row] = fleet.ledger.instances(["web-1"])
    assert row["state"] == ERROR and fleet.ledger.volumes() == []
    assert fleet.files("hv1") == {} and fleet.files("hv2") == {}
    assert fleet.used_disk_mb("hv1") == fleet.used_disk_mb("hv2") == 0
    # The first host fails, the alternate builds it: the volumes are there, and only there.
    del fleet.hvs["hv2"].faults["start"]
    done = fleet.launch(["web-1"], settings=Settings(max_attempts=2))
    assert not done.get("failed"), done.get("msg")
    [row] = fleet.ledger.instances(["web-1"])
    assert (row["state"], row["host"]) == (ACTIVE, "hv2")
    # It was tried on hv1 first, and its volumes made there were removed with the attempt.
    [result] = done["build"]["results"]
    assert result["failed_attempts"] == ["hv1: QEMU would not start"]
    assert {volume["host"] for volume in fleet.ledger.volumes()} == {"hv2"}
    made = {data_volume_name("web-1-data"), data_volume_name("web-1-logs")}
    assert fleet.files("hv1") == {} and set(fleet.files("hv2")) == made
    assert fleet.used_disk_mb("hv1") == 0 and fleet.used_disk_mb("hv2") == 8 * 1024


def test_a_launch_that_dies_leaves_its_volumes_recorded_as_its_build_s_and_given_up_with_it(fleet):
    with pytest.raises(Killed):
        fleet.launch(["web-1"], hooks=DieAt(AFTER_DEFINE))
    [row] = fleet.ledger.instances(["web-1"])
    assert row["state"] == BUILDING
    # Made before the start, and recorded as what the build made, so that cleanup finds them.
    recorded = {item["name"] for item in fleet.ledger.artefacts(row["uuid"], "web-1")}
    assert {data_volume_name("web-1-data"), data_volume_name("web-1-logs")} <= recorded
    assert len(fleet.ledger.volumes(instance_uuid=row["uuid"])) == 2
    # What the sync does once the lease ran out and nothing runs: the instance is ERROR, and
    # the volumes its launch never finished are no claim any more.
    fleet.ledger.mark_error(row["uuid"], "the launch died")
    assert fleet.ledger.volumes() == [] and fleet.used_disk_mb(row["host"]) == 0


@pytest.mark.parametrize(("volumes", "field", "message"), [
    ([{"name": "data", "size_gb": 0}], "volumes[0].size_gb", "volumes[0].size_gb"),
    ([{"name": "data", "size_gb": 10 * 1024 * 1024}], "volumes[0].size_gb", "over the limit of 16384 GiB"),
    ([{"name": "Data_1", "size_gb": 1}], "volumes[0].name", "must be a DNS label"),
    ([{"name": "data", "size_gb": 1}, {"name": "data", "size_gb": 2}], "volumes[1].name", "is given twice"),
    ([{"name": "data"}], "volumes[0].size_gb", "size_gb is required"),
    ([{"name": "data", "size_gb": 1, "pool": "/etc"}], "volumes[0].pool", "unknown key(s) pool"),
    ([{"name": "data", "size_gb": 1, "delete_on_termination": "yes"}], "volumes[0].delete_on_termination",
     "must be true or false"),
    ("data", "volumes", "volumes must be a list"),
    ([{"name": "d" * 60, "size_gb": 1}], "volumes[0].name", "would be named web-1-ddd"),
], ids=["size-0", "size-10PiB", "not-a-dns-label", "twice", "no-size", "unknown-key", "not-a-bool", "not-a-list",
        "name-too-long"])
def test_bad_volumes_are_refused_naming_the_field_and_nothing_is_claimed(fleet, volumes, field, message):
    before = fleet.state()
    with pytest.raises(InputError, match=re.escape(message)) as refused:
        fleet.launch(["web-1"], volumes=volumes)
    assert refused.value.field == field
    assert fleet.state() == before


def test_an_ide_guest_has_no_device_for_a_volume(fleet):
    before = fleet.state()
    with pytest.raises(InputError, match=r"a guest on disk bus ide takes at most 0 data volume\(s\), got 2") as refused:
        fleet.launch(["web-1"], disk_bus="ide")
    assert refused.value.field == "volumes"
    assert fleet.state() == before


def test_the_option_reads_as_nova_s_block_device_mapping_defaults():
    [volume] = volumes_option([{"name": "data", "size_gb": 3}])
    assert (volume.name, volume.size_gb, volume.delete_on_termination) == ("data", 3, False)
    assert volumes_option(None) == () and volumes_option([]) == ()
