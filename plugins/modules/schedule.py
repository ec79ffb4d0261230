#!/usr/bin/python
# The work is done on the controller by the action plugin of the same name
# (plugins/action/schedule.py); this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: schedule
short_description: Place instances on libvirt hypervisors as Nova's FilterScheduler does, and claim them
version_added: 0.1.0
description:
  - Decides, for each of O(count) instances named C(<name>-1) .. C(<name>-<count>), which
    hypervisor it goes to. Hosts are filtered (O(enabled_filters)), the survivors weighed, the best
    taken, and its resources consumed before the next instance is placed, as Nova's
    FilterScheduler does.
  - Instances of those names that the ledger already holds (ACTIVE or BUILDING) are left alone,
    so a second identical run changes nothing. Instances in ERROR are placed again.
  - With the ledger on, the usage decided on is the ledger's (claims plus unmanaged domains),
    and the chosen hosts are claimed in one transaction that re-checks each host's room; a lost
    race decides again. Either every instance is placed and claimed, or none is.
  - When no host fits, the task fails before anything is claimed or defined, with a summary
    (C(0/3 hosts are available for instance 1 of 1 ...)) and each host's reason with numbers.
  - Runs on the controller; it needs no connection to the hypervisors.
options:
  name:
    description: Base name of the instances; each is C(<name>-<index>) and must be a DNS label.
    type: str
    required: true
  count:
    description: How many instances are wanted under O(name) (1 to 1000).
    type: int
    default: 1
  flavor:
    description:
      - A flavor name from O(flavors_file) (Nova's m1.tiny .. m1.xlarge are shipped), or an inline
        dict with C(vcpus), C(memory_mb) (MiB), C(root_gb), C(ephemeral_gb) (GiB) and C(swap) (MiB),
        and optionally C(name).
    type: raw
    required: true
  flavors_file:
    description: A YAML file with a mapping C(berth_flavors) of name to sizes.
    type: path
    default: the collection's playbooks/vars/flavors.yml
  hosts:
    description:
      - Explicit host states to decide for instead of the inventory's hypervisors ("what if",
        or replaying a recorded decision). Each uses the fields of C(berth_host_state) (see the
        M(berth.fleet.schedule) return value C(decision) and the inventory plugin
        P(berth.fleet.hypervisors#inventory)), chiefly C(host), C(nodename), C(uuid),
        C(service_up), C(disabled), C(vcpus_total), C(vcpus_used), C(total_usable_ram_mb),
        C(free_ram_mb), C(total_usable_disk_gb), C(free_disk_mb), C(num_instances),
        C(num_io_ops) and the allocation ratios and reserved amounts.
      - Usually with O(ledger=false), which decides without claiming anything.
    type: list
    elements: dict
  hypervisor_group:
    description: The inventory group whose hosts carry C(berth_host_state).
    type: str
    default: hypervisors
  enabled_filters:
    description: Filters to run, in order. Default C(ComputeFilter), C(RamFilter), C(CoreFilter), C(DiskFilter).
    type: list
    elements: str
  weighers:
    description: Weighers to apply. Default C(RAMWeigher).
    type: list
    elements: str
  ram_weight_multiplier:
    description: Nova's option; positive spreads instances over hosts, negative stacks them. Default 1.0.
    type: float
  host_subset_size:
    description: Pick at random among this many best hosts (1 is deterministic).
    type: int
    default: 1
  seed:
    description: Seed for the random pick, so a decision can be replayed.
    type: int
  max_attempts:
    description: Builds tried per instance; each placement comes with up to O(max_attempts) - 1 alternates.
    type: int
    default: 3
  ignore_hosts:
    description: Hosts never to use.
    type: list
    elements: str
    default: []
  force_hosts:
    description: Use only these hosts and skip the filters (as Nova does); the claim still checks room.
    type: list
    elements: str
    default: []
  force_nodes:
    description: Like O(force_hosts), by libvirt hostname.
    type: list
    elements: str
    default: []
  lease_seconds:
    description: How long a BUILDING claim is held for its run before a sync may release it.
    type: int
    default: 3600
  server_group:
    description:
      - The server group the instances join. A name is a group of the ledger (made with
        M(berth.fleet.server_group)); its members' hosts are read from the ledger, and the
        group is locked while the instances are claimed, so concurrent runs cannot break a hard
        C(affinity) or C(anti-affinity) policy.
      - A dict (C(name), C(policy), C(hosts), C(members), C(rules)) describes a group by hand for
        "what if" decisions; nothing is locked or written for it.
    type: raw
  ledger:
    description: Use the ledger (claims, identity). Off, the module only decides.
    type: bool
    default: true
  ledger_url:
    description:
      - SQLAlchemy URL of the ledger. Default C($BERTH_LEDGER_URL), else
        C(sqlite:///$XDG_STATE_HOME/berth/ledger.sqlite3) (C(~/.local/state/berth/ledger.sqlite3)).
      - Never printed; its password is hidden in every message.
    type: str
attributes:
  check_mode:
    support: full
    description: Decides and returns the plan; claims nothing.
  diff_mode:
    support: none
author:
  - Berth developers
"""

EXAMPLES = r"""
- name: Place three m1.small instances named web
  berth.fleet.schedule:
    name: web
    count: 3
    flavor: m1.small
  register: plan

- name: What if — decide for hosts described by hand, claiming nothing
  berth.fleet.schedule:
    name: db
    flavor: {vcpus: 4, memory_mb: 8192, root_gb: 40}
    ledger: false
    hosts:
      - {host: a, nodename: a, uuid: "1", service_up: true, vcpus_total: 8, vcpus_used: 2,
         total_usable_ram_mb: 16384, free_ram_mb: 4000, total_usable_disk_gb: 500, free_disk_mb: 400000}
"""

RETURN = r"""
placements:
  description: The instances placed by this run, in order.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: Instance name., type: str}
    uuid: {description: Instance UUID in the ledger (null in check mode or without the ledger)., type: str}
    host: {description: Inventory name of the chosen hypervisor., type: str}
    nodename: {description: Its libvirt hostname., type: str}
    hypervisor_uuid: {description: Its libvirt host UUID., type: str}
    uri: {description: Its libvirt URI from the inventory., type: str}
    alternates: {description: Next-best hosts for a retry., type: list, elements: str}
    flavor: {description: The resolved flavor., type: dict}
existing:
  description: Ledger rows of the wanted instances that exist already and were left alone.
  returned: always
  type: list
  elements: dict
summary:
  description: One line saying what was decided, or why nothing fits (kube-scheduler style).
  returned: always
  type: str
decision_id:
  description: The id under which the ledger keeps this decision with its request and host states
    (see M(berth.fleet.ledger_info) with C(what=decisions)), so it can be replayed.
  returned: when the ledger is used, outside check mode
  type: int
decision:
  description: The engine's whole decision - per placement the weights (raw, normalised, multiplier),
    limits, alternates and runners-up; the hosts rejected, each with the first filter that rejected
    it and the numbers (requested, used, limit, free).
  returned: when instances had to be placed
  type: dict
"""
