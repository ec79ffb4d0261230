"""A move defines on the destination what Berth would define there (issue 22): the domain rendered
again from the instance's build record through the launch's template, and the source's own
definition compared with it, each part Berth did not put there named."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.berth.fleet.plugins.module_utils._guest import Guest
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.guest_cpu import guest_cpu
from ansible_collections.berth.fleet.plugins.module_utils.request import Boot, Network, Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import root_volume_name, seed_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils._transfer import foreign_parts
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import (
    DEFAULT_TEMPLATE,
    DomainTemplate,
    recorded_definition,
)

UUID = "6c1f2b1e-3a4d-4e5f-8a9b-0c1d2e3f4a5b"
TINY = Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1)
SMALL = Flavor(name="m1.small", vcpus=1, memory_mb=2048, root_gb=20)
POOL = "/var/lib/libvirt/images"
LOGS = "/var/log/libvirt/qemu"
TEMPLATE = DomainTemplate(DEFAULT_TEMPLATE)


def launch_request(**guest):
    """A launch's request as check_request makes it from a launch's options."""
    return Request(
        flavor=TINY, guest=Guest.from_options({"graphics": "vnc", **guest}),
        networks=Network.from_option([{"type": "network", "name": "default"}, {"type": "user"}]),
        metadata={"role": "web", "tier": "<front>"}, user_data="#cloud-config\n",
        boot=Boot("/var/lib/berth/vmlinuz", "/var/lib/berth/initrd", "console=ttyS0"))


@pytest.fixture
def launched(launched_instance):
    """``launched(request)``: the XML the launch defined, and the instance as the ledger holds it after."""
    def launch(request):
        made = {"disk": {"path": f"{POOL}/{root_volume_name(UUID)}"},
                "seed": {"path": f"{POOL}/{seed_volume_name(UUID)}"} if request.wants_seed else None, "nvram": None}
        # The CPU a host whose sync recorded no CPU settings gives a qemu guest (Build's choice).
        cpu = guest_cpu(None, "hv1", "qemu", request.topology)
        xml = TEMPLATE.render(request, "web-1", UUID, made, "qemu", LOGS, cpu=cpu)
        return xml, launched_instance(request, "web-1", UUID)
    return launch


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


def test_the_record_renders_again_the_definition_the_launch_defined(launched):
    request = launch_request(firmware="bios", disk_bus="scsi", nic_model="e1000")
    xml, instance = launched(request)
    assert recorded_definition(instance, TEMPLATE, POOL, ["qemu"], LOGS) == xml


def test_on_another_host_only_the_pool_paths_change_and_a_resize_its_sizes(launched):
    xml, instance = launched(launch_request())
    moved = ET.fromstring(recorded_definition(instance, TEMPLATE, "/srv/pool", ["qemu", "kvm"], LOGS, flavor=SMALL))
    assert [disk.find("source").get("file") for disk in moved.findall("devices/disk")] == [
        f"/srv/pool/{root_volume_name(UUID)}", f"/srv/pool/{seed_volume_name(UUID)}"]
    assert (moved.get("type"), moved.findtext("memory"), moved.findtext("vcpu")) == ("kvm", "2048", "1")
    original = ET.fromstring(xml)
    for path in ("os/kernel", "os/cmdline", "devices/serial/log", "devices/interface/mac"):
        assert ET.tostring(moved.find(path)) == ET.tostring(original.find(path))


def test_a_domain_as_libvirt_gives_it_back_has_nothing_foreign(launched):
    xml, _instance = launched(launch_request())
    assert foreign_parts(as_libvirt_gives_it(xml), xml) == []


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_each_device_berth_did_not_put_there_is_named(launched, kind):
    xml, _instance = launched(launch_request())
    device, named = HOSTILE[kind]
    assert foreign_parts(as_libvirt_gives_it(xml, device), xml) == [named]


def test_qemu_arguments_are_named_with_their_namespace(launched):
    xml, _instance = launched(launch_request())
    qemu = ("<qemu:commandline xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>"
            "<qemu:arg value='-set'/></qemu:commandline>")
    [found] = foreign_parts(as_libvirt_gives_it(xml, top=qemu), xml)
    assert found.startswith("commandline of namespace http://libvirt.org/schemas/domain/qemu/1.0")


def test_a_disk_or_interface_changed_in_place_is_foreign(launched):
    xml, _instance = launched(launch_request())
    other_disk = xml.replace(f"{POOL}/{root_volume_name(UUID)}", f"{POOL}/someone-elses.qcow2")
    assert foreign_parts(other_disk, xml) == [f"disk type=file device=disk (file={POOL}/someone-elses.qcow2)"]
    bridged = xml.replace("<source network='default'/>", "<source network='tenant-b'/>")
    assert foreign_parts(bridged, xml) == ["interface type=network (network=tenant-b)"]


def schema_1(record):
    """A request recorded as Berth wrote it before the request was typed (schema 1): the launch's
    request options, and a build record holding the guest's definition."""
    return {"flavor": record["flavor"], "project_id": record["project_id"], "availability_zone": None,
            "scheduler_hints": {}, "server_group": None, "image_properties": {},
            "build": {**{key: record[key] for key in ("metadata", "networks", "boot", "guest", "domain_type")},
                      **record["build"]}}


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
@pytest.mark.parametrize("schema", [2, 1])
def test_a_record_a_ledger_writer_changed_is_checked_again_as_a_launch_is(launched, schema, change, field):
    _xml, instance = launched(launch_request())
    if schema == 2:
        instance["request"].update(change)
    else:
        # Schema 1 kept these in the build record.
        instance["request"] = schema_1(instance["request"])
        instance["request"]["build"].update(change)
    with pytest.raises(InputError) as refused:
        recorded_definition(instance, TEMPLATE, POOL, ["qemu"], LOGS)
    assert field in refused.value.field


def test_a_schema_1_record_renders_again_the_definition_the_launch_defined(launched):
    xml, instance = launched(launch_request(disk_bus="scsi"))
    instance["request"] = schema_1(instance["request"])
    assert recorded_definition(instance, TEMPLATE, POOL, ["qemu"], LOGS) == xml


def test_a_build_with_keys_or_static_settings_alone_records_its_seed_and_its_settings(launched):
    static = Network.from_option([{"type": "user", "addresses": ["10.0.0.5/24"], "gateway": "10.0.0.1"}])
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMHAHKTOP2ZweYwdkDpx84WRcq9TQF+EoJE7iTdXnww7 alice@example"
    for change in ({"public_keys": (key,)}, {"networks": static}):
        xml, instance = launched(dataclasses.replace(launch_request(), user_data=None, **change))
        assert instance["request"]["build"]["seed"] is True
        # Defined again, it has its seed's CD-ROM, as its launch did.
        assert recorded_definition(instance, TEMPLATE, POOL, ["qemu"], LOGS) == xml
        assert ET.fromstring(xml).find("devices/disk[@device='cdrom']") is not None
    assert instance["request"]["networks"] == [
        {"type": "user", "name": "", "addresses": ["10.0.0.5/24"], "gateway": ["10.0.0.1"]}]
    _xml, plain = launched(dataclasses.replace(launch_request(), user_data=None))
    assert plain["request"]["build"]["seed"] is False


def test_an_instance_without_a_build_record_cannot_be_defined_again(launched):
    with pytest.raises(InputError, match="web-1 has no build record .adopted, or launched before Berth kept them"):
        recorded_definition({"name": "web-1", "uuid": UUID, "request": None}, TEMPLATE, POOL, [], LOGS)
    # Recorded at the claim, before its build ended (or never did): its request without a build.
    request = launch_request()
    with pytest.raises(InputError, match="web-1 has no build record .adopted, or launched before Berth kept them"):
        recorded_definition({"name": "web-1", "uuid": UUID, "request": request.to_record()}, TEMPLATE, POOL, [], LOGS)
    _xml, instance = launched(request)
    with pytest.raises(InputError, match="UUID in the ledger is not a UUID"):
        recorded_definition({**instance, "uuid": "../../etc"}, TEMPLATE, POOL, [], LOGS)


def test_a_running_domain_is_compared_without_what_libvirt_assigned_at_start(launched):
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
