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
from typing import Any, Mapping, Optional, Sequence, Tuple

from ansible_collections.berth.fleet.plugins.module_utils.scheduler import numa, pci
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor, HostState

Fit = Tuple[Optional[dict], Optional[str]]


@dataclass(frozen=True)
class ExactRequest:
    """What one instance asks beyond vCPUs, memory and disk: NUMA placement (``numa``), devices
    (``pci``), or both."""

    numa: Any = None
    pci: Any = None


def exact_request(flavor: Flavor, image_properties: Mapping[str, Any],
                  pci_alias: Sequence[Mapping[str, Any]] = (),
                  enabled_mdev_types: Sequence[str] = ()) -> ExactRequest | None:
    """The exact request of ``flavor`` and the image's properties, None when they ask for
    nothing exact (most instances); bad specs raise SchedulerInputError naming the spec."""
    numa_part = numa.numa_request(flavor, image_properties)
    pci_part = pci.pci_request(flavor, image_properties, pci.check_aliases(list(pci_alias)),
                               list(enabled_mdev_types))
    if numa_part is None and pci_part is None:
        return None
    return ExactRequest(numa=numa_part, pci=pci_part)


def of_spec(spec: Any) -> ExactRequest | None:
    """The exact request a RequestSpec computed when it was made (its ``numa`` and ``pci``)."""
    if spec.numa is None and spec.pci is None:
        return None
    return ExactRequest(numa=spec.numa, pci=spec.pci)


def fit(host_state: HostState, request: ExactRequest) -> Fit:
    """(assignment, None) when ``host_state`` can give the request beside what its assignments
    hold, else (None, why not)."""
    if request.numa is None:
        return pci.fit(host_state.pci_devices, host_state.assignments, request.pci)

    def devices(cells: Tuple[int, ...]) -> Fit:
        return pci.fit(host_state.pci_devices, host_state.assignments, request.pci, cells)

    return numa.fit(host_state.numa_topology, host_state.assignments, request.numa,
                    devices if request.pci is not None else None,
                    host_state.cpu_allocation_ratio, host_state.ram_allocation_ratio)


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
