#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Runs on the controller as the action plugin of the same name; this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: ledger_info
short_description: Read Berth's ledger - instances, claims, decisions, hypervisors, server groups
version_added: 0.1.0
description:
  - Reads the ledger; changes nothing. One kind of record per call, chosen by O(what).
  - Decisions come with the request and the host states they were made on, so that
    M(berth.fleet.schedule) can replay one (pass C(host_states) as O(berth.fleet.schedule#module:hosts)
    with O(berth.fleet.schedule#module:ledger=false)).
options:
  what:
    description: Which records to return.
    type: str
    choices: [instances, claims, decisions, hypervisors, server_groups, artefacts]
    default: instances
  name:
    description:
      - Narrows the answer - an instance name (C(instances)), a hypervisor's inventory name
        (C(claims), C(hypervisors); also its UUID for C(hypervisors)), a launch name (C(decisions)),
        a group name (C(server_groups)), a hypervisor's inventory name or an instance name (C(artefacts)).
    type: str
  instance:
    description:
      - With O(what=decisions), only the decisions that placed this instance (a launch of C(web) placed
        C(web-1) .. C(web-N)), newest first, each explained for that instance alone - why it went where
        it runs (C(playbooks/explain.yml)).
      - Decisions recorded by earlier versions of Berth do not name their instances and are not found this way.
    type: str
  limit:
    description: How many decisions, newest first.
    type: int
    default: 20
extends_documentation_fragment:
  - berth.fleet.ledger
attributes:
  check_mode:
    support: full
    description: Reads only, or reports what it would do and changes nothing.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Who holds claims on hv1, and until when?
  berth.fleet.ledger_info:
    what: claims
    name: hv1
  register: claims

- name: The last three decisions for the launch "web"
  berth.fleet.ledger_info:
    what: decisions
    name: web
    limit: 3
  register: decisions

- name: Why did web-2 go where it went?
  berth.fleet.ledger_info:
    what: decisions
    instance: web-2
    limit: 1
  register: why

- name: Say it
  ansible.builtin.debug:
    msg: "{{ why.decisions[0].explanation }}"

- name: Replay the newest one
  berth.fleet.schedule:
    name: web
    flavor: "{{ decisions.decisions[0].request.flavor }}"
    count: "{{ decisions.decisions[0].request.count }}"
    hosts: "{{ decisions.decisions[0].host_states }}"
    ledger: false
"""

RETURN = r"""
instances:
  description: Instances (uuid, name, flavor, sizes, image, host, hypervisor_uuid, state, failure_reason,
    missing_since, created_at, updated_at).
  returned: when what=instances
  type: list
  elements: dict
claims:
  description: Claims (id, instance_uuid, hypervisor_uuid, host, vcpus, memory_mb, disk_mb, owner,
    lease_expires_at - null once the instance runs, created_at).
  returned: when what=claims
  type: list
  elements: dict
decisions:
  description:
    - Decisions, newest first (id, created_at, owner, name, ok, outcome - decided, claimed, claim_conflict,
      no_valid_host or refused, where the run's own settings refused a chosen host and nothing was claimed -,
      summary, choice, alternates, request - with the C(names) of the instances it placed -, host_states,
      decision - each placement with its weighers' parts and its runners-up with theirs -, and C(explanation)).
    - C(explanation) is the same in lines of text - the request, the hosts each filter removed, each
      instance's host and weight by weigher beside the runners-up.
  returned: when what=decisions
  type: list
  elements: dict
hypervisors:
  description: Hypervisors (uuid, host, nodename, generation, disabled, disabled_reason, sync_status -
    up, down or missing -, down_reason, status_reason - why it is not up, as the scheduler says it,
    null when up -, synced_at, sync_age_s - seconds since that sync -, fenced - fenced_at,
    fenced_by, method and output of its fencing since it went down, null when not fenced -,
    inventories per resource with total, reserved and allocation_ratio, unmanaged domains, usage
    as the scheduler sees it).
  returned: when what=hypervisors
  type: list
  elements: dict
server_groups:
  description: Server groups (uuid, name, policy, rules, members, hosts).
  returned: when what=server_groups
  type: list
  elements: dict
artefacts:
  description:
    - What builds recorded before making it on a hypervisor and that is not yet known gone, nor its
      instance's own (id, host, hypervisor_uuid, uri, instance_uuid, instance_name, kind - domain or
      volume -, pool, name, owner, created_at). Rows whose instance holds no claim there are what
      dead builds left, which the tracker sync removes (M(berth.fleet.tracker_sync)).
  returned: when what=artefacts
  type: list
  elements: dict
ledger:
  description: The ledger read, its URL without a password.
  returned: always
  type: str
"""
