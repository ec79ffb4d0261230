"""The exact host resources one instance takes: its NUMA cells, pinned CPUs and pages (numa.py)
with the PCI devices and mediated devices it asks for (pci.py) fitted together, as Nova's
numa_fit_instance_to_host checks the PCI requests of each cell permutation it tries.

One fit serves the three places that need it: NUMATopologyFilter and PciPassthroughFilter
ask whether a host can give it, the scheduler takes it off a chosen host (``take``) so that the
request's next instance sees it gone, and the claim fits it again under the hypervisor's lock
and records the result as the claim's assignment (docs/docsite/rst/numa.rst).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, TypeVar

from ansible_collections.berth.fleet.plugins.module_utils.scheduler import numa, pci
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor, HostState

Fit = Tuple[Optional[dict], Optional[str]]
T = TypeVar("T")


@dataclass(frozen=True)
class ExactRequest:
    """What one instance asks beyond vCPUs, memory and disk: NUMA placement (``numa``), devices
    (``pci``), or both; ``pci_alias``, the operator's aliases (checked), whose free devices order
    a host's NUMA cells as Nova's PCI pools do."""

    numa: Any = None
    pci: Any = None
    pci_alias: Tuple[Mapping[str, Any], ...] = ()


def exact_request(flavor: Flavor, image_properties: Mapping[str, Any],
                  pci_alias: Sequence[Mapping[str, Any]] = (),
                  enabled_mdev_types: Sequence[str] = ()) -> ExactRequest | None:
    """The exact request of ``flavor`` and the image's properties, None when they ask for
    nothing exact (most instances); bad specs raise SchedulerInputError naming the spec."""
    numa_part = numa.numa_request(flavor, image_properties)
    aliases = pci.request_aliases(list(pci_alias), flavor.extra_specs)
    pci_part = pci.pci_request(flavor, image_properties, aliases, list(enabled_mdev_types))
    if numa_part is None and pci_part is None:
        return None
    return ExactRequest(numa=numa_part, pci=pci_part, pci_alias=tuple(aliases))


def of_spec(spec: Any) -> ExactRequest | None:
    """The exact request a RequestSpec computed when it was made (its ``numa`` and ``pci``)."""
    if spec.numa is None and spec.pci is None:
        return None
    return ExactRequest(numa=spec.numa, pci=spec.pci, pci_alias=tuple(spec.pci_alias))


def fit(host_state: HostState, request: ExactRequest) -> Fit:
    """(assignment, None) when ``host_state`` can give the request beside what its assignments
    hold, else (None, why not)."""
    return fit_facts(host_state.assignments, host_state.numa_topology, host_state.pci_devices, request,
                     host_state.cpu_allocation_ratio, host_state.ram_allocation_ratio)


def fit_facts(assignments: Sequence[Mapping[str, Any]], numa_topology: Mapping[str, Any],
              pci_devices: Sequence[Mapping[str, Any]], request: ExactRequest,
              cpu_allocation_ratio: Optional[float], ram_allocation_ratio: Optional[float],
              read: Optional[List[numa.NUMACellState]] = None,
              device_fits: Optional[Dict[Tuple[Any, ...], Any]] = None) -> Fit:
    """fit, from a host's facts and assignments rather than its host state (the vectorised
    filters read them as columns). Where many hosts share facts: ``read``, numa.read_cells of
    ``numa_topology``; ``device_fits``, a dict that keeps each device fit by what it depends on
    (the devices, the assignments that hold some, the cells, the topology where the socket
    policy reads it), for the hosts that come after; also the free devices per NUMA node that
    order the cells."""
    if request.numa is None:
        return pci.fit(pci_devices, assignments, request.pci)
    devices = _HostDevices(assignments, numa_topology, pci_devices, request, read, device_fits)
    return numa.fit(numa_topology, assignments, request.numa, devices.fit if request.pci is not None else None,
                    cpu_allocation_ratio, ram_allocation_ratio, read,
                    free_devices=devices.free if request.pci_alias and pci_devices else None,
                    devices_asked=request.pci is not None and bool(request.pci.devices))


class _HostDevices:
    """One host's devices as a NUMA fit asks about them: which the request gets on some host
    cells (``fit``), and how many are free per NUMA node (``free``), each kept in
    ``device_fits`` (where given) by what it depends on: the devices, the assignments that hold
    some (hosts pinning different CPUs share them), the cells, the topology where the socket
    policy reads it."""

    __slots__ = ("assignments", "numa_topology", "pci_devices", "request", "read", "device_fits", "held", "key")

    def __init__(self, assignments: Sequence[Mapping[str, Any]], numa_topology: Mapping[str, Any],
                 pci_devices: Sequence[Mapping[str, Any]], request: ExactRequest,
                 read: Optional[List[numa.NUMACellState]], device_fits: Optional[Dict[Tuple[Any, ...], Any]]) -> None:
        self.assignments, self.numa_topology, self.pci_devices = assignments, numa_topology, pci_devices
        self.request, self.read, self.device_fits = request, read, device_fits
        # Only the assignments that hold devices count: what the fits below depend on.
        self.held: Sequence[Any] = assignments
        self.key: Tuple[Any, ...] = ()
        if device_fits is not None:
            self.held = pci.device_holdings([assignments])[0]
            self.key = (id(pci_devices), tuple(map(id, self.held)))

    def fit(self, cells: Tuple[int, ...]) -> Fit:
        request = self.request.pci
        sockets = numa.cell_sockets(self.numa_topology, self.read) if request.wants_sockets else None
        if self.device_fits is None:
            return pci.fit(self.pci_devices, self.held, request, cells, sockets)
        key = (*self.key, cells, id(self.numa_topology) if sockets is not None else None)
        if key not in self.device_fits:
            self.device_fits[key] = pci.fit(self.pci_devices, self.held, request, cells, sockets)
        return self.device_fits[key]

    def free(self) -> Optional[Mapping[Any, int]]:
        if self.device_fits is None:
            return pci.free_alias_devices_by_node(self.pci_devices, self.held, self.request.pci_alias)
        key = ("free", *self.key, id(self.numa_topology))
        if key not in self.device_fits:
            by_node = pci.free_alias_devices_by_node(self.pci_devices, self.held, self.request.pci_alias)
            # None where every cell has as many (most hosts: one device of a kind per cell, or
            # none): they would not reorder the cells, and each host would sort them for nothing.
            cell_ids = [cell.id for cell in self.read] if self.read is not None else None
            if cell_ids is not None and len({by_node.get(cell_id, 0) for cell_id in cell_ids}) <= 1:
                by_node = None
            self.device_fits[key] = by_node
        return self.device_fits[key]


def per_state(function: Callable[..., T], assignments: Sequence[Sequence[Any]], facts: Sequence[Sequence[Any]],
              numbers: Sequence[Sequence[Any]] = ()) -> List[T]:
    """``function(held, *facts, *numbers)`` for each host (its assignments, then its value of
    each column of ``facts`` and ``numbers``), called once per distinct host state: a fleet of a
    few hardware classes whose hosts hold the same instances' assignments (or none) costs a few
    fits, not one per host.

    Facts compare by identity, numbers by value: the ledger's read gives every host with the
    same fact text the same parsed object (host_states._parsed), and the engine never changes
    one. A host's assignments compare as the identities of their items, in order (parsed the
    same way; take() gives a consumed host a new list with a new item). ``function`` must read
    nothing else. The columns hold every keyed object until the call returns, so no id is reused
    meanwhile."""
    held_keys = [tuple(map(id, held)) if held else () for held in assignments]
    keys = list(zip(held_keys, *[map(id, column) for column in facts], *numbers))
    answers: Dict[Tuple[Any, ...], T] = {}
    for key, values in zip(keys, zip(assignments, *facts, *numbers)):
        if key not in answers:
            answers[key] = function(*values)
    return [answers[key] for key in keys]


def take(host_state: HostState, request: ExactRequest | None) -> Fit:
    """Fit ``request`` on a chosen host and add the assignment to the host's (a new list: copies
    of a host state share the old one), so that the request's next instance sees it gone:
    fit's answer, (None, None) when nothing is asked. Where the host cannot give it, nothing is
    taken (NUMATopologyFilter and PciPassthroughFilter say so, the claim refuses with the reason)."""
    if request is None:
        return None, None
    assignment, reason = fit(host_state, request)
    if assignment is not None:
        host_state.assignments = [*host_state.assignments, assignment]
    return assignment, reason
