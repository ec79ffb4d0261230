#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done on the controller by the action plugin of the same name
# (plugins/action/deployment.py); this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: deployment
short_description: Place a deployment's entries (flavor, count, server group) together, and claim them all or none
version_added: 0.2.0
description:
  - Places every instance of O(entries) - each entry C(<name>-1) .. C(<name>-<count>) of its flavor, in its
    server group - in one decision, as an application's tiers are placed, and claims them all in one ledger
    transaction, or nothing.
  - With O(placement=packing) (an operator setting; V(greedy) places the entries one after another in
    Nova's order) a solver (CP-SAT, the optional Python package
    C(ortools)) packs them onto as few hosts as it finds within O(packing_time_limit), keeping every enabled
    filter, each host's room with its allocation ratios, and each server group's policy across entries
    (entries of one group count each other's members). Without C(ortools), or with no answer in time, the
    greedy order places them; RV(packing) says which and why, and the gap to the solver's bound.
  - The hosts are the ledger's hypervisors as the tracker sync last recorded them, with the ledger's usage,
    as for M(berth.fleet.schedule). Check mode prints the placement and claims nothing.
  - The claims re-check each host's room and each group's hard policy from the ledger itself, every entry
    seeing those before it; if anything no longer fits, nothing is claimed and the task fails (run it again
    to decide on the fleet as it is then). Nothing is built - the instances are BUILDING claims, as
    M(berth.fleet.schedule) leaves them.
  - If every instance of the deployment exists already, nothing changes; if only some do, the task fails
    naming them (a deployment is all or nothing).
  - Not checked here yet - the failover headroom (O(berth.fleet.server#module:failover_hosts)) and the
    controller's URI policy on the chosen hosts, which a launch by M(berth.fleet.server) checks.
options:
  entries:
    description:
      - The deployment's entries, each a dict - C(name) (required; the instances are C(<name>-<index>), DNS
        labels), C(flavor) (required; a name from O(flavors_file) or a dict of sizes), C(count) (default 1),
        C(server_group) (a ledger group's name, created with M(berth.fleet.server_group)).
    type: list
    elements: dict
    required: true
  flavors_file:
    description: A YAML file with a mapping C(berth_flavors) of name to sizes; default the collection's C(playbooks/vars/flavors.yml).
    type: path
  service_down_time:
    description: Seconds after its last sync that a hypervisor is stale, as M(berth.fleet.schedule)'s option.
    type: int
    default: 600
  hypervisor_group:
    description: The inventory group of the hypervisors; an instance may not be named as one of them.
    type: str
    default: hypervisors
  lease_seconds:
    description: How long the BUILDING instances' claims hold, as M(berth.fleet.schedule)'s option.
    type: int
    default: 3600
  project_id:
    description: The project the instances belong to, as for M(berth.fleet.schedule) (C(AggregateMultiTenancyIsolation)).
    type: str
    default: default
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
  - berth.fleet.packing
attributes:
  check_mode:
    support: full
    description: Decides and reports the placement; claims nothing.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Place a three-tier application together (check mode prints where)
  berth.fleet.deployment:
    entries:
      - {name: web, flavor: m1.small, count: 20, server_group: web-spread}
      - {name: app, flavor: m1.medium, count: 10}
      - {name: db, flavor: m1.large, count: 2, server_group: db-spread}
  register: deployed
"""

RETURN = r"""
entries:
  description: Per entry, in the order given - C(name) and its C(placements) (as M(berth.fleet.schedule)'s
    RV(berth.fleet.schedule#module:placements), C(state) V(PLANNED) in check mode, else V(BUILDING) with the
    instance's C(uuid)).
  returned: when the deployment was placed
  type: list
  elements: dict
placements:
  description: Every entry's placements in one list.
  returned: always
  type: list
  elements: dict
packing:
  description:
    - How the deployment was placed - C(method) (V(packing) or V(greedy)), C(reason) (the solver's status, or
      why the greedy order), C(objective), C(hosts_used), C(greedy_hosts_used) (the greedy order's), C(best)
      and C(bound) (the solver's objective and proven bound), C(gap_percent), C(solve_s).
  returned: when the entries were decided
  type: dict
existing:
  description: The instances' ledger rows when every one exists already (nothing changes).
  returned: always
  type: list
  elements: dict
summary:
  description: One line per entry saying where its instances go, with how they were placed.
  returned: always
  type: str
timing:
  description: Seconds the task took in all (C(total_s)).
  returned: when the deployment was placed
  type: dict
"""
