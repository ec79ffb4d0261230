#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done on the controller by the action plugin of the same name
# (plugins/action/capacity.py); this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: capacity
short_description: How many more instances of a flavor fit, per hypervisor and in total
version_added: 0.1.0
description:
  - Answers "how many more of flavor X fit, per host and in total, under the current filters?"
    for the ledger's hypervisors as the tracker sync last recorded them (O(source=ledger), the
    default), the inventory's live facts (O(source=inventory)) or explicit O(hosts), with the
    same filters, options and usage as M(berth.fleet.schedule). A hypervisor not synced for
    O(service_down_time) seconds counts 0, as stale.
  - Each host is counted as if it took every instance - the count is the largest number that
    M(berth.fleet.schedule) would place on that host alone, each instance consumed before the
    next is filtered (RAM, vCPUs and disk with their allocation ratios, instance and io-ops
    limits, anti-affinity C(max_server_per_host)). A filter that consumption cannot change (host
    down, zone, capabilities, image) makes the count 0 or leaves it alone.
  - The total is the sum over the hosts; with an C(affinity) O(server_group), whose instances
    must all share one host, it is the best host's count. A host that no enabled filter limits
    (for instance a flavor of zero size with only C(ComputeFilter)) counts as unlimited and the
    total is then null.
  - With the ledger on, the usage counted is the ledger's (claims plus unmanaged domains), as
    M(berth.fleet.schedule) sees it. Nothing is written.
  - With O(failover_hosts) set, also the failover headroom - whether the HA instances of that many failed
    hypervisors could be restarted on the rest, worked out with the filters and each instance's recorded
    request as an evacuation would place them, and which single hypervisor's loss could not be absorbed (RV(headroom)).
  - A module rather than a Jinja filter, because it needs the ledger's host states and usage,
    which a filter cannot reach without being handed them.
options:
  flavor:
    description: A flavor name from O(flavors_file), or an inline dict of sizes, as for M(berth.fleet.schedule).
    type: raw
    required: true
  flavors_file:
    description: A YAML file with a mapping C(berth_flavors) of name to sizes; default the collection's C(playbooks/vars/flavors.yml).
    type: path
  source:
    description: Where the host states come from, as M(berth.fleet.schedule)'s O(berth.fleet.schedule#module:source).
    type: str
    choices: [ledger, inventory]
    default: ledger
  service_down_time:
    description: Seconds after its last sync that a hypervisor is stale, as M(berth.fleet.schedule)'s option.
    type: int
    default: 600
  image_volume:
    description: The image volume a host's pool must hold, as M(berth.fleet.schedule)'s option.
    type: str
  requested_networks:
    description: The libvirt networks a host must define, as M(berth.fleet.schedule)'s option.
    type: list
    elements: str
    default: []
  hosts:
    description: Explicit host states instead of the ledger's or the inventory's, in the schema
      M(berth.fleet.schedule) documents for its O(berth.fleet.schedule#module:hosts).
    type: list
    elements: dict
  hypervisor_group:
    description: The inventory group whose hosts carry C(berth_host_state) (O(source=inventory)).
    type: str
    default: hypervisors
  ignore_hosts:
    description: Hosts to count as 0.
    type: list
    elements: str
    default: []
  availability_zone:
    description: As for M(berth.fleet.schedule).
    type: str
  image_id:
    description: As for M(berth.fleet.schedule).
    type: str
  image_properties:
    description: As for M(berth.fleet.schedule).
    type: dict
    default: {}
  scheduler_hints:
    description: As for M(berth.fleet.schedule).
    type: dict
    default: {}
  server_group:
    description: As for M(berth.fleet.schedule) (the dict form); anti-affinity limits each
      host to C(max_server_per_host) minus the members it holds.
    type: raw
  project_id:
    description: The project to count for, as for M(berth.fleet.schedule) (C(AggregateMultiTenancyIsolation)).
    type: str
    default: default
  ledger:
    description: Count against the ledger's usage. Off, the host states' own usage is used.
    type: bool
    default: true
  ledger_url:
    description:
      - SQLAlchemy URL of the ledger, as for M(berth.fleet.schedule). Never printed (its password hidden).
      - Not given, the play's C(berth_ledger_url) (an inventory's, as the lab's), else C($BERTH_LEDGER_URL), else
        C(sqlite:///$XDG_STATE_HOME/berth/ledger.sqlite3).
    type: str
extends_documentation_fragment:
  - berth.fleet.scheduler
  - berth.fleet.devices
  - berth.fleet.limits
  - berth.fleet.headroom
attributes:
  check_mode:
    support: full
    description: Reads only; runs the same in check mode.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: How many more m1.large fit in zone az1?
  berth.fleet.capacity:
    flavor: m1.large
    availability_zone: az1
  register: room

- name: Say it
  ansible.builtin.debug:
    msg: "{{ room.total }} more m1.large fit; per host {{ room.hosts | map(attribute='fits') | list }}"
"""

RETURN = r"""
total:
  description: How many fit in all (null when some host is not limited by any filter).
  returned: always
  type: int
hosts:
  description: Per host, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    host: {description: The host's name., type: str}
    fits: {description: How many more fit on it alone (null - no limit)., type: int}
    limited_by: {description: The filter that stops one more (or rejects the host outright)., type: str}
    reason:
      description:
        - Why one more does not fit, with the numbers - of the host once the instances that fit are placed
          on it (RV(hosts[].fits)), which the text says first (C(once 7 more are placed - insufficient vCPUs...)).
      type: str
    rejection: {description: 'The same as data (filter, reason, requested, used, limit, free).', type: dict}
    vcpus_used: {description: 'vCPUs used now, as C(CoreFilter) counts them (before the instances counted here).', type: float}
    vcpus_limit: {description: 'vCPUs x its allocation ratio, as C(CoreFilter) computes it.', type: float}
    memory_mb_used: {description: 'RAM used now in MB, reserved memory included, as C(RamFilter) counts it.', type: float}
    memory_mb_limit: {description: 'RAM x its allocation ratio in MB, as C(RamFilter) computes it.', type: float}
    disk_mb_used: {description: 'Disk used now in MB, as C(DiskFilter) counts it.', type: float}
    disk_mb_limit: {description: 'Disk x its allocation ratio in MB, as C(DiskFilter) computes it.', type: float}
    failed_builds:
      description: Builds that failed on it since its last successful one, which
        C(BuildFailureWeigher) weighs it down by (counted in the ledger by every build).
      type: int
summary:
  description: One line, e.g. C(14 more m1.small fit on 3 hosts (usage from the ledger at sqlite:///...)).
  returned: always
  type: str
ledger:
  description: The ledger whose usage was counted, its URL without a password; null with O(ledger=false).
  returned: always
  type: str
flavor:
  description: The resolved flavor.
  returned: always
  type: dict
headroom:
  description:
    - The failover headroom (N+k) for O(failover_hosts) failed hypervisors, from the ledger's HA
      instances (null when O(failover_hosts) is 0 or the ledger is off).
  returned: always
  type: dict
  contains:
    failover_hosts: {description: "O(failover_hosts): the fleet's k, or each aggregate's.", type: raw}
    held: {description: Whether every loss checked could be absorbed., type: bool}
    ha_instances: {description: The HA instances placed on the fleet's hypervisors., type: int}
    single_hosts_unabsorbed:
      description: The hypervisors whose loss alone could not be absorbed (some HA instance of theirs finds no host).
      type: list
      elements: str
    unabsorbed:
      description: Each loss that could not be absorbed - C(failed) (the hosts), C(placed) (instance - host,
        where the others would restart), C(unplaced) (each instance with the scheduler's reason).
      type: list
      elements: dict
    losses_checked: {description: How many losses were worked out., type: int}
    summary: {description: 'One line, e.g. C(failover headroom for 1 host (4 HA instances, 3 losses checked) - held).', type: str}
"""
