from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    PCI_WEIGHER,
    PCI_WEIGHT_MULTIPLIER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import per_state
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.pci import device_holdings, free_alias_devices
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import (
    BaseWeigher,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )

# As Nova's MAX_DEVS: past this many free devices a host is no scarcer than another, and an
# instance that asks for devices still stacks on the hosts with fewer.
MAX_DEVICES = 100


class PCIWeigher(BaseWeigher):
    """Hosts with fewer free PCI devices weigh more (Nova's): instances without devices keep
    off the hosts that have them, and those with devices stack, keeping whole hosts of free
    devices for large requests. Raw value: 100 - min(free, 99).

    The devices counted are those whose ids some PCI alias names (pci.free_alias_devices), where
    Nova counts those of its [pci] device_spec: docs/docsite/rst/numa.rst, "Where Berth differs".
    Without aliases every host weighs the same, and no device is read.
    """

    name = PCI_WEIGHER
    host_fields = frozenset({"pci_devices", "assignments"})
    multiplier_option = PCI_WEIGHT_MULTIPLIER
    default_multiplier = 1.0

    def host_fields_for(self, spec: RequestSpec) -> frozenset[str]:
        return self.host_fields if spec.pci_alias else frozenset()

    def raw_value(self, host_state: HostState, spec: RequestSpec) -> float:
        if not spec.pci_alias:
            return 0.0
        return _weight(host_state.pci_devices, host_state.assignments, spec)

    def vector_raw(self, columns: Any, spec: RequestSpec) -> Any:
        if not spec.pci_alias:
            return columns.zeros
        # From the two columns, once per distinct state of the host's devices (assignment.per_state
        # over pci.device_holdings), without making a host state of each candidate.
        return per_state(lambda assignments, devices: _weight(devices, assignments, spec),
                         device_holdings(columns.assignments), (columns.pci_devices,))


def _weight(pci_devices: Any, assignments: Any, spec: RequestSpec) -> float:
    free = free_alias_devices(pci_devices, assignments, spec.pci_alias)
    return float(MAX_DEVICES - min(free, MAX_DEVICES - 1))
