#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done on the controller by the action plugin of the same name
# (plugins/action/ha_restart.py); this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: ha_restart
short_description: Restart the HA instances of every down, fenced hypervisor on other hosts, highest priority first
version_added: 0.2.0
description:
  - The scheduled HA run (C(playbooks/ha.yml), meant for an AWX schedule every minute), as Proxmox
    VE's HA manager and oVirt's HA VMs restart their guests when a node dies.
  - Reads which hypervisors the ledger has down - their last sync older than O(service_down_time).
  - A down hypervisor with HA instances (C(ha) true, set at launch or by M(berth.fleet.instance_ha))
    to restart is fenced only by a fencing the ledger recorded since it went down (an operator's
    M(berth.fleet.evacuate) with C(fenced=true), say) or by the operator's O(fence_command); a
    scheduled run has no operator to confirm anything. A host that is not fenced - no fence command,
    or one that failed - is reported, with why, and none of its instances is touched; one that may
    still run them would run them twice (split brain). A down host without HA instances is reported
    and not fenced.
  - Then the HA instances of all the fenced hosts are rebuilt on other hosts as
    M(berth.fleet.evacuate) rebuilds them (scheduled from their recorded launch requests, claimed,
    domains rendered anew, disks kept on O(shared_pools) or made anew from their images), one
    after the other in one order across all those hosts - highest C(ha_priority) first, then by
    name - so that the most important come back first while there is room.
  - Each destination is claimed in the ledger transaction that also decides which run evacuates the
    instance, so two HA runs at once (a slow run and the next minute's) never rebuild one twice; the
    other reports it as evacuated by another run.
  - An HA instance no host can take is C(ERROR) with the reason and stays on its down host in the
    ledger; every later run tries it again, and fails the task while it cannot.
  - The other instances of a down host are not HA and are not touched; the report says how many,
    left to C(playbooks/evacuate.yml).
  - With nothing to do - no host down, or only instances already restarted - it reports no change.
  - O(carry_definition) and O(transfer_timeout) do not apply (nothing is copied from a dead host);
    O(carry_definition=true) is refused.
extends_documentation_fragment:
  - berth.fleet.evacuation
  - berth.fleet.scheduler
  - berth.fleet.devices
  - berth.fleet.uri_policy
  - berth.fleet.image_download
  - berth.fleet.ledger
  - berth.fleet.limits
  - berth.fleet.move
attributes:
  check_mode:
    support: full
    description: The plan - the down hosts, which would be fenced (a fence command is not run), where each
      HA instance would go and what becomes of its disks; claims, builds and records nothing.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Restart the HA instances of the down hypervisors (berth_fence_command in the inventory)
  berth.fleet.ha_restart:
  register: berth_ha

- name: Show what it did
  ansible.builtin.debug:
    msg: "{{ berth_ha.report }}"
"""

RETURN = r"""
hosts:
  description:
    - One per down hypervisor, by name - host, ha_instances and other_instances (how many of each it has),
      fenced (whether its HA instances are restarted), how (how it is fenced), why (why not, where not).
  returned: success
  type: list
  elements: dict
results:
  description:
    - One per HA instance restarted, in the order restarted (highest priority first) - ha_priority, name,
      uuid, from_host, to_host, disks, why (the scheduler's summary, or the reason it failed), outcome
      (C(evacuated), C(would evacuate), C(evacuated by another run), C(error)), as M(berth.fleet.evacuate)'s.
  returned: success
  type: list
  elements: dict
report:
  description:
    - A line per down hypervisor (down since when, fenced how or why not, how many instances are left to
      C(evacuate.yml)), then a line per HA instance in priority order (C(priority 100 - db-1 - evacuated to
      hv1 ...)).
  returned: success
  type: list
  elements: str
"""
