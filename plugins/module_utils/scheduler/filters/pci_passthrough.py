from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import BaseHostFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.pci import fit
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

    name = "PciPassthroughFilter"
    host_fields = frozenset({"pci_devices", "assignments"})

    def is_noop(self, spec: RequestSpec) -> bool:
        return spec.pci is None

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        if spec.pci is None:
            return None
        _devices, why = fit(host_state.pci_devices, host_state.assignments, spec.pci)
        if why is None:
            return None
        # Asked again only for a host turned down: is it the other instances, or the host?
        _devices, idle_why = fit(host_state.pci_devices, [], spec.pci)
        if idle_why is not None:
            return self.reject(host_state, REASON_PCI_MISSING, detail=idle_why)
        return self.reject(host_state, REASON_PCI_IN_USE, detail=why)
