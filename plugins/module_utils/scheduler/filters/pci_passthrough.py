from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    PCI_PASSTHROUGH_FILTER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import per_state
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    VectorReject,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.pci import PCIRequest, device_holdings, fit
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_PCI_IN_USE,
    REASON_PCI_MISSING,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class PciPassthroughFilter(BaseHostFilter):
    """Only hosts with the PCI devices and mediated devices (vGPUs) the flavor asks for free
    (Nova's: devices matching the alias, a PF and its VFs never both, free mdev instances).

    No NUMA affinity here: without the instance's cells every matching device counts, and the
    NUMA topology filter checks the devices per cell itself through fit's ``cells``. The detail
    names the short pool; "missing" when the host lacks them even with none in use (never), "in
    use" otherwise (not now).
    """

    name = PCI_PASSTHROUGH_FILTER
    host_fields = frozenset({"pci_devices", "assignments"})

    def is_noop(self, spec: RequestSpec) -> bool:
        return spec.pci is None

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        if spec.pci is None:
            return None
        verdict = _verdict(host_state.pci_devices, host_state.assignments, spec.pci)
        if verdict is None:
            return None
        return self.reject(host_state, verdict[0], detail=verdict[1])

    def vector_rejects(self, columns: Any, spec: RequestSpec) -> list[VectorReject]:
        import numpy as np  # the vectorised path only, which has NumPy

        request = spec.pci
        if request is None:
            return []
        # From the two columns, once per distinct state of the host's devices (assignment.per_state
        # over pci.device_holdings), without making a host state of each candidate.
        reasons = [verdict and verdict[0] for verdict in per_state(
            lambda assignments, devices: _verdict(devices, assignments, request),
            device_holdings(columns.assignments), (columns.pci_devices,))]
        return [(reason, None, None, np.array([found == reason for found in reasons], dtype=bool), None)
                for reason in (REASON_PCI_MISSING, REASON_PCI_IN_USE)]


def _verdict(pci_devices: Any, assignments: Any, request: PCIRequest) -> tuple[str, str] | None:
    """None when the devices fit, else (reason, why)."""
    _devices, why = fit(pci_devices, assignments, request)
    if why is None:
        return None
    # Asked again only for a host turned down: is it the other instances, or the host?
    _devices, idle_why = fit(pci_devices, [], request)
    if idle_why is not None:
        return REASON_PCI_MISSING, idle_why
    return REASON_PCI_IN_USE, why
