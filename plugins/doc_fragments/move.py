# The options of the actions that move an instance (berth.fleet.migrate, berth.fleet.resize;
# plugins/plugin_utils/_move.py); their argument specs derive from it.
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  source:
    description:
      - Where the destinations' host states come from - V(ledger) (the tracker sync's last record
        plus the claims, which each move moves) or V(inventory) (the inventory's live facts), as
        M(berth.fleet.schedule)'s option. The URIs of the hypervisors are the ledger's.
    type: str
    choices: [ledger, inventory]
    default: ledger
  hypervisor_group:
    description: The inventory group whose hosts carry C(berth_host_state) (O(source=inventory)).
    type: str
    default: hypervisors
  service_down_time:
    description: Seconds after its last sync that a hypervisor is stale and not a destination.
    type: int
    default: 600
  storage_pool:
    description: The storage pool of the instance's volumes, the same name on every host.
    type: str
    default: default
  timeout:
    description: Seconds each libvirt call may take, except the copies of whole disks.
    type: float
    default: 120
  transfer_timeout:
    description: Seconds a volume copy or a live migration itself may take.
    type: float
    default: 3600
  ledger:
    description: Unused; the ledger is always needed to move an instance.
    type: bool
    default: true
"""
