"""libvirt's node device XML read into the host state's pci_devices, without libvirt: an SR-IOV
physical function and one of its virtual functions, a GPU offering mdev types, a plain device,
and XML a hostile hypervisor could send. The XML is libvirt's own format (as virsh nodedev-dumpxml
prints it) for devices this machine does not have."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.host_devices import DeviceXMLError, pci_device

PF = """<device>
  <name>pci_0000_3b_00_0</name>
  <path>/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0</path>
  <parent>pci_0000_3a_00_0</parent>
  <driver><name>i40e</name></driver>
  <capability type='pci'>
    <class>0x020000</class>
    <domain>0</domain><bus>59</bus><slot>0</slot><function>0</function>
    <product id='0x1572'>Ethernet Controller X710 for 10GbE SFP+</product>
    <vendor id='0x8086'>Intel Corporation</vendor>
    <capability type='virt_functions' maxCount='64'>
      <address domain='0x0000' bus='0x3b' slot='0x02' function='0x1'/>
      <address domain='0x0000' bus='0x3b' slot='0x02' function='0x0'/>
    </capability>
    <iommuGroup number='40'><address domain='0x0000' bus='0x3b' slot='0x00' function='0x0'/></iommuGroup>
    <numa node='1'/>
    <pci-express><link validity='cap' port='0' speed='8' width='8'/></pci-express>
  </capability>
</device>"""

VF = """<device>
  <name>pci_0000_3b_02_0</name>
  <parent>pci_0000_3a_00_0</parent>
  <driver><name>iavf</name></driver>
  <capability type='pci'>
    <domain>0</domain><bus>59</bus><slot>2</slot><function>0</function>
    <product id='0x154c'>Ethernet Virtual Function 700 Series</product>
    <vendor id='0x8086'>Intel Corporation</vendor>
    <capability type='phys_function'>
      <address domain='0x0000' bus='0x3b' slot='0x00' function='0x0'/>
    </capability>
    <numa node='1'/>
  </capability>
</device>"""

GPU = """<device>
  <name>pci_0000_86_00_0</name>
  <parent>pci_0000_85_00_0</parent>
  <capability type='pci'>
    <domain>0</domain><bus>134</bus><slot>0</slot><function>0</function>
    <product id='0x1EB8'>TU104GL [Tesla T4]</product>
    <vendor id='0x10de'>NVIDIA Corporation</vendor>
    <capability type='mdev_types'>
      <type id='nvidia-231'><name>GRID T4-2B</name><deviceAPI>vfio-pci</deviceAPI>
        <availableInstances>8</availableInstances></type>
      <type id='nvidia-222'><name>GRID T4-1B</name><deviceAPI>vfio-pci</deviceAPI>
        <availableInstances>16</availableInstances></type>
    </capability>
    <numa node='-1'/>
  </capability>
</device>"""

PLAIN = """<device>
  <name>pci_0000_00_1f_2</name>
  <capability type='pci'>
    <domain>0</domain><bus>0</bus><slot>31</slot><function>2</function>
    <product id='0x2922'>82801IR/IO/IH (ICH9R/DO/DH) 6 port SATA Controller</product>
    <vendor id='0x8086'>Intel Corporation</vendor>
  </capability>
</device>"""


def read(xml: str):
    return pci_device(ET.fromstring(xml))


def test_a_physical_function_with_its_virtual_functions():
    assert read(PF) == {
        "name": "pci_0000_3b_00_0", "address": "0000:3b:00.0", "vendor_id": "8086", "product_id": "1572",
        "numa_node": 1, "dev_type": "type-PF", "mdev_types": [],
        "virtual_functions": ["0000:3b:02.0", "0000:3b:02.1"],
    }


def test_a_virtual_function_names_its_physical_function():
    assert read(VF) == {
        "name": "pci_0000_3b_02_0", "address": "0000:3b:02.0", "vendor_id": "8086", "product_id": "154c",
        "numa_node": 1, "dev_type": "type-VF", "mdev_types": [], "parent_address": "0000:3b:00.0",
    }


def test_a_gpu_with_mdev_types_and_no_numa_node():
    device = read(GPU)
    assert (device["address"], device["vendor_id"], device["product_id"]) == ("0000:86:00.0", "10de", "1eb8")
    assert device["numa_node"] is None and device["dev_type"] == "type-PCI"
    assert device["mdev_types"] == [
        {"type": "nvidia-222", "name": "GRID T4-1B", "device_api": "vfio-pci", "available_instances": 16},
        {"type": "nvidia-231", "name": "GRID T4-2B", "device_api": "vfio-pci", "available_instances": 8},
    ]


def test_a_plain_device_and_one_that_is_not_pci():
    device = read(PLAIN)
    assert device["address"] == "0000:00:1f.2" and device["numa_node"] is None
    assert device["dev_type"] == "type-PCI" and "virtual_functions" not in device
    assert read("<device><name>computer</name><capability type='system'/></device>") is None


@pytest.mark.parametrize("change, words", [
    (("<bus>59</bus>", "<bus>256</bus>"), "PCI bus 256 is out of range"),
    (("<slot>0</slot>", "<slot>x</slot>"), "PCI slot 'x' is not a number"),
    (("<function>0</function>", ""), "PCI function '' is not a number"),
    (("id='0x8086'", "id='8086'"), "vendor id '8086'"),
    (("id='0x1572'", "id='0x15721'"), "product id"),
    (("slot='0x02' function='0x1'", "slot='0x20' function='0x1'"), "PCI slot 32 is out of range"),
    (("<numa node='1'/>", "<numa node='99999'/>"), "NUMA node 99999 is out of range"),
], ids=["bus", "slot", "no-function", "vendor", "product", "vf-address", "numa-node"])
def test_refuses_what_a_hostile_host_could_send(change, words):
    with pytest.raises(DeviceXMLError) as caught:
        read(PF.replace(*change))
    assert words in str(caught.value)


@pytest.mark.parametrize("change, words", [
    (("id='nvidia-231'", "id='../../x'"), "mdev type id"),
    (("<availableInstances>8</availableInstances>", "<availableInstances>-1</availableInstances>"),
     "availableInstances of nvidia-231"),
    (("<availableInstances>8</availableInstances>", "<availableInstances>99999999</availableInstances>"),
     "out of range"),
], ids=["type-id", "negative", "huge"])
def test_refuses_bad_mdev_types(change, words):
    with pytest.raises(DeviceXMLError) as caught:
        read(GPU.replace(*change))
    assert words in str(caught.value)


def test_long_names_are_cut():
    device = read(GPU.replace("GRID T4-2B", "G" * 10000))
    assert len(device["mdev_types"][1]["name"]) == 255
