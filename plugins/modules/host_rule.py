#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Runs on the controller as the action plugin of the same name; this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: host_rule
short_description: Write, delete or list the operator's host rules in Berth's ledger
version_added: 0.2.0
description:
  - A host rule says where some instances go with respect to a host aggregate, as oVirt's VM-to-host affinity and
    VMware DRS's VM-host rules do. C(must) - only hosts in the aggregate; C(must_not) - never a host in it;
    C(should) and C(should_not) - a preference, weighed with O(weight).
  - The instances a rule is about are selected by O(instance_name) (an fnmatch-style pattern, C(db-*)),
    O(instance_group) (a server group's name) or O(instance_label) (a label the requester gave at launch, the
    O(berth.fleet.server#module:labels) option); give one or more - every one given must match.
  - The hard kinds are C(HostRuleFilter)'s and the soft ones C(HostRuleWeigher)'s, both in the scheduler's default
    lists; each explains per host as every filter and weigher does - a rejected host names the rule. Every
    claim re-checks the hard rules inside its transaction, so a rule written between a decision and its claim is
    not broken, and every move (migrate, drain, resize, evacuate) schedules with the rules that select its
    instance, from the name, group and labels it recorded.
  - An operator's task - the requester picks labels, the operator writes the rules. A rule holds for what is
    placed or moved after it is written; instances placed against a new hard rule stay where they are until moved,
    and are listed in RV(breaking).
  - A rule's aggregate is an aggregate of the hypervisors as the ledger's last sync recorded them (the aggregates
    of the C(berth.fleet.hypervisors) inventory source, which makes each one an inventory group too).
options:
  name:
    description: The rule's name. Required unless O(state=list), where it narrows the list to one rule.
    type: str
  state:
    description:
      - C(present) writes the rule (a rule of that name is changed to this one), C(absent) deletes it, C(list) only
        reads.
    type: str
    choices: [present, absent, list]
    default: present
  kind:
    description: What the rule asks; required with O(state=present).
    type: str
    choices: [must, should, must_not, should_not]
  aggregate:
    description: The host aggregate the rule is about; required with O(state=present).
    type: str
  instance_name:
    description: Selects the instances whose names match this fnmatch-style pattern (C(web-*), C(db-[12])).
    type: str
  instance_group:
    description: Selects the members of this server group (M(berth.fleet.server_group)).
    type: str
  instance_label:
    description: Selects the instances launched with this label (O(berth.fleet.server#module:labels)).
    type: str
  weight:
    description:
      - How much a C(should) or C(should_not) rule counts against the other soft rules of the same instances
        (default 1.0); C(HostRuleWeigher)'s multiplier C(host_rule_weight_multiplier) scales them all against the
        other weighers. Not for the hard kinds.
    type: float
extends_documentation_fragment:
  - berth.fleet.ledger
attributes:
  check_mode:
    support: full
    description: Says whether the rule would be written or deleted, and which instances it would find placed against it; writes nothing.
  diff_mode:
    support: none
    description: Nothing to show; RV(before) is the rule as it was.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: The database instances run only on the hosts with fast disks
  berth.fleet.host_rule:
    name: db-on-ssd
    kind: must
    aggregate: ssd
    instance_label: db

- name: Keep the web tier off the hosts being retired, if it can
  berth.fleet.host_rule:
    name: web-not-old
    kind: should_not
    aggregate: old-racks
    instance_name: "web-*"
    weight: 2

- name: A requester's launch under that rule
  berth.fleet.server:
    name: pg
    flavor: m1.medium
    labels: [db]

- name: List the rules
  berth.fleet.host_rule:
    state: list
  register: rules

- name: Delete a rule
  berth.fleet.host_rule:
    name: web-not-old
    state: absent
"""

RETURN = r"""
rule:
  description: The rule as written (or as it was before deletion); null when there was none to delete.
  returned: with state present or absent
  type: dict
  contains:
    name: {description: Its name., type: str}
    kind: {description: Its kind., type: str}
    aggregate: {description: Its aggregate., type: str}
    weight: {description: Its weight (the soft kinds')., type: float}
    instance_name: {description: "Its name pattern, or null.", type: str}
    instance_group: {description: "Its server group, or null.", type: str}
    instance_label: {description: "Its label, or null.", type: str}
before:
  description: The rule of that name as it was before this task wrote it; null if it is new.
  returned: with state present
  type: dict
breaking:
  description:
    - The instances placed now against the rule (a hard one), each C({name, host}). They stay where they are; a
      move takes them where the rule holds.
  returned: with state present
  type: list
  elements: dict
rules:
  description: Every rule (or the one named), each as RV(rule) with C(created_at) and C(updated_at).
  returned: with state list
  type: list
  elements: dict
"""
