# The operator's settings of the actions that rebuild a down hypervisor's instances elsewhere
# (berth.fleet.evacuate, berth.fleet.ha_restart; plugins/plugin_utils/operations/evacuate.py and
# fence.py); their argument specs derive from it.
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  fence_command:
    description:
      - A command that fences a hypervisor (an IPMI or PDU power-off, say), run on the controller
        when a down hypervisor is not fenced otherwise; it fences the host when it exits 0. A list -
        the program, then its arguments, run without a shell; C({hypervisor}) in an argument is
        replaced by the host's name (which must be letters, digits, C(.), C(_) and C(-)). The
        program itself may not contain it.
      - An operator's setting, as C(berth_fence_command) in the inventory.
    type: list
    elements: str
    default: []
  fence_timeout:
    description: Seconds the fence command may take; one that takes longer has failed.
    type: float
    default: 60
  shared_pools:
    description:
      - The storage pools whose volumes every hypervisor sees (NFS, Ceph, a SAN), by name. An
        evacuated instance whose O(storage_pool) is one of them keeps its disks; any other is made
        anew from its image. An operator's setting, as C(berth_shared_pools).
    type: list
    elements: str
    default: []
  lease_seconds:
    description: Lease of the claim while the instance builds; a sync releases an expired one whose domain is not there.
    type: int
    default: 3600
"""
