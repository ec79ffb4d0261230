"""A reference for Berth's NUMA and PCI fitting, written for the tests from Nova's rules (openstack/nova:
nova/virt/hardware.py numa_get_constraints, numa_fit_instance_to_host, _numa_fit_instance_cell,
_numa_cell_supports_pagesize_request, _pack_instance_onto_cores, numa_usage_from_instance_numa;
nova/objects/numa.py NUMACell; nova/pci/stats.py PciDeviceStats._filter_pools and its steps,
support_requests, apply_requests; nova/virt/libvirt/driver.py _get_host_numa_topology;
nova/scheduler/filters/numa_topology_filter.py and pci_passthrough_filter.py).

It keeps Nova's structure (host cells with cpuset, pcpuset, siblings, pinned CPUs and counted
usage; PCI pools of counted devices; the permutation loop with its fit caches) rather than
Berth's, so that the differential test compares two independent readings of the same rules.

``Quirks`` switches each behaviour of Nova that Berth declares it does not copy
(docs/docsite/rst/numa.rst, "Where Berth differs"): all on, the reference answers as Nova's code
does; all off, as Berth decides. The differential test asserts that Berth agrees with the
reference with all of them off on every case, and that every case where Nova's answer differs
from Berth's is one where a declared quirk changes the answer.

Where Nova itself crashes (``max()`` of a cell without usable CPUs in _pack_instance_onto_cores)
the reference raises NovaCrash, and the test leaves the case out. Two choices of the reference
are not Nova's code to the letter: thread siblings are listed in ascending order (Nova's is the
iteration order of a set of tuples; its own unit tests list them ascending), and usage reading
an isolate instance whose held sibling is already pinned unions (Nova's pin_cpus raises there).
"""
from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence


class NovaCrash(Exception):
    """Nova's own code raises on this input (not a refusal: an exception from the filter)."""


class Invalid(Exception):
    """Nova refuses the flavor and image (an exception of numa_get_constraints)."""


@dataclass(frozen=True)
class Quirks:
    """Nova's behaviours Berth declares it does not copy, each on as Nova has it."""

    # _numa_fit_instance_cell stores the page size it chose for large/any/small on the instance
    # cell, which later attempts of that cell on other host cells then ask for exactly.
    carry_page_size: bool = True
    # numa_fit_instance_to_host's fit cache appends the instance cell object as it is, with the
    # pinning and page size of the last host cell it was tried on.
    stale_cells: bool = True
    # _numa_fit_instance_cell packs a dedicated or mixed cell onto cores even without dedicated
    # vCPUs: require and isolate then need free sibling cores, and an isolated emulator thread
    # on it finds no pinning to go after.
    pack_empty_cells: bool = True
    # _filter_pools applies the NUMA policy before it drops the PFs an untyped alias matches.
    pfs_counted_for_numa: bool = True
    # The scheduler's apply_requests takes devices off their pools without their dependents: a
    # VF taken for one alias leaves its PF free for the next alias of the same request.
    no_dependents_within_request: bool = True
    # Devices are taken from the pools in pool order (by address); Berth takes those on the
    # instance's cells first (then without a node, then the others), then by address.
    pool_order: bool = True


NOVA = Quirks()
BERTH = Quirks(**{name: False for name in Quirks.__dataclass_fields__})


# ---- the host, as Nova's libvirt driver reports it ---------------------------------------------

@dataclass
class Pages:
    size_kb: int
    total: int
    reserved: int = 0
    used: float = 0

    @property
    def free(self) -> float:
        return self.total - self.used - self.reserved


@dataclass
class HostCell:
    id: int
    cpuset: set
    pcpuset: set
    memory: int
    siblings: list
    mempages: list
    socket: Optional[int]
    cpu_usage: int = 0
    memory_usage: int = 0
    pinned_cpus: set = field(default_factory=set)

    @property
    def free_pcpus(self) -> set:
        return self.pcpuset - self.pinned_cpus

    @property
    def free_siblings(self) -> list:
        return [core & self.free_pcpus for core in self.siblings]

    @property
    def avail_memory(self) -> int:
        return self.memory - self.memory_usage

    def can_fit_pagesize(self, size_kb: int, memory_kb: int, use_free: bool = True) -> bool:
        for pages in self.mempages:
            if pages.size_kb == size_kb:
                room = pages.free * size_kb if use_free else pages.total * size_kb
                return memory_kb <= room and memory_kb % size_kb == 0
        raise PageSizeNotSupported()


class PageSizeNotSupported(Exception):
    pass


def host_cells(topology: Mapping[str, Any]) -> list[HostCell]:
    """_get_host_numa_topology: cpuset (shared) and pcpuset (dedicated) from the CPU sets,
    Nova's legacy fallback where neither is set; siblings cut to the usable CPUs; the socket
    where all the cell's CPUs share one."""
    shared_set, dedicated_set = topology.get("cpu_shared_set"), topology.get("cpu_dedicated_set")
    reserved = topology.get("reserved_pages") or {}
    cells = []
    for cell in topology.get("cells") or []:
        cpus = set(cell["cpus"])
        if shared_set is None and dedicated_set is None:
            shared, dedicated = set(cpus), set(cpus)
        else:
            shared, dedicated = cpus & set(shared_set or ()), cpus & set(dedicated_set or ())
        usable = shared | dedicated
        # Cut to the usable CPUs, then in ascending order (see the module's docstring).
        siblings = [set(core) for core in sorted({tuple(sorted(set(item["siblings"]) & usable))
                                                  for item in cell["cpu_topology"]})]
        sockets = {item["socket_id"] for item in cell["cpu_topology"]}
        cell_reserved = reserved.get(str(cell["id"]), {})
        cells.append(HostCell(
            id=cell["id"], cpuset=shared, pcpuset=dedicated, memory=cell["memory_mb"],
            siblings=[core for core in siblings if core],
            mempages=[Pages(page["size_kb"], page["total"], int(cell_reserved.get(str(page["size_kb"]), 0)))
                      for page in cell["pages"]],
            socket=sockets.pop() if len(sockets) == 1 else None))
    return cells


def count_usage(cells: list[HostCell], assignments: Sequence[Mapping[str, Any]]) -> None:
    """numa_usage_from_instance_numa for each instance's recorded assignment."""
    by_id = {cell.id: cell for cell in cells}
    for assignment in assignments:
        numa = (assignment or {}).get("numa")
        if not numa:
            continue
        isolate = numa.get("cpu_thread_policy") == "isolate"
        for index, guest_cell in enumerate(numa["cells"]):
            cell = by_id[guest_cell["host_cell"]]
            pinning = {int(cpu) for cpu in guest_cell["pinning"].values()}
            cell.memory_usage += guest_cell["memory_mb"]
            cell.cpu_usage += len(guest_cell["vcpus"]) - len(guest_cell["pinning"])
            size_kb = guest_cell["page_size_kb"] or min(pages.size_kb for pages in cell.mempages)
            for pages in cell.mempages:
                if pages.size_kb == size_kb:
                    pages.used = max(0, pages.used + guest_cell["memory_mb"] * 1024 / size_kb)
            if numa["cpu_policy"] == "shared":
                continue
            if index == 0 and numa["emulator_isolated"]:
                pinning |= set(numa["emulator_cpus"])  # the instance cell 0's cpuset_reserved
            if isolate:
                pinning = pinning.union(*(core for core in cell.siblings if core & pinning))
            cell.pinned_cpus |= pinning


# ---- the request, as numa_get_constraints reads it ---------------------------------------------

@dataclass
class InstanceCell:
    id: int
    cpuset: set  # shared vCPUs
    pcpuset: set  # dedicated vCPUs
    memory: int
    pagesize: Any = None  # None, "small", "large", "any" or KiB
    cpu_policy: Optional[str] = None
    cpu_thread_policy: Optional[str] = None
    cpu_pinning: dict = field(default_factory=dict)
    cpuset_reserved: Optional[set] = None


@dataclass
class InstanceTopology:
    cells: list
    emulator_threads_policy: Optional[str] = None


_PAGE_WORDS = ("small", "large", "any")


def constraints(vcpus: int, memory_mb: int, specs: Mapping[str, str], image: Mapping[str, str]
                ) -> Optional[InstanceTopology]:
    """numa_get_constraints for the specs the differential test generates (the flavor's
    hw:cpu_policy, hw:cpu_thread_policy, hw:cpu_dedicated_mask, hw:emulator_threads_policy,
    hw:mem_page_size, hw:numa_nodes, hw:numa_cpus.N, hw:numa_mem.N; the image's
    hw_numa_nodes); Invalid where Nova raises."""
    policy = specs.get("hw:cpu_policy")
    thread = specs.get("hw:cpu_thread_policy")
    emulator = specs.get("hw:emulator_threads_policy")
    mask = specs.get("hw:cpu_dedicated_mask")
    dedicated: set = set()
    if policy in (None, "shared"):
        if thread or emulator == "isolate" or mask:
            raise Invalid("thread policy, isolated emulator or mask without pinning")
    elif policy == "dedicated":
        if mask:
            raise Invalid("mask with dedicated")
        dedicated = set(range(vcpus))
    else:
        if not mask:
            raise Invalid("mixed without a mask")
        dedicated = _cpu_spec(f"0-{vcpus - 1},{mask}" if mask.startswith("^") else mask)
        if not dedicated <= set(range(vcpus)) or len(dedicated) in (0, vcpus):
            raise Invalid("bad mask")  # get_dedicated_cpu_constraint
    nodes_text = specs.get("hw:numa_nodes") or image.get("hw_numa_nodes")
    if specs.get("hw:numa_nodes") and image.get("hw_numa_nodes"):
        raise Invalid("numa_nodes in both")
    nodes = int(nodes_text) if nodes_text else None
    pagesize = specs.get("hw:mem_page_size")
    if pagesize is not None and pagesize not in _PAGE_WORDS:
        pagesize = int(pagesize)
    if not (nodes or pagesize or policy in ("dedicated", "mixed")):
        return None
    nodes = nodes or 1
    cpu_list = _cell_list(specs, "hw:numa_cpus", _cpu_spec)
    mem_list = _cell_list(specs, "hw:numa_mem", int)
    shared = set(range(vcpus)) - dedicated
    cells = []
    if cpu_list is None and mem_list is None:
        if vcpus % nodes or memory_mb % nodes:
            raise Invalid("asymmetric")
        per_cell = vcpus // nodes
        for node in range(nodes):
            cpus = set(range(node * per_cell, (node + 1) * per_cell))
            cells.append(InstanceCell(node, cpus & shared, cpus & dedicated, memory_mb // nodes))
    elif cpu_list is not None and mem_list is not None:
        if len(cpu_list) != nodes or len(mem_list) != nodes:
            raise Invalid("incomplete")
        left, total = set(range(vcpus)), 0
        for node in range(nodes):
            for cpu in cpu_list[node]:
                if cpu > vcpus - 1 or cpu not in left:
                    raise Invalid("cpu out of range or twice")
                left.remove(cpu)
            cells.append(InstanceCell(node, cpu_list[node] & shared, cpu_list[node] & dedicated, mem_list[node]))
            total += mem_list[node]
        if left or total != memory_mb:
            raise Invalid("unassigned or memory")
    else:
        raise Invalid("incomplete")
    for cell in cells:
        cell.pagesize, cell.cpu_policy, cell.cpu_thread_policy = pagesize, policy, thread
    return InstanceTopology(cells, emulator)


def _cell_list(specs: Mapping[str, str], prefix: str, read: Any) -> Optional[list]:
    found = []
    while f"{prefix}.{len(found)}" in specs:
        found.append(read(specs[f"{prefix}.{len(found)}"]))
    return found or None


def _cpu_spec(text: str) -> set:
    """parse_cpu_spec, for the texts the test writes."""
    wanted, unwanted = set(), set()
    for rule in filter(None, (part.strip() for part in text.split(","))):
        target = unwanted if rule.startswith("^") else wanted
        first, _dash, last = rule.lstrip("^").partition("-")
        target.update(range(int(first), int(last or first) + 1))
    return wanted - unwanted


# ---- fitting: numa_fit_instance_to_host ------------------------------------------------------

def fit_to_host(cells: list[HostCell], instance: InstanceTopology, cpu_ratio: float, ram_ratio: float,
                pci_requests: Sequence[Any], stats: Optional["Pools"], quirks: Quirks
                ) -> Optional[tuple[list[InstanceCell], list[int], list]]:
    """The NUMA filter's answer: (instance cells fitted, their host cells, devices taken) or None.
    ``instance`` is the filter's copy of the request (Nova clones the spec per host): its cells
    are changed by the fit as Nova's are."""
    if not cells or len(cells) < len(instance.cells):
        return None
    ordered = list(cells)
    if len(cells) > len(instance.cells):
        ordered = sorted(ordered, key=lambda cell: cell.avail_memory, reverse=True)
        if instance.cells[0].cpu_policy in (None, "shared"):
            ordered = sorted(ordered, key=lambda cell: cell.cpu_usage)
        else:
            ordered = sorted(ordered, key=lambda cell: len(cell.free_pcpus), reverse=True)
        if stats is not None:
            by_node: dict = {}
            for pool in stats.pools:
                by_node[pool.numa_node] = by_node.get(pool.numa_node, 0) + pool.count
            ordered = sorted(ordered, key=lambda cell: by_node.get(cell.id, 0), reverse=bool(pci_requests))
    asked = [cell.pagesize for cell in instance.cells]
    not_fit, fit_cache, fits = set(), set(), {}
    for permutation in itertools.permutations(ordered, len(instance.cells)):
        chosen: list[InstanceCell] = []
        for index, (host_cell, guest_cell) in enumerate(zip(permutation, instance.cells)):
            # Nova keys its caches by the instance cell's id, which each fit overwrites with the
            # host cell's (stale_cells); Berth by the guest cell.
            pair = (host_cell.id, guest_cell.id if quirks.stale_cells else index)
            if pair in not_fit:
                break
            if pair in fit_cache:
                if quirks.stale_cells:
                    guest_cell.id = host_cell.id
                    chosen.append(guest_cell)
                else:
                    chosen.append(fits[pair])
                continue
            if not quirks.carry_page_size:
                guest_cell.pagesize = asked[index]
            reserved = 1 if instance.emulator_threads_policy == "isolate" and not chosen else 0
            try:
                got = _fit_cell(host_cell, guest_cell, cpu_ratio, ram_ratio, reserved, quirks)
            except PageSizeNotSupported:
                got = None
            if got is None:
                not_fit.add(pair)
                break
            fit_cache.add(pair)
            fits[pair] = got
            chosen.append(got)
        if len(chosen) != len(instance.cells):
            continue
        taken: list = []
        if pci_requests:
            taken = stats.copy().apply(pci_requests, [cell.id for cell in chosen], cells, quirks)
            if taken is None:
                continue
        return [copy.deepcopy(cell) for cell in chosen], [cell.id for cell in permutation], taken
    return None


def _fit_cell(host: HostCell, cell: InstanceCell, cpu_ratio: float, ram_ratio: float, reserved: int,
              quirks: Quirks) -> Optional[InstanceCell]:
    """_numa_fit_instance_cell. ``cell`` is the request's own (Nova's object): the page size
    chosen is stored on it, and with stale_cells its pinning and id too; without, the fit
    returns a copy with them."""
    memory_kb = cell.memory * 1024
    pinned = cell.cpu_policy in ("dedicated", "mixed")
    result = cell if quirks.stale_cells else copy.deepcopy(cell)
    if cell.pagesize:
        sizes = sorted((pages.size_kb for pages in host.mempages), reverse=True)
        if cell.pagesize == "small":
            candidates = sizes[-1:]
        elif cell.pagesize == "large":
            candidates = sizes[:-1]
        elif cell.pagesize == "any":
            candidates = sizes
        else:
            candidates = [cell.pagesize]
        chosen_page = next((size for size in candidates if host.can_fit_pagesize(size, memory_kb)), None)
        if not chosen_page:
            return None
        cell.pagesize = result.pagesize = chosen_page
    elif host.mempages:
        smallest = min(pages.size_kb for pages in host.mempages)
        if not host.can_fit_pagesize(smallest, memory_kb, use_free=pinned):
            return None
    elif (host.avail_memory if pinned else host.memory) < cell.memory:
        return None
    if pinned and len(cell.pcpuset) + reserved > len(host.pcpuset):
        return None
    if cell.cpu_policy in ("shared", "mixed", None) and len(cell.cpuset) > len(host.cpuset):
        return None
    if pinned:
        if len(cell.pcpuset) + reserved > len(host.free_pcpus):
            return None
        if cell.pcpuset or quirks.pack_empty_cells:
            packed = _pack(host, cell, reserved)
        else:
            packed = _emulator_only(host, cell, reserved) if reserved else ({}, None)
        if packed is None:
            return None
        result.cpu_pinning, result.cpuset_reserved = packed
        result.id = host.id  # _pack_instance_onto_cores sets it, before the limits below
    if cell.cpu_policy in ("shared", "mixed", None):
        if host.cpu_usage + len(cell.cpuset) > len(host.cpuset) * cpu_ratio:
            return None
        if host.memory_usage + cell.memory > host.memory * ram_ratio:
            return None
    result.id = host.id
    return result


def _emulator_only(host: HostCell, cell: InstanceCell, reserved: int) -> Optional[tuple[dict, set]]:
    """Berth's choice for a cell without dedicated vCPUs that holds the isolated emulator thread
    (pack_empty_cells off): the first free CPU in core order; isolate still refuses SMT cores
    outside Nova's legacy mode."""
    if cell.cpu_thread_policy == "isolate" and max(map(len, host.siblings)) > 1 and host.pcpuset != host.cpuset:
        return None
    return {}, set(list(itertools.chain(*(sorted(core) for core in host.free_siblings)))[:reserved])


def _pack(host: HostCell, cell: InstanceCell, reserved: int) -> Optional[tuple[dict, Optional[set]]]:
    """_pack_instance_onto_cores: (pinning, reserved CPUs) or None."""
    if not host.siblings:
        raise NovaCrash("max() of a cell without usable CPUs")
    threads_per_core = max(map(len, host.siblings)) or 1
    sets: dict = {}
    for core in host.free_siblings:
        for threads in range(1, len(core) + 1):
            sets.setdefault(threads, []).append(sorted(core))

    def pinning_of(threads: int, cores: list) -> Optional[list]:
        if threads * len(cores) < len(cell.pcpuset):
            return None
        return list(zip(sorted(cell.pcpuset), itertools.chain(*(core[:threads] for core in cores))))

    def reserved_of(cores: list, pinning: Optional[list], isolate: bool = False) -> Optional[set]:
        if not pinning:
            return None
        if not reserved:
            return None
        left = [list(core) for core in cores]
        for _vcpu, cpu in pinning:
            for core in list(left):
                if cpu in core:
                    if isolate:
                        left.remove(core)
                    else:
                        core.remove(cpu)
        return set(list(itertools.chain(*left))[:reserved]) or None

    pinning = None
    found: Optional[set] = None
    threads = 1
    if cell.cpu_thread_policy == "isolate":
        if threads_per_core not in sets:
            return None
        if threads_per_core != 1 and host.pcpuset != host.cpuset:
            return None
        pinning = pinning_of(1, sets[threads_per_core])
        found = reserved_of(sets[1], pinning, isolate=True)
        if not pinning or (reserved and not found):
            return None
    else:
        if cell.cpu_thread_policy == "require" and threads_per_core <= 1:
            return None
        for threads, cores in sorted(sets.items(), reverse=True):
            if cell.cpu_thread_policy == "require" and threads <= 1:
                continue
            pinning = pinning_of(threads, cores)
            found = reserved_of(sets[1], pinning)
            if pinning is None or (reserved and not found):
                continue
            break
        if cell.cpu_thread_policy != "require" and not pinning:
            singles = [[cpu] for cpu in itertools.chain(*sets.get(1, []))]
            pinning = pinning_of(threads, singles)
            found = reserved_of(singles, pinning)
    if pinning is None or (reserved and not found):
        return None
    return dict(pinning), found


# ---- PCI: PciDeviceStats ----------------------------------------------------------------------

@dataclass
class Pool:
    vendor_id: str
    product_id: str
    numa_node: Optional[int]
    dev_type: str
    address: str  # the PF's for VFs, the device's own otherwise
    first: str  # the lowest address of its devices: pools are made in that order
    count: int


class Pools:
    """A host's free assignable devices (those whose ids an alias names: Berth's reading of
    [pci] device_spec) as Nova's pools, with the PF/VF relations to take dependents off."""

    def __init__(self, devices: Sequence[Mapping[str, Any]], aliases: Sequence[Mapping[str, Any]],
                 assignments: Sequence[Mapping[str, Any]]) -> None:
        named = {(alias["vendor_id"], alias["product_id"]) for alias in aliases}
        held = {device["address"] for assignment in assignments for device in (assignment or {}).get("pci") or []}
        by_address = {device["address"]: device for device in devices}
        busy = set(held)
        for address in held:  # the tracker's dependents: a VF's PF, a PF's VFs
            device = by_address.get(address, {})
            busy.update(device.get("virtual_functions") or [])
            if device.get("parent_address"):
                busy.add(device["parent_address"])
        self.pools: list[Pool] = []
        for device in sorted(devices, key=lambda item: item["address"]):
            if (device["vendor_id"], device["product_id"]) not in named or device["address"] in busy:
                continue
            key = (device["vendor_id"], device["product_id"], device["numa_node"], device["dev_type"],
                   device.get("parent_address") or device["address"])
            pool = next((pool for pool in self.pools if (pool.vendor_id, pool.product_id, pool.numa_node,
                                                         pool.dev_type, pool.address) == key), None)
            if pool is None:
                self.pools.append(Pool(*key, first=device["address"], count=0))
                pool = self.pools[-1]
            pool.count += 1

    def copy(self) -> "Pools":
        return copy.deepcopy(self)

    def apply(self, requests: Sequence[Any], cell_ids: Optional[Sequence[int]], host: Sequence[HostCell],
              quirks: Quirks) -> Optional[list]:
        """apply_requests: the pools each request takes from ([(pool key, count)]), or None."""
        taken = []
        for request in requests:
            pools = self._filter(request, cell_ids, host, quirks)
            if pools is None:
                return None
            count = request.count
            for pool in pools:
                used = min(pool.count, count)
                pool.count -= used
                count -= used
                taken.append(((pool.vendor_id, pool.product_id, pool.numa_node, pool.dev_type, pool.address), used))
                if not quirks.no_dependents_within_request and used:
                    self._take_dependents(pool)
                if not count:
                    break
            self.pools = [pool for pool in self.pools if pool.count > 0]
        return taken

    def _take_dependents(self, pool: Pool) -> None:
        """_handle_device_dependents: a VF taken takes its PF, a PF its VFs (their pools are keyed
        by the PF's address)."""
        related = "type-PF" if pool.dev_type == "type-VF" else "type-VF" if pool.dev_type == "type-PF" else None
        self.pools = [other for other in self.pools if not (other.dev_type == related and other.address == pool.address)]

    def _filter(self, request: Any, cell_ids: Optional[Sequence[int]], host: Sequence[HostCell],
                quirks: Quirks) -> Optional[list[Pool]]:
        """_filter_pools: spec, NUMA policy, unrequested PFs (in the order quirks say)."""
        pools = [pool for pool in self.pools if pool.count > 0 and any(
            pool.vendor_id == vendor and pool.product_id == product and (kind is None or pool.dev_type == kind)
            for vendor, product, kind in request.specs)]
        if sum(pool.count for pool in pools) < request.count:
            return None
        steps = [lambda found: self._numa(found, request, cell_ids, host, quirks),
                 lambda found: self._no_unrequested_pfs(found, request)]
        if not quirks.pfs_counted_for_numa:
            steps.reverse()
        for step in steps:
            pools = step(pools)
            if sum(pool.count for pool in pools) < request.count:
                return None
        return pools

    @staticmethod
    def _no_unrequested_pfs(pools: list[Pool], request: Any) -> list[Pool]:
        if all(kind != "type-PF" for _vendor, _product, kind in request.specs):
            return [pool for pool in pools if pool.dev_type != "type-PF"]
        return pools

    @staticmethod
    def _numa(pools: list[Pool], request: Any, cell_ids: Optional[Sequence[int]], host: Sequence[HostCell],
              quirks: Quirks) -> list[Pool]:
        """_filter_pools_for_numa_cells (and _filter_pools_for_socket_affinity)."""
        if not cell_ids:
            return pools
        policy = request.numa_policy or "legacy"
        wanted = list(cell_ids)

        def ranked(found: list[Pool], ranks: Sequence[Any]) -> list[Pool]:
            # Berth's order: the instance's cells first, then by address; Nova's: pool order.
            if quirks.pool_order:
                return found
            return sorted(found, key=lambda pool: next(
                (rank for rank, nodes in enumerate(ranks) if pool.numa_node in nodes), len(ranks)))

        local = [pool for pool in pools if pool.numa_node in wanted]
        if policy == "required" or sum(pool.count for pool in local) >= request.count:
            return local
        if policy == "socket":
            if any(cell.socket is None for cell in host):
                return []
            sockets = {cell.socket for cell in host if cell.id in wanted}
            allowed = {cell.id for cell in host if cell.socket in sockets}
            return ranked([pool for pool in pools if pool.numa_node in allowed], [wanted])
        wanted.append(None)
        near = [pool for pool in pools if pool.numa_node in wanted]
        if policy == "legacy" or sum(pool.count for pool in near) >= request.count:
            return ranked(near, [cell_ids, [None]])
        return ranked(sorted(pools, key=lambda pool: pool.numa_node not in wanted), [cell_ids, [None]])


@dataclass(frozen=True)
class DeviceAsk:
    """An InstancePCIRequest: ``count`` devices of any of ``specs`` ((vendor, product, type))."""

    specs: tuple
    count: int
    numa_policy: Optional[str]
