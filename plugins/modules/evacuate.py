#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done on the controller by the action plugin of the same name
# (plugins/action/evacuate.py); this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: evacuate
short_description: Rebuild the instances of a dead, fenced hypervisor on other hosts, as Nova's evacuate does
version_added: 0.2.0
description:
  - Rebuilds every instance the ledger places on the hypervisor O(host) (C(ACTIVE), C(STOPPED),
    C(PAUSED), and C(ERROR) ones an earlier evacuation could not place) on other hosts, in the
    order of their names, as Nova's C(evacuate) does. Each comes back running.
  - Refused, saying why and before anything is done, unless O(host) is down - its last sync is
    older than O(service_down_time), as the scheduler counts a host down - and fenced.
  - Fenced means that the host cannot run its instances any more (powered off, cut from its
    storage); otherwise an instance would run twice, on the old host and the new, on the same
    disks or addresses (split brain). It is fenced by the operator's word given now
    (O(fenced=true), recorded in the ledger with O(fenced_by) and the time), by a fencing the
    ledger recorded since the host went down, or by the operator's O(fence_command), run on the
    controller, which fences it when it exits 0 (its output is recorded, cut to 2000 characters
    and made printable). The first tracker sync that reaches the host again clears the fencing.
  - Each instance is scheduled as a migration is, from the request it recorded at launch (zone,
    server group, hints, flavor, guest options, NUMA and device requests), the dead host never a
    candidate; its destination is claimed in one ledger transaction that re-checks room and its
    group's policy and also decides which run evacuates it, so two evacuations at once never
    rebuild one instance twice (the other reports it as evacuated by another run).
  - Its domain is rendered anew from its recorded request through the domain template. Its disks
    are kept where O(storage_pool) is one of O(shared_pools) (every host sees the same volumes);
    else they are made anew from its image, and the data of its root disk is lost - the plan (check
    mode) and each instance's report say so before anything is done.
  - An instance no host can take, or whose rebuild fails, is C(ERROR) with the reason and stays on
    the dead host in the ledger, with its claim there; run the evacuation again once there is room.
  - What an evacuated instance left on the dead host (its domain, and its volumes where they are
    not shared) is recorded; the first tracker sync (C(playbooks/gather.yml)) that reaches that
    host again removes it, even a domain that runs, and reports it (C(evacuated, removed)).
  - O(carry_definition) and O(transfer_timeout) do not apply (nothing is copied from the dead
    host); O(carry_definition=true) is refused.
options:
  host:
    description: The hypervisor to evacuate, by its name in the ledger.
    type: str
    required: true
  fenced:
    description:
      - The operator's word, now, that O(host) is fenced (it cannot run its instances any more).
        Recorded in the ledger with O(fenced_by) and the time. Give it only once you made sure.
    type: bool
    default: false
  fenced_by:
    description: Who the fencing is recorded as done by; by default this run (controller and process).
    type: str
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
    description: The plan - whether the host is down and fenced (a fence command is not run, a confirmation not
      recorded), where each instance would go and what becomes of its disks; claims, builds and records nothing.
      Each instance is decided on the ledger as it is, so a real run, which claims one after the other, may send
      later ones elsewhere.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Evacuate kvm02, which the operator powered off
  berth.fleet.evacuate:
    host: kvm02
    fenced: true
    fenced_by: alice

- name: Evacuate kvm03, fenced by the operator's fence command (berth_fence_command in the inventory)
  berth.fleet.evacuate:
    host: kvm03
"""

RETURN = r"""
host:
  description: The evacuated hypervisor.
  returned: always
  type: str
fencing:
  description: How O(host) is fenced (C(how)), and the fencing the ledger holds (C(fenced) - fenced_at,
    fenced_by, method C(confirmed) or C(fence_command), output), null in check mode where it would be made.
  returned: success
  type: dict
results:
  description:
    - One per instance, in the order evacuated - name, uuid, from_host, to_host, disks (kept, or made anew
      and the root disk's data lost), why (the scheduler's summary, or the reason it failed), outcome
      (C(evacuated), C(would evacuate), C(evacuated by another run), C(error)), and the instance as the
      ledger has it after.
  returned: success
  type: list
  elements: dict
report:
  description: One line per instance saying what became of it.
  returned: success
  type: list
  elements: str
"""
