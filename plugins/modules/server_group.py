#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Runs on the controller as the action plugin of the same name; this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: server_group
short_description: Create, delete or list server groups in Berth's ledger
version_added: 0.1.0
description:
  - A server group, as in Nova, is a set of instances with a placement policy. Launch into one
    with the O(berth.fleet.schedule#module:server_group) option of M(berth.fleet.schedule) (by
    name); the claim locks the group, so concurrent launches cannot break a hard policy.
  - C(affinity) puts every member on one host; C(anti-affinity) puts no two on one host (or at
    most O(max_server_per_host)); C(soft-affinity) and C(soft-anti-affinity) are preferences
    for the weighers, never refusals.
  - A group's policy and rules never change once it exists (as in Nova); asking for the same
    name with different ones is an error. Deleting a group leaves its instances running.
options:
  name:
    description: The group's name. Required unless O(state=list), where it narrows the list to one group.
    type: str
  state:
    description: C(present) creates the group if it does not exist, C(absent) deletes it, C(list) only reads.
    type: str
    choices: [present, absent, list]
    default: present
  policy:
    description: The placement policy; required with O(state=present).
    type: str
    choices: [affinity, anti-affinity, soft-affinity, soft-anti-affinity]
  max_server_per_host:
    description: Rule of the C(anti-affinity) policy - how many members may share a host (default 1).
    type: int
extends_documentation_fragment:
  - berth.fleet.ledger
  - berth.fleet.limits
attributes:
  check_mode:
    support: full
    description: Says whether the group would be created or deleted; writes nothing.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Keep the database replicas on different hypervisors
  berth.fleet.server_group:
    name: db
    policy: anti-affinity

- name: Launch into it
  berth.fleet.schedule:
    name: db
    count: 3
    flavor: m1.medium
    server_group: db

- name: List the groups with their members and hosts
  berth.fleet.server_group:
    state: list
  register: groups

- name: Delete a group (its instances stay)
  berth.fleet.server_group:
    name: db
    state: absent
"""

RETURN = r"""
group:
  description: The group (as it is, or as it was before deletion); null when there was none to delete.
  returned: with state present or absent
  type: dict
  contains:
    uuid: {description: The group's id., type: str}
    name: {description: Its name., type: str}
    policy: {description: Its policy., type: str}
    rules: {description: "Its rules, e.g. C({max_server_per_host: 2}).", type: dict}
    members: {description: UUIDs of the member instances., type: list, elements: str}
    hosts: {description: Hosts on which the members hold claims., type: list, elements: str}
groups:
  description: Every group (or the one named), each as RV(group).
  returned: with state list
  type: list
  elements: dict
"""
