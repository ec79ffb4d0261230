"""Berth's NUMATopologyFilter and PciPassthroughFilter against a reference written from Nova's rules
(nova_reference.py), on random hosts and requests: NUMA cells of one or two threads per core,
the CPU sets in each of Nova's modes, pages of three sizes with reserved ones, instances pinned
or floating there already, whole devices and PFs with VFs on cells or on none, aliases of each
numa_policy, flavors of every hw: spec Berth reads (including hw:numa_cpus.N without
hw:numa_nodes and guest cells without vCPUs).

For every case, with Nova's quirks that Berth declares it does not copy turned off
(nova_reference.BERTH), the reference and Berth agree on everything: whether the request is
refused, whether each filter passes the host, and where it fits (host cells, pinned CPUs, page
sizes, the emulator's CPU, the devices' pools); the vectorised path decides as host by host.
The reference differs from Nova's code as it is (nova_reference.NOVA) in those switches only, so
every case where Nova answers otherwise is one of the declared differences
(docs/docsite/rst/numa.rst, "Where Berth differs"); the test names the quirk (or the two) that
makes each, and each shows in some case."""
from __future__ import annotations

import collections
import copy
import itertools
import random
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from ansible_collections.berth.fleet.plugins.module_utils.scheduler import assignment
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import SchedulerInputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.numa_topology import NUMATopologyFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.pci_passthrough import (
    PciPassthroughFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec

from . import nova_reference as nova
from ._builders import make_host

CASES = 3000
SEED = 38
SMALL, HUGE_2M, HUGE_1G = 4, 2048, 1048576
PRODUCTS = [("10de", "1eb8"), ("10de", "1db4"), ("8086", "154c"), ("8086", "1572")]


# ---- random hosts ---------------------------------------------------------------------------

def random_topology(rng: random.Random) -> dict[str, Any]:
    cells_count = rng.choice([1, 2, 2, 2, 3, 4])
    threads = rng.choice([1, 2])
    cores = rng.choice([1, 2, 3, 3, 4, 4])
    apart = threads == 2 and rng.random() < 0.3  # siblings numbered cores apart (0 and 2, 1 and 3)
    cells_per_socket = rng.choice([1, 2])
    cells = []
    for cell_id in range(cells_count):
        first = cell_id * cores * threads
        ids = list(range(first, first + cores * threads))

        def core_of(cpu: int) -> int:
            return (cpu - first) % cores if apart else (cpu - first) // threads

        socket = cell_id // cells_per_socket
        cpu_topology = [{"id": cpu, "socket_id": socket, "die_id": 0, "core_id": core_of(cpu),
                         "siblings": [other for other in ids if core_of(other) == core_of(cpu)]} for cpu in ids]
        if rng.random() < 0.05:
            cpu_topology[0]["socket_id"] = socket + 9  # a cell on two sockets: its socket is unknown
        memory_mb = rng.choice([1024, 2048, 4096])
        huge_2m = rng.choice([0, memory_mb // 8, memory_mb // 4])  # pages: up to half the memory
        huge_1g = rng.choice([0, 0, 1]) if memory_mb >= 4096 else 0
        small = (memory_mb - 2 * huge_2m - 1024 * huge_1g) * 256
        pages = [{"size_kb": SMALL, "total": small}, {"size_kb": HUGE_2M, "total": huge_2m}]
        if huge_1g or rng.random() < 0.3:
            pages.append({"size_kb": HUGE_1G, "total": huge_1g})
        cells.append({"id": cell_id, "memory_mb": memory_mb, "cpus": ids, "cpu_topology": cpu_topology,
                      "pages": pages})
    everything = [cpu for cell in cells for cpu in cell["cpus"]]
    mode = rng.choice(["legacy", "legacy", "legacy", "both", "both", "both", "dedicated", "shared"])
    shared = dedicated = None
    if mode == "both":
        kinds = {cpu: rng.choices(["shared", "dedicated", "neither"], [4, 5, 1])[0] for cpu in everything}
        shared = [cpu for cpu in everything if kinds[cpu] == "shared"] or None
        dedicated = [cpu for cpu in everything if kinds[cpu] == "dedicated"] or None
    elif mode == "dedicated":
        dedicated = everything
    elif mode == "shared":
        shared = everything
    reserved = {}
    for cell in cells:
        huge = cell["pages"][1]["total"]
        if huge and rng.random() < 0.3:
            reserved[str(cell["id"])] = {"2048": rng.randint(1, huge)}
    return {"cells": cells, "cpu_dedicated_set": dedicated, "cpu_shared_set": shared,
            **({"reserved_pages": reserved} if reserved else {})}


def random_devices(rng: random.Random, cells: int) -> list[dict[str, Any]]:
    nodes = list(range(cells)) + [None]
    devices = []
    for index in range(rng.randint(0, 3)):
        vendor, product = rng.choice(PRODUCTS[:2])
        devices.append({"name": f"gpu{index}", "address": f"0000:{0x81 + index:02x}:00.0", "vendor_id": vendor,
                        "product_id": product, "numa_node": rng.choice(nodes), "dev_type": "type-PCI",
                        "mdev_types": []})
    for index in range(rng.randint(0, 2)):
        node, bus = rng.choice(nodes), 0x3b + index
        vfs = [f"0000:{bus:02x}:02.{number}" for number in range(rng.randint(1, 3))]
        vf_product = "1572" if rng.random() < 0.4 else "154c"  # a PF and its VFs may share ids
        devices.append({"name": f"pf{index}", "address": f"0000:{bus:02x}:00.0", "vendor_id": "8086",
                        "product_id": "1572", "numa_node": node, "dev_type": "type-PF", "mdev_types": [],
                        "virtual_functions": vfs})
        devices += [{"name": f"vf{index}{number}", "address": address, "vendor_id": "8086",
                     "product_id": vf_product, "numa_node": node, "dev_type": "type-VF", "mdev_types": [],
                     "parent_address": f"0000:{bus:02x}:00.0"} for number, address in enumerate(vfs)]
    return devices


def random_aliases(rng: random.Random, devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Aliases of each policy, mostly naming the ids (and often the type) of a device the host has."""
    aliases = []
    for name in ("a0", "a1", "a2")[:rng.randint(1, 3)]:
        policy = rng.choice([None, "required", "legacy", "preferred", "socket"])
        entries = rng.choice([1, 1, 1, 2])
        kind = rng.choice([None, "type-PCI", "type-PF", "type-VF"] if entries == 1 else ["type-PCI", "type-VF"])
        products = rng.sample(PRODUCTS, entries)
        if devices and entries == 1 and rng.random() < 0.7:
            device = rng.choice(devices)
            products = [(device["vendor_id"], device["product_id"])]
            kind = rng.choice([None, None, device["dev_type"]])
        for vendor, product in products:
            alias = {"name": name, "vendor_id": vendor, "product_id": product}
            alias.update({"device_type": kind} if kind else {}, **({"numa_policy": policy} if policy else {}))
            aliases.append(alias)
    return aliases


# ---- random requests ------------------------------------------------------------------------

def random_request(rng: random.Random, aliases: list[dict[str, Any]]) -> tuple[int, int, dict, dict]:
    """(vcpus, memory_mb, flavor extra specs, image properties)."""
    vcpus, memory_mb = rng.randint(1, 4), rng.choice([256, 512, 512, 1024, 2048])
    specs: dict[str, str] = {}
    image: dict[str, str] = {}
    policy = rng.choice([None, None, "shared", "dedicated", "dedicated", "mixed"])
    if policy == "mixed" and vcpus == 1:
        policy = "dedicated"
    if policy:
        specs["hw:cpu_policy"] = policy
    if policy == "mixed":
        dedicated = rng.sample(range(vcpus), rng.randint(1, vcpus - 1))
        specs["hw:cpu_dedicated_mask"] = ",".join(map(str, sorted(dedicated)))
    if policy in ("dedicated", "mixed"):
        thread = rng.choice([None, None, "prefer", "require", "isolate"])
        if thread:
            specs["hw:cpu_thread_policy"] = thread
        emulator = rng.choice([None, None, "share", "isolate"])
        if emulator:
            specs["hw:emulator_threads_policy"] = emulator
    page = rng.choice([None, None, None, "small", "large", "large", "any", "any", "2048", "1048576"])
    if page:
        specs["hw:mem_page_size"] = page
    nodes = rng.choice([None, None, None, 1, 2, 2, 3])
    if nodes and rng.random() < 0.2:
        image["hw_numa_nodes"] = str(nodes)
    elif nodes:
        specs["hw:numa_nodes"] = str(nodes)
    manual = nodes or 1
    if rng.random() < (0.3 if nodes else 0.08):
        # Each vCPU into a random cell (some maybe none: a cell of memory only), memory split.
        cells = [[] for _node in range(manual)]
        for vcpu in range(vcpus):
            cells[rng.randrange(manual)].append(vcpu)
        memory_mb = 256 * manual * rng.choice([1, 2])
        for node, cpus in enumerate(cells):
            specs[f"hw:numa_cpus.{node}"] = ",".join(map(str, cpus))
            specs[f"hw:numa_mem.{node}"] = str(memory_mb // manual)
    if rng.random() < 0.5:
        names = sorted({alias["name"] for alias in aliases})
        asked = [rng.choice(names) for _item in range(rng.randint(1, 2))]  # an alias twice too, as Nova takes it
        specs["pci_passthrough:alias"] = ",".join(f"{name}:{rng.randint(1, 2)}" for name in asked)
        if rng.random() < 0.15:
            specs["hw:pci_numa_affinity_policy"] = rng.choice(["required", "legacy", "preferred", "socket"])
    return vcpus, memory_mb, specs, image


def berth_spec(vcpus: int, memory_mb: int, specs: dict, image: dict, aliases: list) -> RequestSpec:
    flavor = Flavor(name="random", vcpus=vcpus, memory_mb=memory_mb, root_gb=1, extra_specs=specs)
    return RequestSpec(flavor=flavor, image_properties=image, pci_alias=aliases,
                       enabled_filters=["NUMATopologyFilter", "PciPassthroughFilter"])


def random_case(rng: random.Random) -> dict[str, Any]:
    topology = random_topology(rng)
    devices = random_devices(rng, len(topology["cells"]))
    aliases = random_aliases(rng, devices)
    ratios = (rng.choice([1.0, 2.0, 4.0]), rng.choice([1.0, 1.5]))
    host = make_host(numa_topology=topology, pci_devices=devices, cpu_allocation_ratio=ratios[0],
                     ram_allocation_ratio=ratios[1])
    # Instances there already, placed as the scheduler places them (assignment.take).
    for _instance in range(rng.randint(0, 2)):
        try:
            spec = berth_spec(*random_request(rng, aliases), aliases)
        except SchedulerInputError:
            continue
        assignment.take(host, assignment.of_spec(spec))
    return {"topology": topology, "devices": devices, "aliases": aliases, "ratios": ratios,
            "held": list(host.assignments), "request": random_request(rng, aliases), "host": host}


# ---- the two answers ------------------------------------------------------------------------

def berth_answer(case: dict[str, Any]) -> tuple:
    """(refused, NUMA filter passes, PCI filter passes, where it fits) by Berth."""
    try:
        spec = berth_spec(*case["request"], case["aliases"])
    except SchedulerInputError:
        return ("refused",)
    host = case["host"]
    numa_passes = NUMATopologyFilter().host_passes(host, spec) is None
    pci_passes = PciPassthroughFilter().host_passes(host, spec) is None
    placed = None
    if spec.numa is not None:
        fitted = assignment.fit(host, assignment.of_spec(spec))[0]
        if fitted is not None:
            by_address = {device["address"]: device for device in case["devices"]}
            numa = fitted["numa"]
            placed = ([(cell["host_cell"], {int(vcpu): cpu for vcpu, cpu in cell["pinning"].items()},
                        cell["page_size_kb"]) for cell in numa["cells"]],
                      sorted(numa["emulator_cpus"]) if numa["emulator_isolated"] else None,
                      collections.Counter(_pool_key(by_address[device["address"]]) for device in fitted.get("pci", [])))
    assert numa_passes == (spec.numa is None or placed is not None)
    return ("ok", numa_passes, pci_passes, placed)


def _pool_key(device: dict[str, Any]) -> tuple:
    return (device["vendor_id"], device["product_id"], device["numa_node"], device["dev_type"],
            device.get("parent_address") or device["address"])


def nova_answer(case: dict[str, Any], quirks: nova.Quirks) -> tuple:
    vcpus, memory_mb, specs, image = case["request"]
    try:
        instance = nova.constraints(vcpus, memory_mb, specs, image)
    except nova.Invalid:
        return ("refused",)
    requests = []
    policy = specs.get("hw:pci_numa_affinity_policy")
    for item in filter(None, specs.get("pci_passthrough:alias", "").split(",")):
        name, count = item.split(":")
        entries = [alias for alias in case["aliases"] if alias["name"] == name]
        requests.append(nova.DeviceAsk(tuple((entry["vendor_id"], entry["product_id"], entry.get("device_type"))
                                             for entry in entries), int(count),
                                       policy or entries[0].get("numa_policy")))
    cells = nova.host_cells(case["topology"])
    nova.count_usage(cells, case["held"])
    stats = nova.Pools(case["devices"], case["aliases"], case["held"])
    pci_passes = not requests or stats.copy().apply(requests, None, cells, quirks) is not None
    if instance is None:
        return ("ok", True, pci_passes, None)
    if (specs.get("hw:cpu_policy") == "dedicated" and specs.get("hw:cpu_thread_policy") == "require"
            and not any(len(core) > 1 for cell in cells for core in cell.siblings)):
        return ("ok", False, pci_passes, None)  # NUMATopologyFilter._satisfies_cpu_policy
    fitted = nova.fit_to_host(cells, copy.deepcopy(instance), *case["ratios"], requests, stats, quirks)
    if fitted is None:
        return ("ok", False, pci_passes, None)
    guest_cells, host_ids, taken = fitted
    smallest = {cell.id: min(pages.size_kb for pages in cell.mempages) for cell in cells}
    placed = ([(host_id, dict(cell.cpu_pinning),
                None if cell.pagesize in (None, smallest[host_id]) else cell.pagesize)
               for host_id, cell in zip(host_ids, guest_cells)],
              sorted(guest_cells[0].cpuset_reserved) if guest_cells[0].cpuset_reserved else None,
              collections.Counter(_summed(taken)))
    return ("ok", True, pci_passes, placed)


def _summed(taken: list) -> dict:
    total: dict = {}
    for key, count in taken:
        total[key] = total.get(key, 0) + count
    return total


# ---- the test -------------------------------------------------------------------------------

def test_berth_decides_as_nova_s_rules_but_for_the_declared_differences():
    rng = random.Random(SEED)
    explained: collections.Counter = collections.Counter()
    crashes = skipped = fits = 0
    for number in range(CASES):
        case = random_case(rng)
        berth = berth_answer(case)
        try:
            expected = nova_answer(case, nova.BERTH)
            as_nova = nova_answer(case, nova.NOVA)
        except nova.NovaCrash:
            crashes += 1
            continue
        assert berth == expected, (number, case["request"], case["topology"], case["devices"], case["aliases"])
        fits += berth[0] == "ok" and bool(berth[1])
        if as_nova != berth:
            explained.update(_quirks_making(case, berth))
    # The cases are varied enough to say something: most are decided, many fit, and each
    # declared difference shows.
    assert crashes < CASES // 100 and fits > CASES // 8, (crashes, fits)
    assert set(explained) >= set(nova.Quirks.__dataclass_fields__), explained


def _quirks_making(case: dict[str, Any], berth: tuple) -> list[str]:
    """The quirks that, each turned on alone (else two together), make the reference answer
    otherwise than Berth."""
    names = list(nova.Quirks.__dataclass_fields__)
    for size in (1, 2):
        found = [" + ".join(group) for group in itertools.combinations(names, size)
                 if nova_answer(case, nova.Quirks(**{**vars(nova.BERTH), **dict.fromkeys(group, True)})) != berth]
        if found:
            return found if size == 1 else [name for group in found for name in group.split(" + ")]
    return ["more than two quirks together"]


def test_the_vectorised_filters_decide_as_host_by_host_on_random_hosts():
    """NUMATopologyFilter and PciPassthroughFilter over columns (assignment.per_state), hosts
    sharing their facts' objects and holding different instances, as the ledger's read gives
    them, against each host's host_passes."""
    rng = random.Random(SEED + 1)
    for _number in range(150):
        case = random_case(rng)
        try:
            spec = berth_spec(*case["request"], case["aliases"])
        except SchedulerInputError:
            continue
        busy = case["host"]
        hosts = [busy, make_host("hv2", numa_topology=busy.numa_topology, pci_devices=busy.pci_devices,
                                 cpu_allocation_ratio=busy.cpu_allocation_ratio,
                                 ram_allocation_ratio=busy.ram_allocation_ratio), busy.copy()]
        columns = SimpleNamespace(numa_topology=[host.numa_topology for host in hosts],
                                  pci_devices=[host.pci_devices for host in hosts],
                                  assignments=[host.assignments for host in hosts],
                                  cpu_allocation_ratio=np.array([host.cpu_allocation_ratio for host in hosts]),
                                  ram_allocation_ratio=np.array([host.ram_allocation_ratio for host in hosts]))
        for host_filter in (NUMATopologyFilter(), PciPassthroughFilter()):
            rejected = np.zeros(len(hosts), dtype=bool)
            for _reason, _resource, _requested, mask, _free in host_filter.vector_rejects(columns, spec):
                rejected |= mask
            assert rejected.tolist() == [host_filter.host_passes(host, spec) is not None for host in hosts]


@pytest.mark.parametrize("quirk", list(nova.Quirks.__dataclass_fields__))
def test_each_declared_quirk_is_listed_in_numa_rst(quirk):
    """numa.rst's "Where Berth differs" names each quirk the reference switches (by its name in
    a comment-free way: the words of the bullet)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[5] / "docs" / "docsite" / "rst" / "numa.rst").read_text()
    assert QUIRK_WORDS[quirk] in text, quirk


# The words numa.rst says each declared quirk with.
QUIRK_WORDS = {
    "carry_page_size": "carries the page size it chose",
    "stale_cells": "keys the pairs it tried by the guest cell's id",
    "pack_empty_cells": "a guest cell without dedicated vCPUs",
    "pfs_counted_for_numa": "before it drops the PFs",
    "no_dependents_within_request": "leaves its PF free for the next alias",
    "pool_order": "takes the devices in its pools' order",
}
