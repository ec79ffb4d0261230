"""A move defines on the destination what Berth would define there (issue 22): the domain rendered
again from the instance's build record through the launch's template, and the source's own
definition compared with it, each part Berth did not put there named."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from ansible_collections.berth.fleet.plugins.module_utils._guest import guest_spec
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import boot_spec, metadata_spec, network_specs
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import root_volume_name, seed_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils._transfer import foreign_parts
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import (
    DEFAULT_TEMPLATE,
    DomainTemplate,
    build_record,
    recorded_definition,
)

UUID = "6c1f2b1e-3a4d-4e5f-8a9b-0c1d2e3f4a5b"
TINY = Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1)
SMALL = Flavor(name="m1.small", vcpus=1, memory_mb=2048, root_gb=20)
POOL = "/var/lib/libvirt/images"
LOGS = "/var/log/libvirt/qemu"
TEMPLATE = DomainTemplate(DEFAULT_TEMPLATE)


def launch_request(**guest):
    """A build's request as Build._request makes it from a launch's options."""
    return {
        "name": "web-1", "uuid": UUID, "flavor": TINY, "image": None,
        "guest": guest_spec({"graphics": "vnc", **guest}),
        "networks": network_specs([{"type": "network", "name": "default"}, {"type": "user"}]),
        "metadata": metadata_spec({"role": "web", "tier": "<front>"}), "user_data": "#cloud-config\n",
        "boot": boot_spec({"kernel": "/var/lib/berth/vmlinuz", "initrd": "/var/lib/berth/initrd",
                           "cmdline": "console=ttyS0"}),
        "pool": "default",
    }


def launched(request, domain_type=""):
    """The XML the launch defined, and the instance as the ledger holds it after."""
    made = {"disk": {"path": f"{POOL}/{root_volume_name(UUID)}"}, "seed": {"path": f"{POOL}/{seed_volume_name(UUID)}"},
            "nvram": None}
    xml = TEMPLATE.render(request, made, domain_type or "qemu", LOGS)
    instance = {"name": "web-1", "uuid": UUID,
                "request": {"build": build_record(request, {"domain_type": domain_type})}}
    return xml, instance


# What libvirt gives back for a domain Berth defined: defaults added, addresses assigned.
LIBVIRT_ADDS = """
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <controller type='usb' index='0' model='piix3-uhci'><address type='pci' domain='0x0000' bus='0x00'/></controller>
    <controller type='pci' index='0' model='pci-root'/>
    <controller type='virtio-serial' index='0'/>
    <input type='mouse' bus='ps2'/>
    <input type='keyboard' bus='ps2'/>
    <audio id='1' type='none'/>
    <video><model type='cirrus' vram='16384' heads='1' primary='yes'/></video>
    <memballoon model='virtio'/>
"""

HOSTILE = {
    "filesystem": ("<filesystem type='mount' accessmode='passthrough'><source dir='/'/><target dir='host'/>"
                   "</filesystem>", "filesystem type=mount (dir=/)"),
    "hostdev": ("<hostdev mode='subsystem' type='pci'><source><address domain='0x0000' bus='0x03' slot='0x00' "
                "function='0x0'/></source></hostdev>", "hostdev type=pci"),
    "serial-file": ("<serial type='file'><source path='/etc/shadow'/><target port='1'/></serial>",
                    "serial type=file (path=/etc/shadow)"),
    "passthrough-input": ("<input type='passthrough' bus='virtio'><source evdev='/dev/input/event0'/></input>",
                          "input type=passthrough (evdev=/dev/input/event0)"),
    "agent-socket-elsewhere": ("<channel type='unix'><source mode='bind' path='/run/elsewhere.sock'/>"
                               "<target type='virtio' name='org.qemu.guest_agent.0'/></channel>",
                               "channel type=unix (mode=bind, path=/run/elsewhere.sock)"),
}


def as_libvirt_gives_it(xml, extra_devices="", top=""):
    # libvirt shows the serial port's log again in the console that mirrors it.
    xml = xml.replace("<console type='pty'>", f"<console type='pty'><log file='{LOGS}/web-1.serial.log' append='on'/>")
    devices_end = xml.index("</devices>")
    xml = xml[:devices_end] + LIBVIRT_ADDS + extra_devices + xml[devices_end:]
    return xml.replace("</domain>", top + "</domain>")


def test_the_record_renders_again_the_definition_the_launch_defined():
    request = launch_request(firmware="bios", disk_bus="scsi", nic_model="e1000")
    xml, instance = launched(request)
    assert recorded_definition(instance, TINY, TEMPLATE, POOL, ["qemu"], LOGS) == xml


def test_on_another_host_only_the_pool_paths_change_and_a_resize_its_sizes():
    xml, instance = launched(launch_request())
    moved = ET.fromstring(recorded_definition(instance, SMALL, TEMPLATE, "/srv/pool", ["qemu", "kvm"], LOGS))
    assert [disk.find("source").get("file") for disk in moved.findall("devices/disk")] == [
        f"/srv/pool/{root_volume_name(UUID)}", f"/srv/pool/{seed_volume_name(UUID)}"]
    assert (moved.get("type"), moved.findtext("memory"), moved.findtext("vcpu")) == ("kvm", "2048", "1")
    original = ET.fromstring(xml)
    for path in ("os/kernel", "os/cmdline", "devices/serial/log", "devices/interface/mac"):
        assert ET.tostring(moved.find(path)) == ET.tostring(original.find(path))


def test_a_domain_as_libvirt_gives_it_back_has_nothing_foreign():
    xml, _instance = launched(launch_request())
    assert foreign_parts(as_libvirt_gives_it(xml), xml) == []


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_each_device_berth_did_not_put_there_is_named(kind):
    xml, _instance = launched(launch_request())
    device, named = HOSTILE[kind]
    assert foreign_parts(as_libvirt_gives_it(xml, device), xml) == [named]


def test_qemu_arguments_are_named_with_their_namespace():
    xml, _instance = launched(launch_request())
    qemu = ("<qemu:commandline xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>"
            "<qemu:arg value='-set'/></qemu:commandline>")
    [found] = foreign_parts(as_libvirt_gives_it(xml, top=qemu), xml)
    assert found.startswith("commandline of namespace http://libvirt.org/schemas/domain/qemu/1.0")


def test_a_disk_or_interface_changed_in_place_is_foreign():
    xml, _instance = launched(launch_request())
    other_disk = xml.replace(f"{POOL}/{root_volume_name(UUID)}", f"{POOL}/someone-elses.qcow2")
    assert foreign_parts(other_disk, xml) == [f"disk type=file device=disk (file={POOL}/someone-elses.qcow2)"]
    bridged = xml.replace("<source network='default'/>", "<source network='tenant-b'/>")
    assert foreign_parts(bridged, xml) == ["interface type=network (network=tenant-b)"]


@pytest.mark.parametrize("change, field", [
    ({"networks": [{"type": "bridge", "name": "br0; reboot"}]}, "networks"),
    ({"boot": {"kernel": "relative/vmlinuz"}}, "boot"),
    ({"guest": {"nic_model": "<evil/>"}}, "nic_model"),
    ({"domain_type": "lxc"}, "domain_type"),
    ({"metadata": {"k": ["not", "text"]}}, "metadata"),
    ({"networks": [{"type": "user", "addresses": ["10.0.0.5"]}]}, "networks[0].addresses[0]"),
    ({"networks": [{"type": "user", "addresses": ["10.0.0.5/24"], "gateway": "192.0.2.1"}]}, "networks[0].gateway"),
    ({"networks": [{"type": "user", "addresses": ["10.0.0.5/24"], "nameservers": {"search": ["a;b"]}}]},
     "networks[0].nameservers.search[0]"),
    ({"guest": {"cdrom_bus": "usb"}}, "cdrom_bus"),
])
def test_a_record_a_ledger_writer_changed_is_checked_again_as_a_launch_is(change, field):
    _xml, instance = launched(launch_request())
    instance["request"]["build"].update(change)
    with pytest.raises(InputError) as refused:
        recorded_definition(instance, TINY, TEMPLATE, POOL, ["qemu"], LOGS)
    assert field in refused.value.field


def test_a_build_with_keys_or_static_settings_alone_records_its_seed_and_its_settings():
    static = network_specs([{"type": "user", "addresses": ["10.0.0.5/24"], "gateway": "10.0.0.1"}])
    for change in ({"public_keys": ["ssh-ed25519 AAAA"]}, {"networks": static}):
        request = {**launch_request(), "user_data": None, "public_keys": [], **change}
        record = build_record(request, {"domain_type": ""})
        assert record["seed"] is True
    assert record["networks"] == [{"type": "user", "name": "", "addresses": ["10.0.0.5/24"], "gateway": ["10.0.0.1"]}]
    plain = build_record({**launch_request(), "user_data": None, "public_keys": []}, {"domain_type": ""})
    assert plain["seed"] is False


def test_an_instance_without_a_build_record_cannot_be_defined_again():
    with pytest.raises(InputError, match="web-1 has no build record .adopted, or launched before Berth kept them"):
        recorded_definition({"name": "web-1", "uuid": UUID, "request": None}, TINY, TEMPLATE, POOL, [], LOGS)
    with pytest.raises(InputError, match="UUID in the ledger is not a UUID"):
        recorded_definition({"name": "web-1", "uuid": "../../etc", "request": {"build": {}}}, TINY, TEMPLATE, POOL,
                            [], LOGS)


def test_a_running_domain_is_compared_without_what_libvirt_assigned_at_start():
    xml, _instance = launched(launch_request())
    running = as_libvirt_gives_it(xml).replace(
        "<serial type='pty'>", "<serial type='pty'><source path='/dev/pts/7'/>").replace(
        "<mac address=", "<target dev='vnet3'/><mac address=", 1).replace(
        f"<source file='{POOL}/{root_volume_name(UUID)}'/>",
        f"<source file='{POOL}/{root_volume_name(UUID)}' index='2'/><backingStore type='file' index='3'>"
        f"<format type='qcow2'/><source file='{POOL}/debian.qcow2'/></backingStore>")
    assert foreign_parts(running, xml, running=True) == []
    # Attached while it runs: a host device, and a CD-ROM's medium changed to a host file.
    device, named = HOSTILE["hostdev"]
    assert foreign_parts(as_libvirt_gives_it(running, device), xml, running=True) == [named]
    swapped = running.replace(f"{POOL}/{seed_volume_name(UUID)}", "/etc/shadow")
    assert foreign_parts(swapped, xml, running=True) == ["disk type=file device=cdrom (file=/etc/shadow)"]
