"""Synthetic hypervisors for the scale benchmarks, entering the ledger the way real ones do.

(And ``test_driver_node``: a hypervisor of libvirt's test driver, for the benchmarks that gather
through real libvirt APIs.)

Each is a set of raw libvirt facts (what Hypervisor.facts() returns: node info, capabilities,
memory, pools, volumes, networks, domains) turned into a host state by host_facts.host_state,
the function the inventory plugin and gather.yml use, and written with the tracker sync
(Ledger.tracker_sync), as gather.yml writes a real hypervisor. Nothing is written to the ledger
by hand. Each has two to four domains that Berth did not make (unmanaged usage rows, as a real
fleet has), a base image in its pool and a libvirt network.

The hosts are deliberately smaller than the lab's hypervisors (fewer free vCPUs, less memory and
disk), so that a launch among them still picks a real lab hypervisor and can build there; every
synthetic host is filtered and weighed all the same.
"""

from __future__ import annotations

import random
import sys
import uuid as uuidlib
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / ".cache" / "collections"))

from ansible_collections.berth.fleet.plugins.module_utils.cpu_sets import parse_cpu_set  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils.host_facts import host_state  # noqa: E402

IMAGE = "debian-12.qcow2"
NETWORK = "default"
_FEATURES = [f"feature{number}" for number in range(60)]  # as long as a real cpu_info's list


def _facts(name: str, rng: random.Random, large: bool) -> dict[str, Any]:
    memory_mb = 524288 if large else rng.choice([8192, 12288, 16384])
    vcpus = 64 if large else 2
    domains = []
    for number in range(rng.randint(2, 4)):
        domains.append({
            "name": f"{name}-vm{number}", "uuid": str(uuidlib.UUID(int=rng.getrandbits(128))), "state": "running",
            "vcpus": 2, "memory_mb": rng.choice([1024, 2048]),
            "disks": [{"path": f"/var/lib/libvirt/images/{name}-vm{number}.qcow2", "capacity_mb": 10240,
                       "pool": "default"}],
            "berth": None,
        })
    return {
        "nodename": name, "uuid": str(uuidlib.UUID(int=rng.getrandbits(128))), "vcpus_total": vcpus,
        "hypervisor_type": "QEMU", "hypervisor_version": 7002000, "libvirt_version": 9000000,
        "cpu_info": {"arch": "x86_64", "model": "EPYC-Rome", "vendor": "AMD", "features": _FEATURES,
                     "topology": {"sockets": 1, "dies": 1, "clusters": 1, "cores": 2, "threads": 1}},
        "numa_topology": {"cells": [{"id": 0, "memory_mb": memory_mb, "cpus": list(range(vcpus))}]},
        "supported_instances": [["x86_64", "qemu", "hvm"], ["x86_64", "kvm", "hvm"]],
        "memory": {"total_mb": memory_mb, "free_mb": memory_mb // 2, "buffers_mb": 128, "cached_mb": 1024},
        "metrics": {"cpu_user_ns": rng.getrandbits(40), "cpu_kernel_ns": rng.getrandbits(36)},
        "memory_source": "libvirt",
        "pools": [{"name": "default", "active": True, "capacity_mb": 2097152 if large else 102400,
                   "allocation_mb": 30720, "available_mb": 71680}],
        "storage_pool": "default", "volumes": [IMAGE], "networks": [NETWORK], "image_refusals": {},
        "domains": domains, "uri_uuid": "",
    }


def numa_facts(facts: dict[str, Any], cells: int = 2, cores_per_cell: int = 8,
               rng: random.Random | None = None, pinned: bool = False) -> dict[str, Any]:
    """``facts`` as a NUMA host's: ``cells`` cells of ``cores_per_cell`` cores with two threads
    each (thread siblings), 4 KiB, 2 MiB and 1 GiB pages on each cell (2 MiB ones reserved at
    boot, as an operator does), and per cell an SR-IOV NIC (a PF with four VFs) and a GPU
    offering two mdev types: what host_capabilities and host_devices record of a real one.
    With ``rng``, the free page counts differ from host to host, as virNodeGetFreePages gives them;
    and with ``pinned`` too, each of the host's domains that Berth did not make has its two vCPUs
    pinned to dedicated CPUs of its own choosing (the tracker records them as unmanaged
    assignments): every host in a state of its own."""
    per_cell = cores_per_cell * 2
    vcpus = cells * per_cell
    memory_mb = facts["memory"]["total_mb"]
    topology, devices = [], []
    for cell in range(cells):
        first = cell * per_cell
        cpus = list(range(first, first + per_cell))
        small_pages = (memory_mb // cells - 2048) * 256
        topology.append({
            "id": cell, "memory_mb": memory_mb // cells, "cpus": cpus,
            "cpu_topology": [{"id": cpu, "socket_id": cell, "die_id": 0, "core_id": (cpu - first) // 2,
                              "siblings": [cpu - (cpu - first) % 2, cpu - (cpu - first) % 2 + 1]} for cpu in cpus],
            "pages": [{"size_kb": 4, "total": small_pages, "free": rng.randint(0, small_pages) if rng else None},
                      {"size_kb": 2048, "total": 1024, "free": rng.randint(512, 1024) if rng else 1024},
                      {"size_kb": 1048576, "total": 0, "free": 0}]})
        bus = 0x3b + cell * 0x40
        pf = f"0000:{bus:02x}:00.0"
        vfs = [f"0000:{bus:02x}:02.{function}" for function in range(4)]
        devices.append({"name": f"pci_0000_{bus:02x}_00_0", "address": pf, "vendor_id": "8086", "product_id": "1572",
                        "numa_node": cell, "dev_type": "type-PF", "mdev_types": [], "virtual_functions": vfs})
        devices += [{"name": "pci_" + vf.replace(":", "_").replace(".", "_"), "address": vf, "vendor_id": "8086",
                     "product_id": "154c", "numa_node": cell, "dev_type": "type-VF", "mdev_types": [],
                     "parent_address": pf} for vf in vfs]
        devices.append({"name": f"pci_0000_{bus + 1:02x}_00_0", "address": f"0000:{bus + 1:02x}:00.0",
                        "vendor_id": "10de", "product_id": "1eb8", "numa_node": cell, "dev_type": "type-PCI",
                        "mdev_types": [{"type": "nvidia-222", "name": "GRID T4-1B", "device_api": "vfio-pci",
                                        "available_instances": 16},
                                       {"type": "nvidia-223", "name": "GRID T4-2B", "device_api": "vfio-pci",
                                        "available_instances": 8}]})
    domains = facts["domains"]
    if pinned and rng is not None:
        dedicated = parse_cpu_set("cpu_dedicated_set", numa_settings(cells, cores_per_cell)["cpu_dedicated_set"])
        chosen = rng.sample(dedicated, 2 * len(domains))
        domains = [{**domain, "holds": {"pins": {"0": chosen[2 * index], "1": chosen[2 * index + 1]},
                                        "emulator": None, "pci": []}} for index, domain in enumerate(domains)]
    return {**facts, "domains": domains, "vcpus_total": vcpus, "numa_topology": {"cells": topology},
            "pci_devices": devices,
            "cpu_info": {**facts["cpu_info"], "topology": {"sockets": cells, "dies": 1, "clusters": 1,
                                                            "cores": cores_per_cell, "threads": 2}}}


# The hardware of synthetic NUMA hosts: (cells, cores per cell), one picked per host.
NUMA_CLASSES = ((2, 8), (2, 16), (4, 8))


def numa_settings(cells: int = 2, cores_per_cell: int = 8) -> dict[str, str]:
    """The CPU sets of a synthetic NUMA host: per cell its first core's threads shared, the rest dedicated."""
    per_cell = cores_per_cell * 2
    shared = [f"{cell * per_cell}-{cell * per_cell + 1}" for cell in range(cells)]
    dedicated = [f"{cell * per_cell + 2}-{cell * per_cell + per_cell - 1}" for cell in range(cells)]
    return {"cpu_shared_set": ",".join(shared), "cpu_dedicated_set": ",".join(dedicated)}


NUMA_SETTINGS = numa_settings()


def host_states(start: int, count: int, seed: int = 12, large: bool = False,
                numa: bool = False, pinned: bool = False) -> Iterator[dict[str, Any]]:
    """Host states of synthetic hypervisors number ``start`` .. ``start + count - 1``; the same
    numbers always give the same hosts. ``large`` ones (64 vCPUs, 512 GiB, 2 TiB of disk) never
    fill up under a benchmark's claims. ``numa`` ones have NUMA cells (two or four, of 8 or 16
    cores: NUMA_CLASSES) with dedicated CPUs, huge pages and PCI devices (numa_facts), ``pinned``
    ones foreign domains pinned to CPUs of their own."""
    for number in range(start, start + count):
        rng = random.Random(seed * 1_000_003 + number)
        name = f"synth{number:06d}"
        facts = _facts(name, rng, large)
        settings: dict[str, str] = {}
        if numa:
            shape = rng.choice(NUMA_CLASSES)
            facts, settings = numa_facts(facts, *shape, rng=rng, pinned=pinned), numa_settings(*shape)
        state = host_state(name, facts, settings, [], "nova")
        # A URI as gather.yml records it; nothing answers there (the benchmark never builds on one).
        state["uri"] = f"qemu+ssh://{name}.invalid/system"
        yield state


def sync(ledger: Any, start: int, count: int, batch: int = 2000, large: bool = False,
         numa: bool = False, pinned: bool = False) -> list[str]:
    """Write synthetic hypervisors ``start`` .. ``start + count - 1`` with the tracker sync;
    returns their names and UUIDs as [(name, uuid)]."""
    written = []
    for first in range(start, start + count, batch):
        states = list(host_states(first, min(batch, start + count - first), large=large, numa=numa,
                                  pinned=pinned))
        ledger.tracker_sync(states)
        written += [(state["host"], state["uuid"]) for state in states]
    return written


def test_driver_node(number: int) -> str:
    """The node file of test-driver hypervisor ``number``: 2 to 16 CPUs, 4 to 24 GiB, zero to three
    domains (running and shut off, each with a UUID of its own that stays put from one sync to
    the next, as a real domain's does), and the instance pool ``default``."""
    cpus = 2 + (number % 8) * 2
    domains = "".join(
        f"""<domain type="test" xmlns:test="http://libvirt.org/schemas/domain/test/1.0"><name>d{number}-{index}</name>
<uuid>{uuidlib.UUID(int=number * 16 + index)}</uuid><memory unit="MiB">{512 * (index + 1)}</memory><vcpu>{index + 1}</vcpu><os><type>hvm</type></os>
<test:runstate>{1 + 4 * (index % 2)}</test:runstate></domain>"""
        for index in range(number % 4))
    return (f"<node><cpu><mhz>2400</mhz><model>Haswell</model><active>{cpus}</active><max>{cpus}</max><nodes>1</nodes>"
            f"<sockets>1</sockets><cores>{cpus // 2}</cores><threads>2</threads></cpu>"
            f"<memory>{4096 * 1024 * (1 + number % 6)}</memory>{domains}"
            "<pool type='dir'><name>default</name><target><path>/p</path></target></pool></node>")
