"""The guest's hardware options: allowed values, the image's Nova properties as defaults, and
errors that name the field."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils._guest import Guest, graphics_spec
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError


def guest_spec(options, image_properties=None):
    """The guest as the domain template reads it: the chosen values and the device names."""
    return Guest.from_options(options, image_properties).template_context()


def test_defaults_are_bios_virtio_virtio_agent_on_no_graphics():
    assert guest_spec({}) == {
        "firmware": "bios", "disk_bus": "virtio", "nic_model": "virtio", "guest_agent": True, "cdrom_bus": "sata",
        "graphics": None, "cpu_baseline": False, "disk_dev": "vda", "ephemeral_dev": "vdb", "swap_dev": "vdc",
        "seed_dev": "sda",
    }


@pytest.mark.parametrize("disk_bus, cdrom_bus, seed_dev", [
    ("virtio", "ide", "hda"), ("ide", "ide", "hdd"), ("virtio", "scsi", "sda"), ("sata", "scsi", "sdd"),
    ("scsi", "sata", "sdd"), ("ide", "sata", "sda"),
], ids=str)
def test_the_seed_s_cdrom_bus_names_its_device_after_the_disks(disk_bus, cdrom_bus, seed_dev):
    spec = guest_spec({"disk_bus": disk_bus, "cdrom_bus": cdrom_bus})
    assert (spec["cdrom_bus"], spec["seed_dev"]) == (cdrom_bus, seed_dev)


def test_the_image_s_hw_cdrom_bus_is_the_default_of_cdrom_bus():
    assert guest_spec({}, {"hw_cdrom_bus": "ide"})["cdrom_bus"] == "ide"
    assert guest_spec({"cdrom_bus": "scsi"}, {"hw_cdrom_bus": "ide"})["cdrom_bus"] == "scsi"


@pytest.mark.parametrize("bus, devices", [
    ("virtio", ("vda", "vdb", "vdc", "sda")), ("scsi", ("sda", "sdb", "sdc", "sdd")),
    ("sata", ("sda", "sdb", "sdc", "sdd")), ("ide", ("hda", "hdb", "hdc", "sda")),
], ids=str)
def test_each_disk_bus_names_its_devices_and_the_seed_never_collides(bus, devices):
    spec = guest_spec({"disk_bus": bus})
    named = (spec["disk_dev"], spec["ephemeral_dev"], spec["swap_dev"], spec["seed_dev"])
    assert (spec["disk_bus"], named) == (bus, devices)
    assert len(set(named)) == len(named)


def test_the_launch_wins_over_the_image_properties_which_win_over_the_defaults():
    properties = {"hw_firmware_type": "uefi", "hw_disk_bus": "sata", "hw_vif_model": "e1000",
                  "hw_qemu_guest_agent": "no"}
    from_image = guest_spec({}, properties)
    assert (from_image["firmware"], from_image["disk_bus"], from_image["nic_model"], from_image["guest_agent"]) \
        == ("uefi", "sata", "e1000", False)
    said = guest_spec({"firmware": "bios", "disk_bus": "ide", "nic_model": "rtl8139", "guest_agent": True},
                      properties)
    assert (said["firmware"], said["disk_bus"], said["nic_model"], said["guest_agent"]) \
        == ("bios", "ide", "rtl8139", True)


@pytest.mark.parametrize("value, expected", [
    (True, True), (False, False), ("false", False), ("yes", True), ("no", False), ("True", True), (0, False),
], ids=str)
def test_guest_agent_takes_what_ansible_passes_for_a_boolean(value, expected):
    assert guest_spec({"guest_agent": value})["guest_agent"] is expected


@pytest.mark.parametrize("options, properties, field", [
    ({"firmware": "efi"}, {}, "firmware"),
    ({"firmware": "uefi'/><x"}, {}, "firmware"),
    ({"disk_bus": "usb"}, {}, "disk_bus"),
    ({"disk_bus": "virtio' bus='ide"}, {}, "disk_bus"),
    ({"nic_model": "e1000'/><interface type='direct"}, {}, "nic_model"),
    ({"nic_model": ["virtio"]}, {}, "nic_model"),
    ({"guest_agent": "maybe"}, {}, "guest_agent"),
    ({}, {"hw_disk_bus": "fdc"}, "image.properties.hw_disk_bus"),
    ({"cdrom_bus": "virtio"}, {}, "cdrom_bus"),
    ({}, {"hw_cdrom_bus": "usb"}, "image.properties.hw_cdrom_bus"),
    ({}, {"hw_vif_model": "virtio-net"}, "image.properties.hw_vif_model"),
    ({}, {"hw_firmware_type": "efi"}, "image.properties.hw_firmware_type"),
    ({"graphics": "rdp"}, {}, "graphics.type"),
    ({"graphics": {"type": "vnc", "listen": "0.0.0.0'/><x"}}, {}, "graphics.listen"),
    ({"graphics": {"type": "vnc", "listen": "hypervisor.example.com"}}, {}, "graphics.listen"),
    ({"graphics": {"type": "vnc", "password": "x"}}, {}, "graphics"),
    ({"graphics": 5}, {}, "graphics"),
], ids=["firmware", "firmware-xml", "disk-bus", "disk-bus-xml", "nic-xml", "nic-list", "agent", "image-bus",
        "cdrom-bus", "image-cdrom-bus",
        "image-nic", "image-firmware", "graphics-type", "listen-xml", "listen-name", "graphics-key", "graphics-int"])
def test_refusals_name_the_field_and_the_allowed_values(options, properties, field):
    with pytest.raises(InputError) as caught:
        guest_spec(options, properties)
    assert caught.value.field == field


def test_an_unknown_disk_bus_lists_the_allowed_ones():
    with pytest.raises(InputError, match="disk_bus must be one of virtio, scsi, sata, ide, got 'usb'"):
        guest_spec({"disk_bus": "usb"})


def test_graphics_listen_on_loopback_unless_told_and_any_address_when_told():
    assert graphics_spec(None) is None and graphics_spec("none") is None
    assert graphics_spec({"type": "none", "listen": "10.0.0.1"}) is None
    assert graphics_spec("vnc") == {"type": "vnc", "listen": "127.0.0.1"}
    assert graphics_spec({"type": "spice"}) == {"type": "spice", "listen": "127.0.0.1"}
    assert graphics_spec({"type": "vnc", "listen": "0.0.0.0"}) == {"type": "vnc", "listen": "0.0.0.0"}
    assert graphics_spec({"type": "spice", "listen": "::1"}) == {"type": "spice", "listen": "::1"}
