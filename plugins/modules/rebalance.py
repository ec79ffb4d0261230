#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done on the controller by the action plugin of the same name; this file carries
# the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: rebalance
short_description: Plan and make moves that even out or pack the fleet, or empty one hypervisor
version_added: 0.2.0
description:
  - Plans a list of moves of the ledger's instances for O(goal), on the host states the scheduler
    reads from the ledger (claims as usage), and makes them in that order through the move of
    M(berth.fleet.migrate) - each destination claimed first, live where the domain runs and both
    hosts offer it (O(mode)), a stopped instance cold.
  - V(spread) evens the used fraction of RAM and vCPUs across the hypervisors; V(pack) empties
    the fewest hosts it can onto the hosts in use, keeping the failover headroom
    (O(failover_hosts)) where it holds; V(drain) empties O(host) over several others, each
    instance where the imbalance of the rest is lowest after it (C(playbooks/drain.yml)).
  - Every destination passes the scheduler's enabled filters for the instance's recorded request
    (its zone, hints, image properties, NUMA and devices), its server group as it would be with
    the moves planned before it, on host states that carry those moves.
  - Anti-churn (V(spread) and V(pack)) - with the figure at or under O(rebalance_threshold) nothing
    moves; a move that gains less than O(rebalance_min_gain) is not proposed; at most
    O(rebalance_max_moves) moves; an instance moved within O(rebalance_cooldown_seconds) stays.
  - In check mode it returns the plan (each move with the figure predicted after it) and moves
    nothing. Otherwise the first move that fails stops the run - that instance stays on its source,
    as after any failed move - and the answer names the moves made and those not tried.
  - Only ACTIVE and STOPPED instances move; a paused or building one is named in the plan's C(held).
options:
  goal:
    description: V(spread), V(pack) or V(drain) (with O(host)).
    type: str
    choices: [spread, pack, drain]
    default: spread
  host:
    description: The hypervisor a V(drain) empties (its inventory name, as in the ledger).
    type: str
  mode:
    description: How each instance moves - V(auto), V(cold) or V(live), as M(berth.fleet.migrate)'s option.
    type: str
    choices: [auto, cold, live]
    default: auto
  ledger_url:
    description: SQLAlchemy URL of the ledger (see M(berth.fleet.schedule)). Never printed.
    type: str
  migrate_max_retries:
    description:
      - As M(berth.fleet.migrate)'s option. The plan names each destination, so a live move whose
        destination cannot run the guest's CPU goes cold there (O(mode=auto)) or fails (O(mode=live)).
    type: int
    default: -1
  skip_cpu_compare_on_dest:
    description: As M(berth.fleet.migrate)'s option.
    type: bool
    default: false
extends_documentation_fragment:
  - berth.fleet.scheduler
  - berth.fleet.devices
  - berth.fleet.uri_policy
  - berth.fleet.limits
  - berth.fleet.move
  - berth.fleet.headroom
  - berth.fleet.rebalance
attributes:
  check_mode:
    support: full
    description: Plans and returns the plan; claims and moves nothing.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Show what evening out the fleet would move
  berth.fleet.rebalance:
    goal: spread
  check_mode: true

- name: Pack the fleet onto the fewest hosts, at most 20 moves
  berth.fleet.rebalance:
    goal: pack
    rebalance_max_moves: 20
"""

RETURN = r"""
plan:
  description:
    - The plan - C(goal), C(imbalance_before) and C(imbalance_after) (the packing figure for
      V(pack)), C(moves) in order (each C(name), C(uuid), C(from_host), C(to_host),
      C(imbalance_after), C(gain) and C(why)), C(stopped) (why the plan ends there) and C(held)
      (each instance left where it is, C(name) and C(reason)).
  returned: always
  type: dict
lines:
  description: The plan as the play prints it, one move a line with the figure after it.
  returned: always
  type: list
  elements: str
moved:
  description: The moves made, in order (C(name), C(from_host), C(to_host), C(mode)); empty in check mode.
  returned: always
  type: list
  elements: dict
failed_move:
  description: The instance whose move failed and stopped the run.
  returned: when a move failed
  type: str
not_tried:
  description: The instances of the plan after the one that failed.
  returned: when a move failed
  type: list
  elements: str
imbalance_now:
  description: The imbalance figure of the ledger's fleet after the moves made.
  returned: when not check mode
  type: float
packing_now:
  description: The packing figure after the moves made (V(pack)).
  returned: when not check mode and goal is pack
  type: float
"""
