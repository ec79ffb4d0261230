"""NUMA placement with Nova's names and rules: what a flavor and an image ask (``numa_request``),
what a host's cells have left once its instances' assignments are taken off (``numa_cells``), and
where one more instance's guest cells go (``fit``), as the assignment docs/docsite/rst/numa.rst
describes. Pure: no libvirt, no Ansible; NUMATopologyFilter and the claim call the same ``fit``.

Nova's nova/virt/hardware.py (numa_get_constraints, numa_fit_instance_to_host and the cell
fitting and core packing under it) is the reference; docs/docsite/rst/numa.rst says where Berth
differs and why.

Python 3.9: modules ship module_utils to hypervisors.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.berth.fleet.plugins.module_utils._untrusted_text import whole_number
from ansible_collections.berth.fleet.plugins.module_utils.cpu_sets import format_cpu_set, parse_cpu_set
from ansible_collections.berth.fleet.plugins.module_utils.huge_pages import page_size_kb
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import SchedulerInputError

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor

CPU_POLICIES = ("shared", "dedicated", "mixed")
CPU_THREAD_POLICIES = ("prefer", "isolate", "require")
EMULATOR_THREADS_POLICIES = ("share", "isolate")
PAGE_SIZE_WORDS = ("small", "large", "any")
# Nova's ImageMetaProps.NUMA_NODES_MAX: more guest cells than that is a typing mistake.
NUMA_NODES_MAX = 128
# Steps of the search for host cells to put guest cells on, per fit: far more than any real
# host needs (8 cells, 8 guest cells: 40,320 permutations, far fewer steps), and a bound on a
# host whose facts claim hundreds of cells.
PERMUTATIONS_TRIED_MAX = 100000
_KIB_PER_MIB = 1024

# What devices() gives back: the devices' part of an assignment, or why none fits.
DevicesFit = Callable[[Tuple[int, ...]], Tuple[Optional[Dict[str, Any]], Optional[str]]]


@dataclass(frozen=True)
class GuestCell:
    """One guest NUMA cell: its vCPUs (those of them pinned), and its memory."""

    id: int
    vcpus: Tuple[int, ...]
    dedicated_vcpus: Tuple[int, ...]
    memory_mb: int

    @property
    def shared_vcpus(self) -> Tuple[int, ...]:
        return tuple(vcpu for vcpu in self.vcpus if vcpu not in self.dedicated_vcpus)


@dataclass(frozen=True)
class NUMARequest:
    """What one instance asks of a host's NUMA cells (Nova's InstanceNUMATopology before fitting).

    ``mem_page_size`` is None (no page size asked), "small", "large", "any" or a size in KiB.
    """

    cells: Tuple[GuestCell, ...]
    cpu_policy: str = "shared"
    cpu_thread_policy: Optional[str] = None
    mem_page_size: Any = None
    emulator_threads_policy: Optional[str] = None

    @property
    def emulator_threads_isolated(self) -> bool:
        return self.emulator_threads_policy == "isolate"


# ---- requests ------------------------------------------------------------------------------

def numa_request(flavor: Flavor, image_properties: Mapping[str, Any]) -> Optional[NUMARequest]:
    """The NUMA request of ``flavor``'s extra specs and the image's properties, with Nova's names
    and conflict rules (hardware.numa_get_constraints), or None when nothing NUMA is asked.

    As in Nova, a dedicated or mixed CPU policy, a page size or hw:numa_nodes each make a NUMA
    request (one cell unless hw:numa_nodes says more). A bad value or a contradiction raises
    SchedulerInputError naming the spec ("flavor.extra_specs.hw:cpu_thread_policy").
    """
    specs = _Specs(flavor.extra_specs, image_properties)
    cpu_policy = _cpu_policy(specs)
    thread_policy = _thread_policy(specs)
    emulator_policy = specs.choice("hw:emulator_threads_policy", EMULATOR_THREADS_POLICIES)
    mask = specs.flavor("hw:cpu_dedicated_mask")
    if cpu_policy in (None, "shared"):
        for key, value in (("hw:cpu_thread_policy", specs.flavor("hw:cpu_thread_policy")),
                           ("hw_cpu_thread_policy", specs.image("hw_cpu_thread_policy"))):
            if value is not None:
                raise SchedulerInputError(specs.field(key), f"{specs.field(key)} ({value}) needs a dedicated or mixed "
                                                            f"CPU policy (hw:cpu_policy), as in Nova")
        if emulator_policy == "isolate":
            field_name = specs.field("hw:emulator_threads_policy")
            raise SchedulerInputError(field_name, f"{field_name}=isolate needs hw:cpu_policy dedicated or mixed: the "
                                                  f"extra emulator CPU is a dedicated one")
    if mask is not None and cpu_policy != "mixed":
        field_name = specs.field("hw:cpu_dedicated_mask")
        raise SchedulerInputError(field_name, f"{field_name} needs hw:cpu_policy=mixed, got {cpu_policy or 'none'}")
    if cpu_policy == "mixed" and mask is None:
        field_name = specs.field("hw:cpu_dedicated_mask")
        raise SchedulerInputError(field_name, f"hw:cpu_policy=mixed needs {field_name}: which vCPUs are dedicated")
    nodes = _numa_nodes(specs)
    page_size = _page_size(specs)
    if not nodes and page_size is None and cpu_policy not in ("dedicated", "mixed"):
        # As Nova's numa_get_constraints: hw:numa_cpus.N and hw:numa_mem.N alone ask nothing.
        return None
    if cpu_policy == "dedicated":
        dedicated = set(range(flavor.vcpus))
    elif cpu_policy == "mixed":
        dedicated = _dedicated_mask(specs, str(mask), flavor.vcpus)
    else:
        dedicated = set()
    cells = _guest_cells(specs, flavor, nodes or 1, dedicated)
    return NUMARequest(cells=cells, cpu_policy=cpu_policy or "shared", cpu_thread_policy=thread_policy,
                       mem_page_size=page_size, emulator_threads_policy=emulator_policy)


class _Specs:
    """The flavor's hw:* extra specs and the image's hw_* properties, read as text."""

    def __init__(self, extra_specs: Mapping[str, Any], image_properties: Mapping[str, Any]) -> None:
        self.extra_specs = extra_specs
        self.image_properties = image_properties

    @staticmethod
    def field(key: str) -> str:
        return f"flavor.extra_specs.{key}" if ":" in key else f"image_properties.{key}"

    def flavor(self, key: str) -> Optional[str]:
        return _text(self.extra_specs.get(key))

    def image(self, key: str) -> Optional[str]:
        return _text(self.image_properties.get(key))

    def value(self, key: str) -> Optional[str]:
        return self.flavor(key) if ":" in key else self.image(key)

    def choice(self, key: str, allowed: Sequence[str]) -> Optional[str]:
        value = self.value(key)
        if value is not None and value not in allowed:
            raise SchedulerInputError(self.field(key), f"{self.field(key)} must be one of {', '.join(allowed)}, "
                                                       f"got {value!r}")
        return value

    def cell_keys(self, prefix: str) -> List[str]:
        """The keys ``prefix``.0, .1, ... present without a gap (hw:numa_cpus.N of the flavor,
        hw_numa_mem.N of the image...), as Nova reads them: from cell 0 up to the first one
        missing; a key after a gap is not read."""
        source = self.extra_specs if ":" in prefix else self.image_properties
        keys: List[str] = []
        while f"{prefix}.{len(keys)}" in source and len(keys) < NUMA_NODES_MAX:
            keys.append(f"{prefix}.{len(keys)}")
        return keys


def _text(value: Any) -> Optional[str]:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _cpu_policy(specs: _Specs) -> Optional[str]:
    """Nova's get_cpu_policy_constraint: the flavor wins, an image may not ask more pinning."""
    flavor_policy = specs.choice("hw:cpu_policy", CPU_POLICIES)
    image_policy = specs.choice("hw_cpu_policy", CPU_POLICIES)
    refused = {"mixed": ("dedicated",), "shared": ("mixed", "dedicated")}.get(flavor_policy or "", ())
    if image_policy in refused:
        raise SchedulerInputError("image_properties.hw_cpu_policy",
                                  f"image_properties.hw_cpu_policy={image_policy} conflicts with the flavor's "
                                  f"hw:cpu_policy={flavor_policy}: an image may not ask more pinning than its flavor")
    return flavor_policy or image_policy


def _thread_policy(specs: _Specs) -> Optional[str]:
    """Nova's get_cpu_thread_policy_constraint: the image may only agree with a flavor that says
    more than prefer."""
    flavor_policy = specs.choice("hw:cpu_thread_policy", CPU_THREAD_POLICIES)
    image_policy = specs.choice("hw_cpu_thread_policy", CPU_THREAD_POLICIES)
    if flavor_policy in (None, "prefer"):
        return flavor_policy or image_policy
    if image_policy is not None and image_policy != flavor_policy:
        raise SchedulerInputError("image_properties.hw_cpu_thread_policy",
                                  f"image_properties.hw_cpu_thread_policy={image_policy} conflicts with the "
                                  f"flavor's hw:cpu_thread_policy={flavor_policy}")
    return flavor_policy


def _numa_nodes(specs: _Specs) -> Optional[int]:
    flavor_nodes, image_nodes = specs.flavor("hw:numa_nodes"), specs.image("hw_numa_nodes")
    if flavor_nodes is not None and image_nodes is not None:
        raise SchedulerInputError("image_properties.hw_numa_nodes",
                                  "image_properties.hw_numa_nodes may not be set where the flavor sets "
                                  "hw:numa_nodes (Nova forbids an image to override it)")
    key = "hw:numa_nodes" if flavor_nodes is not None else "hw_numa_nodes"
    text = flavor_nodes if flavor_nodes is not None else image_nodes
    if text is None:
        return None
    nodes = whole_number(text)
    if nodes is None or not 1 <= nodes <= NUMA_NODES_MAX:
        raise SchedulerInputError(specs.field(key), f"{specs.field(key)} must be an integer from 1 to "
                                                    f"{NUMA_NODES_MAX}, got {text!r}")
    # More cells than vCPUs is no error of itself (Nova's neither): an even split refuses it,
    # and hw:numa_cpus.N may give a cell memory and no vCPU.
    return nodes


def _page_size(specs: _Specs) -> Any:
    """Nova's _get_numa_pagesize_constraint: the image chooses only where the flavor allows it
    (large or any)."""
    flavor_size, image_size = specs.flavor("hw:mem_page_size"), specs.image("hw_mem_page_size")
    if flavor_size is None:
        if image_size is not None:
            raise SchedulerInputError("image_properties.hw_mem_page_size",
                                      "image_properties.hw_mem_page_size needs the flavor's hw:mem_page_size to "
                                      "be large or any (Nova forbids an image to ask pages its flavor does not)")
        return None
    size = _parse_page_size("flavor.extra_specs.hw:mem_page_size", flavor_size)
    if image_size is None:
        return size
    if size not in ("large", "any"):
        raise SchedulerInputError("image_properties.hw_mem_page_size",
                                  f"image_properties.hw_mem_page_size={image_size} conflicts with the flavor's "
                                  f"hw:mem_page_size={flavor_size}: only large or any let the image choose")
    return _parse_page_size("image_properties.hw_mem_page_size", image_size)


def _parse_page_size(field_name: str, text: str) -> Any:
    return text if text in PAGE_SIZE_WORDS else page_size_kb(field_name, text)


def _dedicated_mask(specs: _Specs, mask: str, vcpus: int) -> set:
    """Nova's get_dedicated_cpu_constraint: "^0" means every vCPU but 0; at least one of each kind."""
    field_name = specs.field("hw:cpu_dedicated_mask")
    text = f"0-{vcpus - 1},{mask}" if mask.startswith("^") else mask
    dedicated = set(_cpu_list(field_name, text))
    if not dedicated <= set(range(vcpus)):
        beyond = format_cpu_set(dedicated - set(range(vcpus)))
        raise SchedulerInputError(field_name, f"{field_name} names vCPUs {beyond} beyond the flavor's {vcpus} "
                                              f"(0-{vcpus - 1})")
    if len(dedicated) == vcpus:
        raise SchedulerInputError(field_name, f"{field_name}={mask} leaves no shared vCPU: use hw:cpu_policy=dedicated")
    return dedicated


def _cpu_list(field_name: str, text: str, empty: bool = False) -> List[int]:
    """``text``'s vCPUs; with ``empty``, none at all too (Nova's parse_cpu_spec of "" or "0,^0")."""
    return parse_cpu_set(field_name, text, empty=empty)  # refuses naming field_name


def _guest_cells(specs: _Specs, flavor: Flavor, nodes: int, dedicated: set) -> Tuple[GuestCell, ...]:
    """Nova's _get_numa_topology_auto (even split) or _get_numa_topology_manual (numa_cpus and
    numa_mem per cell, from the flavor or else the image, never both). Without hw:numa_nodes (a
    page size or pinning asked) there is one cell, and the per-cell specs must describe it."""
    lists = {prefix: specs.cell_keys(prefix) for prefix in ("hw:numa_cpus", "hw_numa_cpus", "hw:numa_mem",
                                                            "hw_numa_mem")}
    for flavor_prefix, image_prefix in (("hw:numa_cpus", "hw_numa_cpus"), ("hw:numa_mem", "hw_numa_mem")):
        if lists[flavor_prefix] and lists[image_prefix]:
            key = lists[image_prefix][0]
            raise SchedulerInputError(specs.field(key), f"{specs.field(key)} may not be set where the flavor sets "
                                                        f"{lists[flavor_prefix][0]} (Nova forbids an image to "
                                                        f"override it)")
    cpu_keys = lists["hw:numa_cpus"] or lists["hw_numa_cpus"]
    mem_keys = lists["hw:numa_mem"] or lists["hw_numa_mem"]
    if not cpu_keys and not mem_keys:
        if flavor.vcpus % nodes or flavor.memory_mb % nodes:
            field_name = specs.field("hw:numa_nodes" if specs.flavor("hw:numa_nodes") else "hw_numa_nodes")
            raise SchedulerInputError(field_name, f"{field_name}={nodes} does not divide the flavor's {flavor.vcpus} "
                                                  f"vCPUs and {flavor.memory_mb} MiB evenly: set hw:numa_cpus.N and "
                                                  f"hw:numa_mem.N")
        per_cell = flavor.vcpus // nodes
        return tuple(_cell(node, range(node * per_cell, (node + 1) * per_cell), flavor.memory_mb // nodes, dedicated)
                     for node in range(nodes))
    from_flavor = ":" in (cpu_keys or mem_keys)[0]
    for kind, found in (("numa_cpus", cpu_keys), ("numa_mem", mem_keys)):
        if len(found) != nodes:
            prefix = found[0].rsplit(".", 1)[0] if found else (f"hw:{kind}" if from_flavor else f"hw_{kind}")
            key = f"{prefix}.{min(len(found), nodes)}"
            raise SchedulerInputError(specs.field(key), f"{specs.field(key)}: hw:numa_cpus.N and hw:numa_mem.N must be "
                                                        f"set for each guest cell 0 to {nodes - 1} ({nodes} from "
                                                        f"hw:numa_nodes, 1 without it), read from cell 0 up to the "
                                                        f"first one missing; got {len(found)}")
    cells, seen, total_mb = [], set(), 0
    for node in range(nodes):
        cpu_field, mem_field = specs.field(cpu_keys[node]), specs.field(mem_keys[node])
        vcpus = _cpu_list(cpu_field, specs.value(cpu_keys[node]) or "", empty=True)
        beyond = [vcpu for vcpu in vcpus if vcpu >= flavor.vcpus]
        if beyond:
            raise SchedulerInputError(cpu_field, f"{cpu_field} names vCPU {beyond[0]}, beyond the flavor's "
                                                 f"{flavor.vcpus} (0-{flavor.vcpus - 1})")
        twice = sorted(seen & set(vcpus))
        if twice:
            raise SchedulerInputError(cpu_field, f"{cpu_field} names vCPU {twice[0]}, already in another guest cell")
        seen.update(vcpus)
        memory_text = specs.value(mem_keys[node]) or ""
        # 0 too, as Nova takes it: a cell of vCPUs and no memory of its own.
        memory_mb = whole_number(memory_text)
        if memory_mb is None:
            raise SchedulerInputError(mem_field, f"{mem_field} must be a whole number of MiB, got {memory_text!r}")
        total_mb += memory_mb
        cells.append(_cell(node, vcpus, memory_mb, dedicated))
    unassigned = sorted(set(range(flavor.vcpus)) - seen)
    if unassigned:
        field_name = specs.field(cpu_keys[nodes - 1])
        raise SchedulerInputError(field_name, f"{field_name}: the hw:numa_cpus.N leave vCPUs "
                                              f"{format_cpu_set(unassigned)} of the flavor's {flavor.vcpus} in no cell")
    if total_mb != flavor.memory_mb:
        field_name = specs.field(mem_keys[nodes - 1])
        raise SchedulerInputError(field_name, f"{field_name}: the hw:numa_mem.N add up to {total_mb} MiB, the flavor "
                                              f"has {flavor.memory_mb} MiB")
    return tuple(cells)


def _cell(node: int, vcpus: Any, memory_mb: int, dedicated: set) -> GuestCell:
    vcpus = tuple(sorted(vcpus))
    return GuestCell(id=node, vcpus=vcpus, dedicated_vcpus=tuple(v for v in vcpus if v in dedicated),
                     memory_mb=memory_mb)


# ---- a host's cells and their use ----------------------------------------------------------

@dataclass
class NUMACellState:
    """One host cell as a fit sees it: what instances may use, and what the assignments on the
    host already use of it (Nova's NUMACell with its usage)."""

    id: int
    memory_mb: int
    shared_cpus: List[int]  # Nova's cpuset: where shared vCPUs float
    dedicated_cpus: List[int]  # Nova's pcpuset: what may be pinned
    siblings: List[List[int]]  # thread sibling sets, restricted to the CPUs instances may use
    pages_total: Dict[int, int]  # size_kb -> pages
    pages_reserved: Dict[int, int]  # size_kb -> pages the operator keeps (reserved_huge_pages)
    # The socket of every CPU of the cell, None where they are on several or unknown (Nova's
    # NUMACell.socket, which the PCI ``socket`` affinity policy reads).
    socket: Optional[int] = None
    used_cpus: set = field(default_factory=set)  # pinned and isolated emulator CPUs
    memory_used_mb: int = 0
    shared_vcpus_used: int = 0
    pages_used: Dict[int, int] = field(default_factory=dict)

    @property
    def free_dedicated_cpus(self) -> List[int]:
        return [cpu for cpu in self.dedicated_cpus if cpu not in self.used_cpus]

    @property
    def smallest_page_kb(self) -> Optional[int]:
        return min(self.pages_total) if self.pages_total else None

    def free_pages(self, size_kb: int) -> int:
        return self.pages_total.get(size_kb, 0) - self.pages_reserved.get(size_kb, 0) - self.pages_used.get(size_kb, 0)

    def unused(self) -> "NUMACellState":
        """This cell as the topology gives it, with nothing used (its facts shared, not copied:
        nothing changes them)."""
        return NUMACellState(self.id, self.memory_mb, self.shared_cpus, self.dedicated_cpus, self.siblings,
                             self.pages_total, self.pages_reserved, self.socket)

    @property
    def legacy(self) -> bool:
        """Nova's legacy configuration (neither CPU set): every CPU serves shared and dedicated
        vCPUs alike (its cpuset equals its pcpuset)."""
        return self.shared_cpus == self.dedicated_cpus

    def to_dict(self) -> Dict[str, Any]:
        """For explanations: what is left of this cell."""
        return {"id": self.id, "free_dedicated_cpus": self.free_dedicated_cpus, "shared_cpus": list(self.shared_cpus),
                "memory_mb": self.memory_mb, "memory_used_mb": self.memory_used_mb,
                "free_pages": {size_kb: self.free_pages(size_kb) for size_kb in sorted(self.pages_total)}}


def numa_cells(topology: Mapping[str, Any], assignments: Sequence[Mapping[str, Any]],
               read: Optional[List[NUMACellState]] = None) -> List[NUMACellState]:
    """The host's cells with what ``assignments`` (one per instance on the host) use of each: the
    one reading of a host's NUMA usage, for fit and for explanations alike. ``read``: what
    read_cells gave for this ``topology`` (many hosts share one), counted onto fresh copies.

    Which CPUs instances may use follows Nova's libvirt driver: shared vCPUs float over
    cpu_shared_set, dedicated ones are pinned from cpu_dedicated_set; with neither set, every CPU
    serves both (Nova's legacy mode); with only cpu_dedicated_set, no CPU is shared; with only
    cpu_shared_set, none is dedicated.
    """
    cells = read_cells(topology) if read is None else [cell.unused() for cell in read]
    by_id = {cell.id: cell for cell in cells}
    for index, assignment in enumerate(assignments):
        try:
            _count_assignment(by_id, assignment or {})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SchedulerInputError(f"assignments[{index}]", f"assignments[{index}] does not read as an "
                                                               f"assignment: {exc!r}") from None
    return cells


def read_cells(topology: Mapping[str, Any]) -> List[NUMACellState]:
    """The host's cells as its topology gives them, none of them used yet; SchedulerInputError
    where the topology does not read as cells (the ledger's data is not trusted)."""
    try:
        cells = _read_cells(topology)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SchedulerInputError("numa_topology", f"numa_topology does not read as NUMA cells: {exc!r}") from None
    if len({cell.id for cell in cells}) != len(cells):
        raise SchedulerInputError("numa_topology", "numa_topology names a cell id twice")
    return cells


def _read_cells(topology: Mapping[str, Any]) -> List[NUMACellState]:
    shared_set, dedicated_set = topology.get("cpu_shared_set"), topology.get("cpu_dedicated_set")
    legacy = shared_set is None and dedicated_set is None
    shared_ids, dedicated_ids = set(shared_set or ()), set(dedicated_set or ())
    usable_ids = shared_ids | dedicated_ids
    reserved = topology.get("reserved_pages") or {}
    cells = []
    for cell in topology.get("cells") or []:
        cpus = list(map(int, cell.get("cpus") or []))
        if legacy:
            shared, dedicated, usable = cpus, cpus, set(cpus)
        else:
            shared = list(filter(shared_ids.__contains__, cpus))
            dedicated = list(filter(dedicated_ids.__contains__, cpus))
            usable = usable_ids.intersection(cpus)
        # Each core is listed once per thread (host_capabilities lists siblings sorted): its
        # distinct sibling lists, in the order first seen, are restricted to the usable CPUs once
        # each (not at all where every listed CPU is usable), not once per thread: this runs for
        # every host of a fleet.
        listed: Dict[tuple, None] = {}
        sockets = set()
        for item in cell.get("cpu_topology") or ():
            sockets.add(item.get("socket_id"))
            if item["id"] in usable:
                listed[tuple(item.get("siblings") or (item["id"],))] = None
        if usable.issuperset(chain.from_iterable(listed)):
            cores: Any = listed
        else:
            cores = {tuple(filter(usable.__contains__, core)) for core in listed}
        # A driver that reports no thread siblings: each CPU is its own core.
        siblings = list(map(list, sorted(cores))) if cores else [[cpu] for cpu in sorted(usable)]
        cell_reserved = reserved.get(str(cell["id"])) or reserved.get(cell["id"]) or {}
        cells.append(NUMACellState(
            id=int(cell["id"]), memory_mb=int(cell.get("memory_mb") or 0), shared_cpus=shared,
            dedicated_cpus=dedicated, siblings=siblings,
            # A size of 0 would divide by zero below; libvirt never reports one.
            pages_total={int(page["size_kb"]): int(page.get("total") or 0) for page in cell.get("pages") or []
                         if int(page["size_kb"]) > 0},
            pages_reserved={int(size): int(count) for size, count in cell_reserved.items()},
            # As Nova's libvirt driver: a cell's socket is known where all its CPUs share one.
            socket=next(iter(sockets)) if len(sockets) == 1 and isinstance(next(iter(sockets)), int) else None))
    return cells


def cell_sockets(topology: Mapping[str, Any], read: Optional[List[NUMACellState]] = None) -> Dict[int, Optional[int]]:
    """Each host cell's socket (None where unknown), for the PCI ``socket`` affinity policy;
    ``read``: as numa_cells. Empty where the topology does not read."""
    try:
        return {cell.id: cell.socket for cell in (read_cells(topology) if read is None else read)}
    except SchedulerInputError:
        return {}


def _count_assignment(by_id: Dict[int, NUMACellState], assignment: Mapping[str, Any]) -> None:
    """Take one instance's assignment off its host cells."""
    numa = assignment.get("numa") or {}
    # hw:cpu_thread_policy=isolate holds the thread siblings of what it pins (Nova's
    # pin_cpus_with_siblings): in Nova's legacy mode they are cores of several threads.
    isolate = numa.get("cpu_thread_policy") == "isolate"
    for guest_cell in numa.get("cells") or []:
        cell = by_id.get(guest_cell.get("host_cell"))
        if cell is None:
            continue  # a cell this host no longer reports: nothing left to count it against
        pinning = guest_cell.get("pinning") or {}
        cell.used_cpus.update(map(int, pinning.values()))
        if isolate:
            cell.used_cpus.update(_with_siblings(cell, map(int, pinning.values())))
        memory_mb = int(guest_cell.get("memory_mb") or 0)
        cell.memory_used_mb += memory_mb
        cell.shared_vcpus_used += len(guest_cell.get("vcpus") or []) - len(pinning)
        size_kb = int(guest_cell.get("page_size_kb") or cell.smallest_page_kb or 0)
        if size_kb > 0:
            cell.pages_used[size_kb] = cell.pages_used.get(size_kb, 0) + memory_mb * _KIB_PER_MIB // size_kb
    if numa.get("emulator_isolated"):
        emulator_cpus = {int(cpu) for cpu in numa.get("emulator_cpus") or []}
        for cell in by_id.values():
            held = emulator_cpus & set(cell.dedicated_cpus)
            cell.used_cpus.update(_with_siblings(cell, held) if isolate else held)


def _with_siblings(cell: NUMACellState, cpus: Iterable[int]) -> set:
    """``cpus`` and their thread siblings in ``cell`` (only the CPUs instances may use)."""
    cpus = set(cpus)
    return cpus.union(*(core for core in cell.siblings if cpus.intersection(core)))


# ---- fitting -------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Shortfall:
    """Why one guest cell does not fit one host cell: what it needs and what the cell has, in
    words that join into "no NUMA cell with <need>: cell 0 <have>, cell 1 <have>"."""

    need: str
    have: str


def fit(topology: Mapping[str, Any], assignments: Sequence[Mapping[str, Any]], request: NUMARequest,
        devices: Optional[DevicesFit] = None, cpu_allocation_ratio: Optional[float] = None,
        ram_allocation_ratio: Optional[float] = None, read: Optional[List[NUMACellState]] = None,
        free_devices: Optional[Callable[[], Mapping[Any, int]]] = None, devices_asked: bool = False
        ) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """Fit ``request`` onto the host's cells (``topology``: its numa_topology fact) beside what
    ``assignments`` hold, as Nova's numa_fit_instance_to_host does: (assignment, None), the
    assignment in docs/docsite/rst/numa.rst's shape, or (None, why not).

    The guest cells go onto distinct host cells, trying the host cells' permutations in Nova's
    order (cells with the most room first, ties in id order) and taking the first that fits. With
    ``devices``, a permutation fits only where ``devices(host cell ids, in guest cell order)``
    also finds its devices; their part of the assignment joins it. The ratios, as NUMATopologyFilter
    passes Nova's limits, cap shared vCPUs and memory per cell; without them only the cell's
    own size does (no instance overcommits a cell against itself). ``read``: as numa_cells.
    ``free_devices``: the host's free assignable PCI devices per NUMA node (asked only where the
    cells are sorted), which order the cells as Nova's pci_stats pools do: the cells with the
    most first where the request asks for PCI devices (``devices_asked``), the fewest otherwise.
    """
    try:
        cells = numa_cells(topology, assignments, read)
    except SchedulerInputError as exc:
        return None, str(exc)  # the ledger's data, not the request: this host only is out
    if not cells:
        return None, "the host reports no NUMA cells"
    wanted = len(request.cells)
    if wanted > len(cells):
        return None, f"the guest asks {wanted} NUMA cells, the host has {len(cells)}"
    ordered = _spread_order(cells, request, free_devices, devices_asked) if len(cells) > wanted else cells
    fits: Dict[Tuple[int, int], Any] = {}

    def cell_fit(host_cell: NUMACellState, guest_cell: GuestCell) -> Any:
        key = (host_cell.id, guest_cell.id)
        if key not in fits:
            fits[key] = _fit_cell(host_cell, guest_cell, request, guest_cell is request.cells[0],
                                  cpu_allocation_ratio, ram_allocation_ratio)
        return fits[key]

    devices_reason = None
    budget = [PERMUTATIONS_TRIED_MAX]
    for permutation in _fitting_permutations(ordered, request.cells, cell_fit, budget):
        extra: Dict[str, Any] = {}
        if devices is not None:
            found, devices_reason = devices(tuple(host_cell.id for host_cell in permutation))
            if found is None:
                continue
            extra = dict(found)
        placed = [cell_fit(host_cell, guest_cell) for host_cell, guest_cell in zip(permutation, request.cells)]
        numa = _assignment(request, [host_cell.id for host_cell in permutation], placed, topology)
        return {"numa": numa, **extra}, None
    for host_cell in cells:  # every pair, for the reason
        for guest_cell in request.cells:
            cell_fit(host_cell, guest_cell)
    return None, _reason(cells, request, fits, devices_reason, budget[0] <= 0)


def _fitting_permutations(ordered: List[NUMACellState], guest_cells: Sequence[GuestCell],
                          cell_fit: Callable[[NUMACellState, GuestCell], Any], budget: List[int],
                          prefix: Tuple[NUMACellState, ...] = ()) -> Iterator[Tuple[NUMACellState, ...]]:
    """The permutations of ``ordered`` that itertools.permutations would give, in its order,
    whose every pair fits: a depth-first search that stops at the first pair that does not, as
    Nova's loop skips a permutation at its first cell that does not fit, without walking the
    others that share that start. ``budget`` bounds the steps: a host's cell count comes from
    the ledger, which is not trusted.

    It recurses on itself, not on a nested function: a nested function that calls itself is a
    reference cycle holding the host's cells, which the scheduler (running with the cyclic
    garbage collector off, _fleet.without_gc) would keep for every host it fits."""
    if len(prefix) == len(guest_cells):
        yield prefix
        return
    guest_cell = guest_cells[len(prefix)]
    for host_cell in ordered:
        if budget[0] <= 0:
            return
        budget[0] -= 1
        if (prefix and any(host_cell is chosen for chosen in prefix)) \
                or isinstance(cell_fit(host_cell, guest_cell), _Shortfall):
            continue
        yield from _fitting_permutations(ordered, guest_cells, cell_fit, budget, prefix + (host_cell,))


def _spread_order(cells: List[NUMACellState], request: NUMARequest,
                  free_devices: Optional[Callable[[], Mapping[Any, int]]], devices_asked: bool
                  ) -> List[NUMACellState]:
    """Nova's default (packing_host_numa_cells_allocation_strategy false): most free memory
    first, then most free dedicated CPUs (pinned guests) or fewest shared vCPUs (the others),
    then, where the host has free PCI devices, the cells with the most of them first for a
    request that asks for devices and last for one that does not (to keep them free). Each sort
    is stable: the one before breaks its ties."""
    ordered = sorted(cells, key=lambda cell: cell.memory_mb - cell.memory_used_mb, reverse=True)
    if request.cpu_policy == "shared":
        ordered = sorted(ordered, key=lambda cell: cell.shared_vcpus_used)
    else:
        ordered = sorted(ordered, key=lambda cell: len(cell.free_dedicated_cpus), reverse=True)
    by_node = free_devices() if free_devices is not None else None
    if by_node:
        ordered = sorted(ordered, key=lambda cell: by_node.get(cell.id, 0), reverse=devices_asked)
    return ordered


def _fit_cell(host_cell: NUMACellState, guest_cell: GuestCell, request: NUMARequest, first: bool,
              cpu_ratio: Optional[float], ram_ratio: Optional[float]) -> Any:
    """One guest cell on one host cell (Nova's _numa_fit_instance_cell): its placement (page size,
    pinning, emulator CPU, shared cpuset), or the _Shortfall that stops it."""
    pinned = request.cpu_policy in ("dedicated", "mixed")
    page_size = _page_size_for(host_cell, guest_cell, request.mem_page_size, use_free=pinned)
    if isinstance(page_size, _Shortfall):
        return page_size
    placement: Dict[str, Any] = {"page_size_kb": page_size, "pinning": {}, "cpuset": [], "emulator_cpus": []}
    shared = guest_cell.shared_vcpus
    if len(shared) > len(host_cell.shared_cpus):
        return _Shortfall(f"{len(shared)} shared CPUs", f"has {len(host_cell.shared_cpus)}")
    # As Nova's limits: for a shared or mixed guest even a cell without shared vCPUs, on a host
    # cell already floating more than its CPUs times the ratio.
    if cpu_ratio is not None and request.cpu_policy != "dedicated" and (
            host_cell.shared_vcpus_used + len(shared) > len(host_cell.shared_cpus) * cpu_ratio):
        return _Shortfall(f"room for {len(shared)} shared vCPUs",
                          f"has {host_cell.shared_vcpus_used} of {len(host_cell.shared_cpus)} x {cpu_ratio:g}")
    if shared:
        placement["cpuset"] = list(host_cell.shared_cpus)
    if ram_ratio is not None and request.cpu_policy != "dedicated" and (
            host_cell.memory_used_mb + guest_cell.memory_mb > host_cell.memory_mb * ram_ratio):
        return _Shortfall(f"{guest_cell.memory_mb} MiB free",
                          f"has {host_cell.memory_used_mb} of {host_cell.memory_mb} x {ram_ratio:g} MiB used")
    emulator_count = 1 if first and request.emulator_threads_isolated else 0
    # A cell without dedicated vCPUs is not packed (Nova packs it anyway, so that require and
    # isolate ask free sibling cores of it): it may hold the emulator's CPU only.
    if guest_cell.dedicated_vcpus or emulator_count:
        packed = _pack(host_cell, guest_cell.dedicated_vcpus, request.cpu_thread_policy, emulator_count)
        if isinstance(packed, _Shortfall):
            return packed
        placement["pinning"], placement["emulator_cpus"] = packed
    return placement


def _page_size_for(host_cell: NUMACellState, guest_cell: GuestCell, asked: Any, use_free: bool) -> Any:
    """The page size a guest cell is backed with (None: the host's small pages), or a _Shortfall.

    As Nova's _numa_cell_supports_pagesize_request: small is the cell's smallest size, large the
    largest other size that has room, any the largest that has room, a number exactly that size.
    Huge pages are never overcommitted: total - reserved - used must hold the cell's memory.
    """
    memory_kb = guest_cell.memory_mb * _KIB_PER_MIB
    sizes = sorted(host_cell.pages_total, reverse=True)
    if asked is None:
        if not sizes:  # a driver that reports no pages: only the cell's memory
            room = host_cell.memory_mb - (host_cell.memory_used_mb if use_free else 0)
            if guest_cell.memory_mb > room:
                return _Shortfall(f"{guest_cell.memory_mb} MiB of memory", f"has {room} MiB")
            return None
        smallest = sizes[-1]
        room = host_cell.free_pages(smallest) if use_free else host_cell.pages_total[smallest]
        if memory_kb > room * smallest:
            return _Shortfall(f"{guest_cell.memory_mb} MiB of {smallest} KiB pages",
                              f"has {room * smallest // _KIB_PER_MIB} MiB")
        return None
    if asked == "small":
        candidates = sizes[-1:]
    elif asked == "large":
        candidates = sizes[:-1]
    elif asked == "any":
        candidates = sizes
    else:
        candidates = [asked] if asked in host_cell.pages_total else []
    if not candidates:
        offered = ", ".join(str(size) for size in sorted(sizes)) or "no"
        what = "huge" if asked == "large" else f"{asked} KiB" if isinstance(asked, int) else str(asked)
        need = (f"{memory_kb // asked} free {asked} KiB pages" if isinstance(asked, int) and memory_kb % asked == 0
                else f"{what} pages")
        return _Shortfall(need, f"offers only {offered} KiB pages")
    short = None
    for size_kb in candidates:
        if memory_kb % size_kb:
            continue
        if memory_kb // size_kb <= host_cell.free_pages(size_kb):
            return None if size_kb == sizes[-1] else size_kb
        # The largest size the memory divides into says what was short.
        short = short or _Shortfall(f"{memory_kb // size_kb} free {size_kb} KiB pages",
                                    f"has {max(host_cell.free_pages(size_kb), 0)}")
    return short or _Shortfall(f"{guest_cell.memory_mb} MiB in whole {candidates[0]} KiB pages", "cannot divide it so")


def _pack(host_cell: NUMACellState, vcpus: Tuple[int, ...], thread_policy: Optional[str],
          emulator_count: int) -> Any:
    """Pin ``vcpus`` to free dedicated CPUs of the cell, with ``emulator_count`` more for isolated
    emulator threads, as Nova's _pack_instance_onto_cores: siblings of one core first (prefer,
    require), the cores with the most free threads first, then any free CPU (prefer only); the
    emulator's CPU is the next free one in core order after those pinned (usually the sibling
    of the last one), so that the other cores stay whole.

    isolate takes one thread of each wholly free core and holds its siblings (the assignment
    says so, and the usage counts them) where the host has SMT siblings only in Nova's legacy
    mode (neither CPU set); with cpu_dedicated_set, Nova's placement keeps such guests off hosts
    with SMT (the HW_CPU_HYPERTHREADING trait), and so does this.
    """
    needed = len(vcpus) + emulator_count
    free = set(host_cell.dedicated_cpus) - host_cell.used_cpus
    label = "free dedicated CPUs" if not emulator_count else "free dedicated CPUs (one for the emulator threads)"
    if needed > len(free):
        return _Shortfall(f"{needed} {label}", f"has {len(free)}")
    threads_per_core = max(map(len, host_cell.siblings)) if host_cell.siblings else 1
    # Each core's free threads, in core order (Nova's free_siblings).
    free_cores = [[cpu for cpu in core if cpu in free] for core in host_cell.siblings]
    free_cores = [core for core in free_cores if core]
    if thread_policy == "isolate" and threads_per_core > 1 and not host_cell.legacy:
        return _Shortfall("cores without SMT siblings (hw:cpu_thread_policy=isolate)",
                          f"has {threads_per_core} threads per core")
    if not vcpus:
        # Guest cell 0 without dedicated vCPUs holds the emulator's CPU only: no thread policy
        # has a vCPU to place (Nova's packing finds no pinning to go after and refuses).
        return {}, [cpu for core in free_cores for cpu in core][:emulator_count]
    if thread_policy == "isolate" and threads_per_core > 1:
        whole = [core for core in free_cores if len(core) == threads_per_core]
        chosen = _pinning_and_emulator(vcpus, [core[:1] for core in whole], free_cores, emulator_count, isolate=True)
        if chosen is not None:
            return chosen
        if len(whole) >= len(vcpus):
            return _Shortfall("a free CPU off the isolated cores for the emulator threads",
                              f"has {len(whole)} wholly free cores and nothing else")
        return _Shortfall(f"{len(vcpus)} wholly free cores of {threads_per_core} threads "
                          f"(hw:cpu_thread_policy=isolate)", f"has {len(whole)}")
    if thread_policy == "require" and threads_per_core <= 1:
        return _Shortfall("SMT siblings (hw:cpu_thread_policy=require)", "has one thread per core")
    # The most free threads a core has down to one: at each count, the first that many free
    # threads of every core that has them.
    lowest = 2 if thread_policy == "require" else 1
    for threads in range(max(map(len, free_cores), default=0), lowest - 1, -1):
        usable = [core[:threads] for core in free_cores if len(core) >= threads]
        chosen = _pinning_and_emulator(vcpus, usable, free_cores, emulator_count)
        if chosen is not None:
            return chosen
    if thread_policy != "require":
        chosen = _pinning_and_emulator(vcpus, [[cpu] for core in free_cores for cpu in core], free_cores,
                                       emulator_count)
        if chosen is not None:
            return chosen
    return _Shortfall(f"{len(vcpus)} free dedicated CPUs on sibling threads (hw:cpu_thread_policy=require)",
                      f"has at most {max((len(core) for core in free_cores), default=0)} free threads on a core")


def _pinning_and_emulator(vcpus: Tuple[int, ...], usable: List[List[int]], free_cores: List[List[int]],
                          emulator_count: int, isolate: bool = False
                          ) -> Optional[Tuple[Dict[str, int], List[int]]]:
    """The vCPUs pinned in order onto ``usable`` and the emulator's CPUs after them, Nova's
    _get_pinning and _get_reserved: the first free CPUs in core order that are not pinned
    (isolate: on no core with a pinned thread). None where either is short."""
    cpus = list(chain.from_iterable(usable))
    if len(cpus) < len(vcpus):
        return None
    pinning = dict(zip(sorted(vcpus), cpus))
    if not emulator_count:
        return {str(vcpu): cpu for vcpu, cpu in pinning.items()}, []
    taken = set(pinning.values())
    if isolate:
        left = [cpu for core in free_cores if taken.isdisjoint(core) for cpu in core]
    else:
        left = [cpu for core in free_cores for cpu in core if cpu not in taken]
    if len(left) < emulator_count:
        return None
    return {str(vcpu): cpu for vcpu, cpu in pinning.items()}, left[:emulator_count]


def _assignment(request: NUMARequest, host_cell_ids: List[int], placed: List[Dict[str, Any]],
                topology: Mapping[str, Any]) -> Dict[str, Any]:
    cells = []
    emulator_isolated: List[int] = []
    pinned_and_floating: set = set()
    for guest_cell, host_cell, placement in zip(request.cells, host_cell_ids, placed):
        emulator_isolated.extend(placement["emulator_cpus"])
        pinned_and_floating.update(placement["pinning"].values())
        pinned_and_floating.update(placement["cpuset"])
        cells.append({"id": guest_cell.id, "host_cell": host_cell, "vcpus": list(guest_cell.vcpus),
                      "memory_mb": guest_cell.memory_mb, "page_size_kb": placement["page_size_kb"],
                      "pinning": placement["pinning"], "cpuset": placement["cpuset"]})
    # Where the emulator threads run, as Nova's libvirt driver pins them: their own dedicated CPU
    # (isolate), the host's cpu_shared_set (share, where set), else beside the guest's vCPUs.
    if emulator_isolated:
        emulator_cpus = sorted(emulator_isolated)
    elif request.emulator_threads_policy == "share" and topology.get("cpu_shared_set"):
        emulator_cpus = sorted(topology["cpu_shared_set"])
    else:
        emulator_cpus = sorted(pinned_and_floating)
    numa = {"cpu_policy": request.cpu_policy, "cells": cells, "emulator_cpus": emulator_cpus,
            "emulator_isolated": bool(emulator_isolated)}
    if request.cpu_thread_policy == "isolate":
        numa["cpu_thread_policy"] = "isolate"  # its CPUs' thread siblings are held too (numa_cells)
    return numa


def _reason(cells: List[NUMACellState], request: NUMARequest, fits: Dict[Tuple[int, int], Any],
            devices_reason: Optional[str], gave_up: bool) -> str:
    """Why no permutation fit: the guest cell that fits no host cell, else what the devices said,
    else that the search gave up, else that the guest cells cannot share out distinct host cells."""
    for guest_cell in request.cells:
        shortfalls = [(host_cell.id, fits.get((host_cell.id, guest_cell.id))) for host_cell in cells]
        if all(isinstance(item, _Shortfall) for _cell_id, item in shortfalls):
            prefix = f"guest cell {guest_cell.id}: " if len(request.cells) > 1 else ""
            needs = {item.need for _cell_id, item in shortfalls}
            if len(needs) == 1:
                haves = ", ".join(f"cell {cell_id} {item.have}" for cell_id, item in shortfalls)
                return f"{prefix}no NUMA cell with {needs.pop()}: {haves}"
            haves = ", ".join(f"cell {cell_id} {item.have} (needs {item.need})" for cell_id, item in shortfalls)
            return f"{prefix}no NUMA cell fits: {haves}"
    if devices_reason is not None:
        return devices_reason
    if gave_up:
        return (f"gave up after {PERMUTATIONS_TRIED_MAX} steps of putting {len(request.cells)} guest cells onto "
                f"{len(cells)} host cells")
    fitting = "; ".join(
        f"guest cell {guest_cell.id} fits host cell " + (", ".join(
            str(host_cell.id) for host_cell in cells
            if not isinstance(fits.get((host_cell.id, guest_cell.id)), _Shortfall)) or "none")
        for guest_cell in request.cells)
    return f"the guest's {len(request.cells)} NUMA cells fit no {len(request.cells)} distinct host cells: {fitting}"
