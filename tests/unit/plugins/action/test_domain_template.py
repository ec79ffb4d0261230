"""The role's domain template rendered as berth.fleet.instance renders it (Jinja2 autoescape):
each guest option lands where libvirt reads it, and hostile values stay text."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ansible_collections.berth.fleet.plugins.module_utils._guest import Guest
from ansible_collections.berth.fleet.plugins.module_utils.request import Boot, Network, Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import DomainTemplate

TEMPLATE = Path(__file__).resolve().parents[4] / "roles" / "instance" / "templates" / "domain.xml.j2"
UUID = "6c1f2b1e-3a4d-4e5f-8a9b-0c1d2e3f4a5b"
POOL = "/var/lib/libvirt/images"


def render(guest_options=None, seed=True, uefi_nvram=True, networks=None, metadata=None, guest=None):
    guest = guest or Guest.from_options(guest_options or {})
    request = Request(
        flavor=Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1), guest=guest,
        networks=Network.from_option(networks if networks is not None else [{"type": "user"}]),
        metadata=metadata or {}, boot=Boot("/srv/vmlinuz", "/srv/initrd.img", "console=ttyS0"))
    made = {
        "disk": {"path": f"{POOL}/berth-{UUID}-root.qcow2"},
        "seed": {"path": f"{POOL}/berth-{UUID}-seed.iso"} if seed else None,
        "nvram": ({"path": f"{POOL}/berth-{UUID}-nvram.fd"}
                  if guest.template_context()["firmware"] == "uefi" and uefi_nvram else None),
    }
    return ET.fromstring(DomainTemplate(str(TEMPLATE)).render(request, "web-1", UUID, made, "qemu",
                                                              "/var/log/libvirt/qemu"))


class UncheckedGuest(Guest):
    """A guest whose template context skipped Guest's checks (a custom caller's)."""

    def template_context(self):
        return dict(self.values)


def test_bios_default_has_no_firmware_nvram_or_graphics_and_keeps_virtio():
    domain = render()
    assert domain.find("os").get("firmware") is None and domain.find("os/nvram") is None
    assert domain.find("devices/graphics") is None
    disk = domain.find("devices/disk[@device='disk']/target")
    assert (disk.get("dev"), disk.get("bus")) == ("vda", "virtio")
    assert domain.find("devices/interface/model").get("type") == "virtio"
    assert domain.find("devices/controller[@type='scsi']") is None


def test_uefi_asks_libvirt_for_efi_without_secure_boot_and_keeps_nvram_in_the_pool():
    domain = render({"firmware": "uefi"})
    os_element = domain.find("os")
    assert os_element.get("firmware") == "efi"
    assert os_element.find("firmware/feature").attrib == {"enabled": "no", "name": "secure-boot"}
    assert os_element.findtext("nvram") == f"{POOL}/berth-{UUID}-nvram.fd"
    # Direct kernel boot stays: OVMF loads the kernel QEMU hands it.
    assert os_element.findtext("kernel") == "/srv/vmlinuz"


@pytest.mark.parametrize("bus, dev, seed_dev", [("virtio", "vda", "sda"), ("scsi", "sda", "sdd"),
                                                ("sata", "sda", "sdd"), ("ide", "hda", "sda")], ids=str)
def test_disk_bus_sets_the_root_disk_target_and_the_seed_moves_aside(bus, dev, seed_dev):
    domain = render({"disk_bus": bus})
    root = domain.find("devices/disk[@device='disk']/target")
    seed = domain.find("devices/disk[@device='cdrom']/target")
    assert (root.get("dev"), root.get("bus")) == (dev, bus)
    assert (seed.get("dev"), seed.get("bus")) == (seed_dev, "sata")
    scsi = domain.find("devices/controller[@type='scsi']")
    assert (scsi is not None and scsi.get("model") == "virtio-scsi") == (bus == "scsi")


@pytest.mark.parametrize("cdrom_bus, seed_dev, controller", [("sata", "sda", False), ("ide", "hda", False),
                                                             ("scsi", "sda", True)], ids=str)
def test_cdrom_bus_puts_the_seed_on_that_bus(cdrom_bus, seed_dev, controller):
    domain = render({"cdrom_bus": cdrom_bus})
    seed = domain.find("devices/disk[@device='cdrom']/target")
    assert (seed.get("dev"), seed.get("bus")) == (seed_dev, cdrom_bus)
    assert (domain.find("devices/controller[@type='scsi']") is not None) == controller


@pytest.mark.parametrize("model", ["e1000", "rtl8139", "e1000e"])
def test_nic_model_on_every_interface(model):
    domain = render({"nic_model": model}, networks=[{"type": "user", "name": ""}, {"type": "network", "name": "n"}])
    assert [m.get("type") for m in domain.findall("devices/interface/model")] == [model, model]


def test_serial_console_is_a_pty_logged_to_the_serial_file_and_the_agent_channel_is_on():
    domain = render()
    serial = domain.find("devices/serial")
    assert serial.get("type") == "pty"
    assert serial.find("log").attrib == {"file": "/var/log/libvirt/qemu/web-1.serial.log", "append": "on"}
    assert domain.find("devices/console").get("type") == "pty"
    channel = domain.find("devices/channel")
    assert channel.get("type") == "unix"
    assert channel.find("target").attrib == {"type": "virtio", "name": "org.qemu.guest_agent.0"}
    assert render({"guest_agent": False}).find("devices/channel") is None


@pytest.mark.parametrize("graphics, kind, listen", [
    ("vnc", "vnc", "127.0.0.1"), ({"type": "spice"}, "spice", "127.0.0.1"),
    ({"type": "vnc", "listen": "192.0.2.10"}, "vnc", "192.0.2.10"),
], ids=["vnc", "spice", "vnc-address"])
def test_graphics_listen_where_asked_and_on_loopback_by_default(graphics, kind, listen):
    element = render({"graphics": graphics}).find("devices/graphics")
    assert (element.get("type"), element.get("autoport")) == (kind, "yes")
    assert element.find("listen").attrib == {"type": "address", "address": listen}


def test_values_that_get_past_validation_are_still_escaped():
    """The template never trusts its callers: a guest that skipped Guest's checks (a custom
    caller) cannot add elements or attributes."""
    hostile = "virtio'/><graphics type='vnc' listen='0.0.0.0'/><x a='"
    guest = UncheckedGuest({**Guest.from_options({"graphics": "vnc"}).template_context(), "disk_bus": hostile,
                            "nic_model": hostile, "disk_dev": hostile,
                            "graphics": {"type": hostile, "listen": hostile}, "firmware": "uefi"})
    domain = render(guest=guest, metadata={"team": "a]]>&<b>"})
    assert domain.find("devices/disk/target").get("bus") == hostile
    assert domain.find("devices/interface/model").get("type") == hostile
    [graphics] = domain.findall("devices/graphics")
    assert graphics.find("listen").get("address") == hostile
    assert domain.find("devices/x") is None
    assert domain.find("metadata/{urn:berth:instance:1}instance/{urn:berth:instance:1}meta").text == "a]]>&<b>"
