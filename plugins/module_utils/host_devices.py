"""A hypervisor's PCI devices and mediated device types, from libvirt's node device XML
(virNodeDeviceGetXMLDesc of the devices virConnectListAllNodeDevices lists): pure parsing of one
device's ElementTree into the host state's ``pci_devices`` entry. libvirt_host fetches the XML.

The XML comes from a hypervisor, which is not trusted: every value is checked against what PCI
allows (a 16-bit domain, 8-bit bus, 5-bit slot, 3-bit function, 16-bit ids), and a device that
does not parse is left out rather than recorded half-read.

Python 3.9: modules ship this file to hypervisors with the rest of module_utils.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Optional

from ansible_collections.berth.fleet.plugins.module_utils._untrusted_text import whole_number

# Nova's PCI device types (nova.objects.fields.PciDeviceType).
TYPE_PCI = "type-PCI"
TYPE_PF = "type-PF"
TYPE_VF = "type-VF"
_ADDRESS_BITS = {"domain": 0xFFFF, "bus": 0xFF, "slot": 0x1F, "function": 0x7}
_PCI_ID = re.compile(r"^0x[0-9a-fA-F]{4}$")
# mdev type ids as kernels name them (nvidia-35, i915-GVTg_V5_4, mtty-2).
_MDEV_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,63}$")
_TEXT_CHARACTERS = 255
# More instances of one type than any device offers (an A100 offers at most a few dozen): a bound
# on the number, so that it fits the ledger's integers.
_MAX_INSTANCES = 1 << 20


class DeviceXMLError(ValueError):
    """A node device XML that does not read as a PCI device (a hostile or broken hypervisor)."""


def _integer(text: Optional[str], maximum: int, what: str) -> int:
    value = (text or "").strip()
    try:
        number = int(value, 16) if value.lower().startswith("0x") else int(value)
    except ValueError:
        raise DeviceXMLError(f"{what} {value!r} is not a number") from None
    if not 0 <= number <= maximum:
        raise DeviceXMLError(f"{what} {number} is out of range 0-{maximum}")
    return number


def pci_address(element: ET.Element, from_attributes: bool) -> str:
    """A PCI address as Nova writes it, "0000:3b:00.0", from a device's domain/bus/slot/function
    elements or from an <address> element's attributes."""
    parts = {}
    for name, maximum in _ADDRESS_BITS.items():
        text = element.get(name) if from_attributes else element.findtext(name)
        parts[name] = _integer(text, maximum, f"PCI {name}")
    return "{domain:04x}:{bus:02x}:{slot:02x}.{function:x}".format(**parts)


def _pci_id(element: Optional[ET.Element], what: str) -> str:
    text = element.get("id", "") if element is not None else ""
    if not _PCI_ID.match(text):
        raise DeviceXMLError(f"{what} id {text!r} is not 0x and four hex digits")
    return text[2:].lower()


def _text(value: Optional[str]) -> str:
    return (value or "").strip()[:_TEXT_CHARACTERS]


def mdev_types(capability: ET.Element) -> List[Dict[str, Any]]:
    """The mediated device types a device offers (its mdev_types capability): Nova's VGPU
    resources are counted in these."""
    found = []
    for mdev in capability.findall("type"):
        type_id = mdev.get("id", "")
        if not _MDEV_TYPE.match(type_id):
            raise DeviceXMLError(f"mdev type id {type_id!r} is not a kernel's type name")
        found.append({
            "type": type_id,
            "name": _text(mdev.findtext("name")),
            "device_api": _text(mdev.findtext("deviceAPI")),
            "available_instances": _integer(mdev.findtext("availableInstances"), _MAX_INSTANCES,
                                            f"availableInstances of {type_id}"),
        })
    return sorted(found, key=lambda item: item["type"])


def pci_device(root: ET.Element) -> Optional[Dict[str, Any]]:
    """One node device's ``pci_devices`` entry: name (libvirt's), address, vendor_id, product_id
    (four lower-case hex digits, as Nova's), numa_node (None where the host has no NUMA or does not
    say), dev_type (type-PF with its virtual_functions' addresses, type-VF with its
    parent_address, else type-PCI) and mdev_types ([{type, name, device_api,
    available_instances}]). None for a device that is not PCI; DeviceXMLError where it does not parse."""
    capability = root.find("capability[@type='pci']")
    if capability is None:
        return None
    numa = capability.find("numa")
    numa_node = None
    if numa is not None and numa.get("node") not in (None, "-1"):
        numa_node = _integer(numa.get("node"), 0xFFFF, "NUMA node")
    virtual_functions: List[str] = []
    parent_address = None
    offered: List[Dict[str, Any]] = []
    for inner in capability.findall("capability"):
        kind = inner.get("type")
        if kind == "virt_functions":
            virtual_functions = sorted(pci_address(address, True) for address in inner.findall("address"))
        elif kind == "phys_function":
            address = inner.find("address")
            if address is None:
                raise DeviceXMLError("a virtual function without its physical function's address")
            parent_address = pci_address(address, True)
        elif kind == "mdev_types":
            offered = mdev_types(inner)
    # A PF whose VFs are not enabled lists none, and is still a PF (its capability says so).
    is_pf = capability.find("capability[@type='virt_functions']") is not None
    dev_type = TYPE_VF if parent_address else TYPE_PF if is_pf else TYPE_PCI
    device: Dict[str, Any] = {
        "name": _text(root.findtext("name")),
        "address": pci_address(capability, False),
        "vendor_id": _pci_id(capability.find("vendor"), "vendor"),
        "product_id": _pci_id(capability.find("product"), "product"),
        "numa_node": numa_node,
        "dev_type": dev_type,
        "mdev_types": offered,
    }
    if dev_type == TYPE_PF:
        device["virtual_functions"] = virtual_functions
    if dev_type == TYPE_VF:
        device["parent_address"] = parent_address
    return device


def domain_holdings(root: ET.Element, max_cpus: int = 4096) -> Dict[str, Any]:
    """What a domain's own XML says it holds of its host (for a domain Berth did not make, so
    that no claim takes it): ``pins`` maps each vCPU pinned to exactly one host CPU to that CPU
    (a vCPU free to float over several holds none of them), ``emulator`` the one CPU its
    emulator threads are pinned to, if one, and ``pci`` the addresses of its PCI host devices.
    The XML is a hypervisor's: what does not read as a CPU id or a PCI address is left out."""
    pins: Dict[str, int] = {}
    for pin in root.findall("cputune/vcpupin"):
        cpu = _one_cpu(pin.get("cpuset"), max_cpus)
        vcpu = whole_number(pin.get("vcpu"))
        if cpu is not None and vcpu is not None and vcpu < max_cpus:
            pins[str(vcpu)] = cpu
    emulator = root.find("cputune/emulatorpin")
    emulator_cpu = _one_cpu(emulator.get("cpuset") if emulator is not None else None, max_cpus)
    pci: List[str] = []
    for address in root.findall("devices/hostdev[@type='pci']/source/address"):
        try:
            pci.append(pci_address(address, True))
        except DeviceXMLError:
            continue
    return {"pins": pins, "emulator": emulator_cpu, "pci": sorted(set(pci))}


def _one_cpu(text: Optional[str], max_cpus: int) -> Optional[int]:
    """The CPU id of a cpuset naming exactly one CPU ("5"), else None."""
    cpu = whole_number(text)
    return cpu if cpu is not None and cpu < max_cpus else None
