"""A flavor's ephemeral and swap disks: what a build plans and records, the domain's disks on each
bus, the vendor-data that has the guest format them, and a resize's definition of them."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

import pycdlib
import pycdlib.pycdlibexception
import pytest

from ansible_collections.berth.fleet.plugins.module_utils._guest import Guest, local_disks_vendor_data
from ansible_collections.berth.fleet.plugins.module_utils.request import Boot, Built, Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import (
    ephemeral_volume_name,
    is_instance_volume,
    root_volume_name,
    seed_volume_name,
    swap_volume_name,
    volume_instance_uuid,
)
from ansible_collections.berth.fleet.plugins.plugin_utils import _transfer
from ansible_collections.berth.fleet.plugins.plugin_utils._provisioning import plan
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import (
    DEFAULT_TEMPLATE,
    DomainTemplate,
    recorded_definition,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.resize import has_local_disks, with_local_disks

UUID = "6c1f2b1e-3a4d-4e5f-8a9b-0c1d2e3f4a5b"
POOL = "/var/lib/libvirt/images"
LOGS = "/var/log/libvirt/qemu"
TEMPLATE = DomainTemplate(DEFAULT_TEMPLATE)
WITH_DISKS = Flavor(name="eph", vcpus=1, memory_mb=512, root_gb=1, ephemeral_gb=2, swap=512)
BIGGER = Flavor(name="eph.big", vcpus=1, memory_mb=512, root_gb=1, ephemeral_gb=4, swap=0)
PLAIN = Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1)


class Session:
    """What plan() reads of a hypervisor, for a build without an image or libvirt networks."""

    host = "hv1"

    @staticmethod
    def pool_path(pool):
        return POOL


def request(flavor=WITH_DISKS, user_data=None, **guest):
    return Request(flavor=flavor, guest=Guest.from_options(guest), user_data=user_data,
                   boot=Boot(kernel="/srv/vmlinuz", cmdline="console=ttyS0"))


def planned(built_request):
    return plan(Session(), "web-1", UUID, built_request, "default",
                lambda made: TEMPLATE.render(built_request, "web-1", UUID, made, "qemu", LOGS))


def vendor_data(seed: bytes) -> str:
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(seed))
    try:
        out = io.BytesIO()
        iso.get_file_from_iso_fp(out, rr_path="/vendor-data")
        return out.getvalue().decode("utf-8")
    finally:
        iso.close()


def test_the_plan_lists_each_disk_as_an_artefact_sized_as_the_flavor_says():
    made = planned(request())
    assert [item["name"] for item in made["artefacts"]] == [
        root_volume_name(UUID), ephemeral_volume_name(UUID), swap_volume_name(UUID), seed_volume_name(UUID), "web-1"]
    assert made["ephemeral"] == {"path": f"{POOL}/{ephemeral_volume_name(UUID)}", "capacity_mb": 2048}
    assert made["swap"] == {"path": f"{POOL}/{swap_volume_name(UUID)}", "capacity_mb": 512}
    # A sync knows whose they are by their names.
    assert all(is_instance_volume(name) and volume_instance_uuid(name) == UUID
               for name in (ephemeral_volume_name(UUID), swap_volume_name(UUID)))


def test_without_ephemeral_or_swap_nothing_more_is_planned_and_no_seed_without_user_data():
    made = planned(request(PLAIN))
    assert (made["ephemeral"], made["swap"], made["seed"]) == (None, None, None)
    assert [item["name"] for item in made["artefacts"]] == [root_volume_name(UUID), "web-1"]
    with_user_data = planned(request(PLAIN, user_data="#cloud-config\n"))
    with pytest.raises(pycdlib.pycdlibexception.PyCdlibInvalidInput, match="Could not find path"):
        vendor_data(with_user_data["seed"]["data"])


@pytest.mark.parametrize("bus, devices", [
    ("virtio", ["vda", "vdb", "vdc", "sda"]), ("scsi", ["sda", "sdb", "sdc", "sdd"]),
    ("sata", ["sda", "sdb", "sdc", "sdd"]), ("ide", ["hda", "hdb", "hdc", "sda"]),
], ids=str)
def test_the_disks_follow_the_root_disk_on_its_bus_and_no_two_devices_share_a_name(bus, devices):
    domain = ET.fromstring(planned(request(disk_bus=bus))["xml"])
    disks = domain.findall("devices/disk")
    assert [disk.find("target").get("dev") for disk in disks] == devices
    assert [disk.find("target").get("bus") for disk in disks] == [bus, bus, bus, "sata"]
    assert [disk.find("source").get("file").rsplit("/", 1)[1] for disk in disks] == [
        root_volume_name(UUID), ephemeral_volume_name(UUID), swap_volume_name(UUID), seed_volume_name(UUID)]


def test_the_seed_asks_cloud_init_to_format_mount_and_enable_the_disks_even_without_user_data():
    made = planned(request())
    text = vendor_data(made["seed"]["data"])
    assert text.startswith("#cloud-config\n")
    config = json.loads(text.split("\n", 1)[1])
    assert config["fs_setup"] == [{"device": "/dev/vdb", "partition": "none", "label": "ephemeral0",
                                   "filesystem": "vfat"}]
    assert config["mounts"] == [["/dev/vdb", "/mnt", "auto", "defaults,nofail", "0", "2"],
                                ["/dev/vdc", "none", "swap", "sw", "0", "0"]]
    [bootcmd] = config["bootcmd"]
    assert bootcmd[:2] == ["sh", "-c"] and bootcmd[3:] == ["berth-swap", "/dev/vdc"]
    assert "mkswap" in bootcmd[2] and "swapon" in bootcmd[2]


@pytest.mark.parametrize("bus, ephemeral_gb, swap_mb, os_type, expected", [
    ("virtio", 1, 0, "linux", {"ephemeral": ("/dev/vdb", "ext4")}),
    ("virtio", 0, 256, None, {"swap": "/dev/vdb"}),
    ("scsi", 1, 256, "windows", {"ephemeral": ("/dev/sdb", "ntfs"), "swap": "/dev/sdc"}),
    ("ide", 1, 0, None, {"ephemeral": ("/dev/sdb", "vfat")}),
], ids=["linux-ext4", "swap-only", "scsi-windows", "ide-libata"])
def test_the_vendor_data_names_disks_as_the_guest_kernel_and_formats_as_nova(bus, ephemeral_gb, swap_mb, os_type,
                                                                             expected):
    config = local_disks_vendor_data(bus, ephemeral_gb, swap_mb, {"os_type": os_type} if os_type else None)
    if "ephemeral" in expected:
        [setup] = config["fs_setup"]
        assert (setup["device"], setup["filesystem"], setup["label"]) == (*expected["ephemeral"], "ephemeral0")
    else:
        assert "fs_setup" not in config
    if "swap" in expected:
        assert config["bootcmd"][0][-1] == expected["swap"]
        assert [expected["swap"], "none", "swap", "sw", "0", "0"] in config["mounts"]
    else:
        assert "bootcmd" not in config
    assert local_disks_vendor_data(bus, 0, 0) is None


def launched(flavor=WITH_DISKS):
    built = request(flavor, user_data="#cloud-config\n")
    made = planned(built)
    # As the ledger records it: the request, and its build's record beside it (ledger.mark_active).
    instance = {"name": "web-1", "uuid": UUID,
                "request": {**built.to_record(), "build": Built(seed=built.wants_seed).to_record()}}
    return made["xml"], instance


def test_the_build_record_renders_the_disks_again_and_a_record_without_them_renders_none():
    xml, instance = launched()
    assert instance["request"]["build"]["local_disks"] is True and has_local_disks(instance)
    assert recorded_definition(instance, TEMPLATE, POOL, ["qemu"], LOGS) == xml
    moved = ET.fromstring(recorded_definition(instance, TEMPLATE, "/srv/pool", ["qemu"], LOGS))
    assert [disk.find("source").get("file") for disk in moved.findall("devices/disk")][1:3] == [
        f"/srv/pool/{ephemeral_volume_name(UUID)}", f"/srv/pool/{swap_volume_name(UUID)}"]
    # An instance launched before Berth built them has none to carry.
    del instance["request"]["build"]["local_disks"]
    assert not has_local_disks(instance)
    older = ET.fromstring(recorded_definition(instance, TEMPLATE, POOL, ["qemu"], LOGS))
    assert len(older.findall("devices/disk[@device='disk']")) == 1


def test_a_resize_on_its_own_host_redefines_the_disks_as_the_new_flavor_has_them():
    xml, instance = launched()
    expected = recorded_definition(instance, TEMPLATE, POOL, ["qemu"], LOGS, flavor=BIGGER)
    resized = ET.fromstring(with_local_disks(xml, expected))
    # Swap 0 drops its disk; the ephemeral disk stays right after the root disk.
    assert [disk.find("source").get("file").rsplit("/", 1)[1] for disk in resized.findall("devices/disk")] == [
        root_volume_name(UUID), ephemeral_volume_name(UUID), seed_volume_name(UUID)]
    back = ET.fromstring(with_local_disks(ET.tostring(resized, encoding="unicode"), xml))
    assert [disk.find("target").get("dev") for disk in back.findall("devices/disk")] == ["vda", "vdb", "vdc", "sda"]


class PoolHost:
    """A hypervisor's pool of plain files, as a move reads it."""

    host = "hv1"

    def __init__(self, names):
        self.names = set(names)

    @staticmethod
    def pool_path(pool):
        return POOL

    def volume(self, pool, name, refresh=True):
        return ({"name": name, "backing": None, "link": False, "type": "file", "path": f"{POOL}/{name}"}
                if name in self.names else None)


def test_a_move_carries_the_ephemeral_and_swap_disks_like_the_root_disk_and_checks_their_copies():
    xml, _instance = launched()
    names = [root_volume_name(UUID), ephemeral_volume_name(UUID), swap_volume_name(UUID), seed_volume_name(UUID)]
    disks, volumes = _transfer.movable_volumes(PoolHost(names), PoolHost([]), {"uuid": UUID, "name": "web-1"},
                                               "default", xml)
    assert (disks, volumes) == (names[:3], names)
    _transfer._check_copies(PoolHost(names), "default", volumes)
