from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    NUMA_TOPOLOGY_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler import numa

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import (
    fit,
    fit_facts,
    of_spec,
    per_state,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import SchedulerInputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    VectorReject,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_NUMA,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class NUMATopologyFilter(BaseHostFilter):
    """Only hosts whose NUMA cells can take the instance's guest cells, with the dedicated CPUs,
    pages and memory it asks (hw:cpu_policy, hw:mem_page_size, hw:numa_nodes...), beside what
    the assignments of the instances already there hold: Nova's filter of the same name, by the
    same fit the claim makes (assignment.fit: the host's allocation ratios as Nova's limits, and,
    where the request asks for PCI devices too, only cells whose devices the NUMA affinity
    policy lets it have, as Nova's filter passes the PCI requests to the fitting).

    A request that asks nothing NUMA passes every host. The rejection says which cell was short.
    """

    name = NUMA_TOPOLOGY_FILTER
    host_fields = frozenset({"numa_topology", "pci_devices", "assignments"})

    def is_noop(self, spec: RequestSpec) -> bool:
        return spec.numa is None

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        if spec.numa is None:
            return None
        assignment, reason = fit(host_state, of_spec(spec))
        if assignment is not None:
            return None
        return self.reject(host_state, REASON_NUMA, detail=reason)

    def vector_rejects(self, columns: Any, spec: RequestSpec) -> list[VectorReject]:
        import numpy as np  # the vectorised path only, which has NumPy

        if spec.numa is None:
            return []
        # From the columns, once per distinct host state (assignment.per_state), without making
        # a host state of each candidate; each distinct topology read into cells once, and each
        # distinct device fit made once, for all the hosts that share them whatever CPUs they hold.
        request = of_spec(spec)
        read: dict[int, Any] = {}
        device_fits: dict[tuple, Any] = {}  # the columns keep every keyed object alive meanwhile

        def fits(assignments: Any, numa_topology: Any, pci_devices: Any, cpu_allocation_ratio: float,
                 ram_allocation_ratio: float) -> bool:
            if id(numa_topology) not in read:
                try:
                    read[id(numa_topology)] = numa.read_cells(numa_topology)
                except SchedulerInputError:
                    read[id(numa_topology)] = None  # each host's fit says why
            return fit_facts(assignments, numa_topology, pci_devices, request, cpu_allocation_ratio,
                             ram_allocation_ratio, read[id(numa_topology)], device_fits)[0] is not None

        fitted = per_state(fits, columns.assignments, (columns.numa_topology, columns.pci_devices),
                           (columns.cpu_allocation_ratio.tolist(), columns.ram_allocation_ratio.tolist()))
        return [(REASON_NUMA, None, None, np.array([not found for found in fitted], dtype=bool), None)]
