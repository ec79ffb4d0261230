# The operator's device configuration (Nova's [pci] alias and [devices] enabled_mdev_types), for the
# modules that schedule or move instances: plugins/module_utils/scheduler/pci.py checks it.
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  pci_alias:
    description:
      - The PCI aliases a flavor's C(pci_passthrough:alias) extra spec (C(nic:2,gpu:1)) may name,
        as Nova's C([pci] alias) - a list of mappings (or of Nova's JSON strings), each with
        C(name), C(vendor_id) and C(product_id) (four hex digits, C(8086)), and optionally
        C(device_type) (C(type-PCI), C(type-PF), C(type-VF)) and C(numa_policy) (C(required),
        C(legacy), the default, C(preferred) or C(socket)). Entries sharing a name make one alias
        that matches any of them; they must agree on C(numa_policy) and each give the same
        C(device_type), as Nova requires.
      - As in Nova, aliases that do not check refuse only the requests that ask for an alias
        (C(pci_passthrough:alias)); the others go on without them.
      - A device no alias matches is never given to a guest - the aliases are the operator's list
        of assignable devices (Nova's C([pci] device_spec) and C(alias) in one).
      - Operator configuration, never a requester's - set it once as C(berth_pci_alias) in the
        controller's inventory (group vars of the play's hosts, C(localhost) for the shipped
        playbooks). A move takes the aliases of its own run, never a copy from the ledger.
    type: list
    elements: raw
    default: []
  enabled_mdev_types:
    description:
      - The mediated device types a flavor's C(resources:VGPU=N) may get (Nova's
        C([devices] enabled_mdev_types)), in the order preferred (C(nvidia-35)); empty, any type a
        host's devices offer. Operator configuration - set it as C(berth_enabled_mdev_types) like
        O(pci_alias).
    type: list
    elements: str
    default: []
"""
