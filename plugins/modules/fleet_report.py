#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Runs on the controller as the action plugin of the same name; this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_report
short_description: Write the fleet as one self-contained HTML page, from Berth's ledger
version_added: 0.2.0
description:
  - Reads the ledger, and only the ledger (no hypervisor is contacted), and writes one HTML page
    of the fleet on the controller, at O(path).
  - "At the top, a summary: hypervisors counted by state, instances by state, the vCPU, RAM and
    disk used of the limit over the hypervisors that are up, and the most full hypervisors."
  - "Then every hypervisor with its zone and aggregates, its state - C(up); C(down) with the reason
    its last sync recorded; C(stale) when its last sync is older than O(service_down_time), with
    that sync's time and age; C(missing) when no inventory lists it any more; C(disabled) with the
    operator's reason -, its instances (state, flavor, server group) and unmanaged domains, and
    a bar per resource."
  - A bar is the resource's limit as the scheduler's filters compute it (capacity times the
    allocation ratio, with Nova's Newton-era formulas of the engine); its fill is what is used,
    the reserved amount first and then the claims (instances and unmanaged domains); a tick marks
    the capacity where the ratio puts the limit beyond it; a bar past its limit is red.
  - Then the server groups with their policy and members, and the newest O(decisions) scheduling
    decisions with their explanation (where each instance went and each weigher's part, or why no
    hypervisor could take it, host by host).
  - The page needs nothing from elsewhere (its style and script are inline; it works offline) and
    filters the hypervisors by name (a hypervisor's or one of its instances') and by state as you
    type. Every name and reason is escaped, and its Content-Security-Policy lets only its own
    script run.
  - The page is rewritten only when what it shows changes. It shows when it was written, but a
    later run that finds the same fleet leaves it as it is and reports no change; ages ("12 min
    ago") are counted by the page itself in the reader's browser from the absolute times it
    carries.
options:
  path:
    description:
      - The HTML file to write, on the controller. A relative path is taken from the directory
        ansible-playbook runs in. Its directory must exist.
    type: path
    required: true
  decisions:
    description:
      - How many of the newest decisions the page explains, at most 1000 (each is read whole).
      - The ledger keeps decisions for a bounded time (M(berth.fleet.tracker_sync)'s
        O(berth.fleet.tracker_sync#module:decisions_max_age_days) and
        O(berth.fleet.tracker_sync#module:decisions_max_count)).
    type: int
    default: 20
  service_down_time:
    description:
      - Seconds after its last sync that a hypervisor counts as stale, as in
        M(berth.fleet.schedule)'s O(berth.fleet.schedule#module:service_down_time) (Nova's
        C(service_down_time)). Give the same value as your launches.
    type: int
    default: 600
extends_documentation_fragment:
  - berth.fleet.ledger
  - berth.fleet.limits
attributes:
  check_mode:
    support: full
    description: Reads the ledger and renders the page, says whether it would change the file and how
      big it would be, and writes nothing.
  diff_mode:
    support: none
    description: The page is too large for a useful diff; the result says whether it would change.
notes:
  - A page of 10,000 hypervisors is made in about two seconds and weighs about 13 MB (0.6 MB
    gzipped); C(benchmarks/results/fleet_report.md) in the source repository has the figures.
seealso:
  - module: berth.fleet.ledger_info
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Write the fleet report
  berth.fleet.fleet_report:
    path: /var/www/html/fleet.html

- name: What would change, without writing (check mode)
  berth.fleet.fleet_report:
    path: fleet.html
    decisions: 50
    service_down_time: 300
  check_mode: true
  register: report
"""

RETURN = r"""
path:
  description: The absolute path of the page.
  returned: always
  type: str
bytes:
  description: The size of the page in bytes (as written, or as it would be written in check mode).
  returned: always
  type: int
hypervisors:
  description: How many hypervisors the page shows.
  returned: always
  type: int
instances:
  description: How many instances the page shows.
  returned: always
  type: int
states:
  description: Hypervisors per state (up, stale, down, missing), and how many are disabled.
  returned: always
  type: dict
  sample: {"up": 2, "stale": 0, "down": 1, "missing": 0, "disabled": 1}
msg:
  description: One line saying what was (or would be) written.
  returned: always
  type: str
"""
