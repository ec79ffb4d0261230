#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Runs on the controller as the action plugin of the same name; this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: tracker_sync
short_description: Record the hypervisors' facts in Berth's ledger and reconcile it with the domains found
version_added: 0.1.0
description:
  - Berth's ResourceTracker update, run by C(playbooks/gather.yml) (schedule it in AWX or cron).
    Reads the C(berth_host_state) of each inventory hypervisor (from the P(berth.fleet.hypervisors#inventory)
    inventory plugin) and, in one transaction of the ledger
  - writes each answering hypervisor's inventories (per resource - vCPUs, memory, disk - the
    total, the reserved amount and the allocation ratio), keyed by its libvirt host UUID; the
    hypervisor's generation moves when they change;
  - records the domains the ledger does not know (orphans) as unmanaged usage, so nothing is
    scheduled onto their resources, and forgets orphans that are gone;
  - flags ACTIVE instances whose domain is not on their hypervisor (C(missing_since)), and
    clears the flag when the domain is back;
  - marks hypervisors of the ledger that are not in the inventory at all as C(missing) and
    reports them; on a limited run (O(limited), C(--limit)) they are only reported. A
    hypervisor that is in the inventory but did not answer is C(down). Neither is ever retired
    here, and their claims stay - M(berth.fleet.hypervisor) with C(state=retired) drops them;
  - releases a BUILDING claim only when its lease has expired, its hypervisor answered and no
    domain of the instance exists there (a run that died); its instance becomes ERROR. A live
    lease, or a claim whose domain exists, is never released.
  - Returns a drift report, one line per hypervisor (the ledger's usage beside the hypervisor's
    own view) and one per finding.
options:
  hypervisor_group:
    description: The inventory group whose hosts carry C(berth_host_state).
    type: str
    default: hypervisors
  hypervisors:
    description: Only these hosts of the group (gather.yml passes the play's hosts, which C(--limit) narrows).
    type: list
    elements: str
  limited:
    description: This run covers only part of the fleet; hypervisors not in it are reported, never marked missing.
    type: bool
    default: false
extends_documentation_fragment:
  - berth.fleet.ledger
attributes:
  check_mode:
    support: full
    description: Works out the whole reconciliation and reports it; writes nothing.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Sync the ledger with the hypervisors of this run
  berth.fleet.tracker_sync:
    hypervisors: "{{ ansible_play_hosts_all }}"
    limited: "{{ ansible_limit is defined }}"
  run_once: true
  register: sync

- name: Print the drift report
  ansible.builtin.debug:
    msg: "{{ sync.drift }}"
  run_once: true
"""

RETURN = r"""
drift:
  description: The drift report, one line per hypervisor and per finding.
  returned: always
  type: list
  elements: str
report:
  description: The findings as data.
  returned: always
  type: dict
  contains:
    hypervisors: {description: "Per answering hypervisor - host, uuid, generation, changed, orphans.", type: list, elements: dict}
    down: {description: Hypervisors in the inventory that did not answer., type: list, elements: dict}
    missing_hypervisors: {description: Hypervisors of the ledger not in the inventory (marked missing)., type: list, elements: dict}
    not_in_limited_run: {description: Hypervisors left out by a limited run., type: list, elements: dict}
    missing_instances: {description: ACTIVE instances whose domain is not on their hypervisor., type: list, elements: dict}
    found_again: {description: Instances flagged missing before whose domain is back., type: list, elements: dict}
    released_claims: {description: Expired claims released (no domain)., type: list, elements: dict}
    kept_expired_claims: {description: 'Expired claims kept, each with why.', type: list, elements: dict}
"""
