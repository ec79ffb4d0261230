"""What an instance's assignment (docs/docsite/rst/numa.rst: its pinned CPUs, guest NUMA cells on
host cells, page sizes, PCI devices and mediated devices) puts in its domain XML, as Nova's
libvirt driver writes it: the domain template's ``assignment`` context. Private to the
collection. Pure: no libvirt, no Ansible.

The assignment comes from the ledger, which is not trusted: every value is checked here (integers
are integers in range, a PCI address is one, the cells cover the flavor's vCPUs and memory), and
anything else is refused naming its field, before the template sees it.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils.cpu_sets import MAX_CPU_ID, format_cpu_set
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError

# x86's base page: a cell backed by it asks for no huge pages (libvirt refuses it as a
# hugepage size, and Nova's driver leaves the smallest size out for that reason).
SMALL_PAGE_KB = 4
# 1 GiB is the largest page x86 offers; other architectures' sizes are powers of two below it.
MAX_PAGE_KB = 1024 * 1024
# Linux's largest NUMA node id (CONFIG_NODES_SHIFT 10).
MAX_HOST_CELL = 1023
# A domain's memory limit, as the flavor's own check holds it (4 TiB per cell is plenty).
MAX_CELL_MEMORY_MB = 4 * 1024 * 1024
# "0000:81:00.2": PCI domain, bus, slot (device) and function, in hex, as host_devices records
# them and sysfs names the device. Slot is 5 bits, function 3.
_PCI_ADDRESS = re.compile(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
MAX_PCI_SLOT = 0x1F
# The namespace of the UUIDs Berth gives an instance's mediated devices (mdev_uuid).
_MDEV_NAMESPACE = uuid.UUID("5b0e6f3c-2d4a-5e1b-9c7d-8a6f4e3b2c10")


def mdev_uuid(instance_uuid: str, index: int) -> str:
    """The UUID of the ``index``-th mediated device of an instance: the same on every build, so
    that the device made for it on its host (mdevctl, virNodeDeviceCreateXML) is found again, and
    a sync can tell whose it is."""
    return str(uuid.uuid5(_MDEV_NAMESPACE, f"{instance_uuid}/{index}"))


def _integer(field: str, value: Any, minimum: int, maximum: int) -> int:
    # JSON has no integer type of its own: True and 2.0 are not CPU ids.
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise InputError(field, f"{field} must be an integer from {minimum} to {maximum}, got {value!r}")
    return value


def _integers(field: str, value: Any, minimum: int, maximum: int) -> list[int]:
    if not isinstance(value, (list, tuple)):
        raise InputError(field, f"{field} must be a list of integers, got {value!r}")
    numbers = [_integer(f"{field}[{index}]", item, minimum, maximum) for index, item in enumerate(value)]
    if len(set(numbers)) != len(numbers):
        raise InputError(field, f"{field} names an id twice: {numbers!r}")
    return numbers


def _mapping(field: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InputError(field, f"{field} must be a mapping, got {value!r}")
    return value


def _list(field: str, value: Any) -> Sequence[Any]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise InputError(field, f"{field} must be a list, got {value!r}")
    return value


def pci_source_address(field: str, address: Any) -> dict[str, str]:
    """A PCI address ("0000:81:00.2") as libvirt's <source><address> takes it: domain, bus, slot
    and function in hex. InputError naming ``field`` for anything that is not one."""
    match = _PCI_ADDRESS.match(address) if isinstance(address, str) else None
    if not match or int(match.group(3), 16) > MAX_PCI_SLOT:
        raise InputError(field, f"{field} is not a PCI address such as 0000:81:00.2 (domain:bus:slot.function, "
                                f"hex): {address!r}")
    domain, bus, slot, function = (int(part, 16) for part in match.groups())
    return {"domain": f"0x{domain:04x}", "bus": f"0x{bus:02x}", "slot": f"0x{slot:02x}", "function": f"0x{function:x}"}


def _cells(numa: Mapping[str, Any], vcpus: int, memory_mb: int) -> list[dict[str, Any]]:
    """The guest cells, checked: ids 0..n-1 in order (libvirt's), on host cells, covering every
    vCPU of the flavor once and its memory exactly; each vCPU pinned or floating over a cpuset."""
    cells = _list("assignment.numa.cells", numa.get("cells"))
    if not cells:
        raise InputError("assignment.numa.cells", "assignment.numa.cells must list at least one guest cell")
    checked: list[dict[str, Any]] = []
    seen_vcpus: list[int] = []
    total_mb = 0
    for index, raw in enumerate(cells):
        field = f"assignment.numa.cells[{index}]"
        cell = _mapping(field, raw)
        if _integer(f"{field}.id", cell.get("id"), 0, len(cells) - 1) != index:
            raise InputError(f"{field}.id", f"{field}.id must be {index}: guest cells are listed in id order")
        # A cell may hold memory and no vCPU (hw:numa_cpus.N of none, as Nova allows).
        cell_vcpus = _integers(f"{field}.vcpus", cell.get("vcpus"), 0, vcpus - 1)
        page_size_kb = cell.get("page_size_kb")
        if page_size_kb is not None:
            _integer(f"{field}.page_size_kb", page_size_kb, SMALL_PAGE_KB, MAX_PAGE_KB)
            if page_size_kb & (page_size_kb - 1):
                raise InputError(f"{field}.page_size_kb", f"{field}.page_size_kb must be a power of two, "
                                                          f"got {page_size_kb}")
        pinning_raw = _mapping(f"{field}.pinning", cell.get("pinning") or {})
        pinning: dict[int, int] = {}
        for key, host_cpu in pinning_raw.items():
            vcpu = int(key) if isinstance(key, str) and key.isdigit() else key
            if vcpu not in cell_vcpus:
                raise InputError(f"{field}.pinning", f"{field}.pinning pins vCPU {key!r}, which is not one of the "
                                                     f"cell's vcpus {cell_vcpus}")
            pinning[vcpu] = _integer(f"{field}.pinning.{key}", host_cpu, 0, MAX_CPU_ID)
        cpuset = _integers(f"{field}.cpuset", cell.get("cpuset") or [], 0, MAX_CPU_ID)
        floating = [vcpu for vcpu in cell_vcpus if vcpu not in pinning]
        if floating and not cpuset:
            raise InputError(f"{field}.cpuset", f"{field} pins no host CPU for vCPU(s) {floating} and gives no "
                                                f"cpuset for them to float over")
        memory = _integer(f"{field}.memory_mb", cell.get("memory_mb"), 0, MAX_CELL_MEMORY_MB)
        total_mb += memory
        seen_vcpus += cell_vcpus
        host_cell = _integer(f"{field}.host_cell", cell.get("host_cell"), 0, MAX_HOST_CELL)
        checked.append({"id": index, "host_cell": host_cell,
                        "vcpus": sorted(cell_vcpus), "memory_mb": memory, "page_size_kb": page_size_kb,
                        "pinning": pinning, "cpuset": sorted(cpuset)})
    if sorted(seen_vcpus) != list(range(vcpus)):
        raise InputError("assignment.numa.cells", f"the guest cells' vcpus must cover the flavor's {vcpus} vCPU(s) "
                                                  f"0-{vcpus - 1} once each, got {sorted(seen_vcpus)}")
    if total_mb != memory_mb:
        raise InputError("assignment.numa.cells", f"the guest cells' memory_mb add up to {total_mb}, not the "
                                                  f"flavor's memory_mb {memory_mb}")
    return checked


def _numa(numa: Mapping[str, Any], vcpus: int, memory_mb: int) -> dict[str, Any]:
    cells = _cells(numa, vcpus, memory_mb)
    pins = []
    for cell in cells:
        for vcpu in cell["vcpus"]:
            pinned = cell["pinning"].get(vcpu)
            pins.append({"vcpu": vcpu, "cpus": [pinned] if pinned is not None else cell["cpuset"]})
    pins.sort(key=lambda pin: pin["vcpu"])
    emulator = _integers("assignment.numa.emulator_cpus", numa.get("emulator_cpus") or [], 0, MAX_CPU_ID)
    if not emulator:
        # Nova's default: the emulator threads float over every host CPU of the guest's vCPUs.
        emulator = sorted({cpu for pin in pins for cpu in pin["cpus"]})
    # The guest's memory is file backed where it sits in huge pages: marked shared (Nova's
    # driver always does, so that a vhost-user NIC can be added later; it cannot be changed
    # on a running guest).
    huge = any(cell["page_size_kb"] and cell["page_size_kb"] > SMALL_PAGE_KB for cell in cells)
    return {
        "cells": [{"id": cell["id"], "cpus": format_cpu_set(cell["vcpus"]), "memory_mb": cell["memory_mb"],
                   "memory_access": "shared" if huge else None} for cell in cells],
        "vcpupins": [{"vcpu": pin["vcpu"], "cpuset": format_cpu_set(pin["cpus"])} for pin in pins],
        "emulator_cpuset": format_cpu_set(emulator),
        "nodeset": format_cpu_set(cell["host_cell"] for cell in cells),
        "memnodes": [{"cellid": cell["id"], "nodeset": str(cell["host_cell"])} for cell in cells],
        # Nova's page nodeset is the guest cell (libvirt's <page nodeset> counts guest nodes).
        "pages": [{"size_kb": cell["page_size_kb"], "nodeset": str(cell["id"])} for cell in cells
                  if cell["page_size_kb"] and cell["page_size_kb"] > SMALL_PAGE_KB],
    }


def shared_cpuset(value: Any) -> str | None:
    """A host's recorded ``cpu_shared_set`` (the ledger's, not trusted) as range text, None where
    it has none; InputError naming ``cpu_shared_set`` for anything that is not a list of CPU ids."""
    if value is None:
        return None
    cpus = _integers("cpu_shared_set", value, 0, MAX_CPU_ID)
    return format_cpu_set(cpus) if cpus else None


def assignment_context(assignment: Any, vcpus: int, memory_mb: int,
                       mdev_uuids: Sequence[str] = (), shared_cpus: Any = None) -> dict[str, Any]:
    """The domain template's ``assignment`` from an instance's assignment (None: none) for a flavor
    of ``vcpus`` and ``memory_mb``: ``numa`` (None without guest cells: cells, vcpupins,
    emulator_cpuset, nodeset, memnodes, pages), ``pci`` (source addresses), ``mdevs`` (one
    {uuid} per mediated device, from ``mdev_uuids``, one per assignment mdev) and
    ``vcpu_cpuset``: for a guest without guest cells on a host with a ``cpu_shared_set``
    (``shared_cpus``), those CPUs, as Nova's libvirt driver keeps its vCPUs (and so, libvirt's
    default, its emulator threads) off the dedicated ones; else None. Every CPU set is range
    text ("0-3,6"). InputError naming the assignment's field for anything it cannot be."""
    if assignment is None:
        return {"numa": None, "pci": [], "mdevs": [], "vcpu_cpuset": shared_cpuset(shared_cpus)}
    assignment = _mapping("assignment", assignment)
    numa = assignment.get("numa")
    pci = [pci_source_address(f"assignment.pci[{index}].address",
                              _mapping(f"assignment.pci[{index}]", device).get("address"))
           for index, device in enumerate(_list("assignment.pci", assignment.get("pci")))]
    if len(set(map(str, pci))) != len(pci):
        raise InputError("assignment.pci", "assignment.pci names a device twice")
    mdevs = _list("assignment.mdevs", assignment.get("mdevs"))
    for index, mdev in enumerate(mdevs):
        _mapping(f"assignment.mdevs[{index}]", mdev)
    if len(mdev_uuids) != len(mdevs):
        raise InputError("assignment.mdevs", f"{len(mdevs)} mediated device(s) but {len(mdev_uuids)} UUID(s) for them")
    return {
        "numa": _numa(_mapping("assignment.numa", numa), vcpus, memory_mb) if numa is not None else None,
        "pci": pci,
        "mdevs": [{"uuid": str(uuid.UUID(value))} for value in mdev_uuids],
        # A guest with cells has each vCPU pinned or floating over its cell's CPUs already.
        "vcpu_cpuset": shared_cpuset(shared_cpus) if numa is None else None,
    }
