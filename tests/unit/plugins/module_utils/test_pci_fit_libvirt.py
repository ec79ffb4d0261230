"""The devices libvirt itself presents, as the tracker reads them, fed to the scheduler's fit:
libvirt's test driver with a node file of an SR-IOV NIC (its PF and two VFs), a GPU offering
mediated device types and a NIC without a NUMA node. No daemon, no QEMU."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.pci import check_aliases, fit, pci_request
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy


def _device(name, bus, slot, function, vendor, product, inner="", numa=None):
    node = f"<numa node='{numa}'/>" if numa is not None else ""
    return (f"<device><name>{name}</name><parent>computer</parent><capability type='pci'>"
            f"<domain>0</domain><bus>{bus}</bus><slot>{slot}</slot><function>{function}</function>"
            f"<product id='0x{product}'>p</product><vendor id='0x{vendor}'>v</vendor>{inner}{node}"
            "</capability></device>")


def _address(slot, function):
    return f"<address domain='0x0000' bus='0x3b' slot='0x{slot:02x}' function='0x{function:x}'/>"


NODE = ("<node><cpu><mhz>2000</mhz><model>Haswell</model><active>4</active><max>4</max><nodes>1</nodes>"
        "<sockets>1</sockets><cores>2</cores><threads>2</threads></cpu><memory>4194304</memory>"
        + _device("pci_0000_3b_00_0", 59, 0, 0, "8086", "1572",
                  f"<capability type='virt_functions' maxCount='64'>{_address(2, 0)}{_address(2, 1)}</capability>",
                  numa=1)
        + _device("pci_0000_3b_02_0", 59, 2, 0, "8086", "154c",
                  f"<capability type='phys_function'>{_address(0, 0)}</capability>", numa=1)
        + _device("pci_0000_3b_02_1", 59, 2, 1, "8086", "154c",
                  f"<capability type='phys_function'>{_address(0, 0)}</capability>", numa=1)
        + _device("pci_0000_86_00_0", 134, 0, 0, "10de", "1eb8",
                  "<capability type='mdev_types'><type id='nvidia-222'><name>GRID T4-1B</name>"
                  "<deviceAPI>vfio-pci</deviceAPI><availableInstances>2</availableInstances></type></capability>",
                  numa=0)
        + _device("pci_0000_05_00_0", 5, 0, 0, "8086", "0443", numa=-1)
        + "</node>")
ALIASES = check_aliases([
    {"name": "vf", "vendor_id": "8086", "product_id": "154c", "device_type": "type-VF", "numa_policy": "required"},
    {"name": "pf", "vendor_id": "8086", "product_id": "1572", "device_type": "type-PF"},
    {"name": "qat", "vendor_id": "8086", "product_id": "0443"},
])


@pytest.fixture(scope="module")
def devices(tmp_path_factory):
    path = tmp_path_factory.mktemp("node") / "host.xml"
    path.write_text(NODE)
    with Hypervisor("hv1", f"test://{path}", uri_policy=UriPolicy(allow_test_files=True)) as hv:
        return hv._pci_devices()["pci_devices"]


def request(extra_specs, mdev_types=()):
    return pci_request(Flavor(name="f", vcpus=1, memory_mb=512, root_gb=1, extra_specs=extra_specs), {}, ALIASES,
                       mdev_types)


def test_libvirt_s_devices_fit_as_the_facts_say(devices):
    assert [device["address"] for device in devices] == [
        "0000:05:00.0", "0000:3b:00.0", "0000:3b:02.0", "0000:3b:02.1", "0000:86:00.0"]
    taken, why = fit(devices, [], request({"pci_passthrough:alias": "vf:1,qat:1", "resources:VGPU": "2"}), (1,))
    assert why is None
    assert taken == {
        "pci": [{"address": "0000:3b:02.0", "alias": "vf", "dev_type": "type-VF", "numa_node": 1},
                {"address": "0000:05:00.0", "alias": "qat", "dev_type": "type-PCI", "numa_node": None}],
        "mdevs": [{"parent": "0000:86:00.0", "type": "nvidia-222"}] * 2}


def test_libvirt_s_pf_and_vfs_exclude_each_other(devices):
    held = [{"pci": [{"address": "0000:3b:02.1"}], "mdevs": [{"parent": "0000:86:00.0", "type": "nvidia-222"}]}]
    assert fit(devices, held, request({"pci_passthrough:alias": "pf:1"})) == (
        None, "1 x alias pf (8086:1572 type-PF) asked, 0 free")
    assert fit(devices, held, request({"resources:VGPU": "2"}, ["nvidia-222"])) == (
        None, "2 x vGPU (mdev type nvidia-222) asked, at most 1 free on one device")
    # The VFs sit on cell 1: a required policy on cell 0 finds none.
    assert fit(devices, [], request({"pci_passthrough:alias": "vf:1"}), (0,)) == (
        None, "1 x alias vf (8086:154c type-VF) asked, 0 free on NUMA cell 0 (policy required)")
