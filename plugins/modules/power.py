#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done on the controller by the action plugin of the same name
# (plugins/action/power.py); this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: power
short_description: Start, stop, pause, resume or reboot Berth instances
version_added: 0.2.0
description:
  - Brings the domain of each instance that O(name) stands for to O(state), on the hypervisor
    the ledger places it on (reached through the URI of its last sync), and records the
    instance's new state in the ledger, as Nova's C(vm_state) - V(running) is C(ACTIVE),
    V(stopped) C(STOPPED), V(paused) C(PAUSED).
  - A stopped or paused instance keeps its claim, as in Nova - its resources stay allocated on
    its hypervisor, so it can always start again there. M(berth.fleet.migrate) moves a stopped
    instance (cold); delete it to give its resources back.
  - V(stopped) shuts the guest down gracefully first, as Nova's clean shutdown does - libvirt
    presses the ACPI power button (again every 10 seconds, for a guest that was not listening
    yet) and Berth waits up to O(shutdown_timeout) seconds for the guest to power off; then it
    powers the domain off. A guest that ignores the power button (no ACPI daemon) is therefore
    powered off after O(shutdown_timeout) seconds; a paused guest cannot answer it and is powered
    off at once. Each instance's result says which (C(shutdown)).
  - V(paused) pauses a running domain (its vCPUs stop, its memory stays; Nova's pause); V(running)
    resumes a paused one or starts a stopped one. Pausing a stopped instance is refused, as in Nova.
  - V(rebooted) shuts the guest down as V(stopped) does and starts it again (a stopped instance is
    started); it changes something on every run, as M(ansible.builtin.service)'s V(restarted) does.
  - Idempotent otherwise - an instance whose domain is in O(state) already is not touched; if the
    ledger still records another state (drift the tracker sync has not seen yet), only the
    ledger changes.
  - Every instance is checked before any is touched (it must be C(ACTIVE), C(STOPPED) or
    C(PAUSED) in the ledger, its domain must exist, the transition must be allowed); a refusal
    changes nothing. Then the instances are acted on in parallel, each waiting for its own guest;
    one that fails does not stop the others, and the task fails after all were tried.
  - Each step is printed as it happens (C(web-1 on hv1 - asking the guest to shut down...),
    C(web-1 on hv1 - shut down by its guest)) on the controller's console.
options:
  name:
    description:
      - An instance name, or the name of a launch - C(web) stands for C(web) and C(web-1) ..
        C(web-N), as C(playbooks/delete.yml) takes it.
    type: str
    required: true
  state:
    description: What the instances' domains should be.
    type: str
    required: true
    choices: [running, stopped, paused, rebooted]
  shutdown_timeout:
    description:
      - Seconds a guest has to shut down after the power button is pressed, before its domain is
        powered off (Nova's C(shutdown_timeout), default 60 there too). V(0) powers off at once.
    type: int
    default: 60
  timeout:
    description: Seconds each libvirt call may take.
    type: float
    default: 30
extends_documentation_fragment:
  - berth.fleet.uri_policy
  - berth.fleet.ledger
attributes:
  check_mode:
    support: full
    description: Reads each domain's state and says what it would do to each instance; changes nothing.
  diff_mode:
    support: none
    description: Nothing to show beyond the instances' states in the result.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Stop web-1 .. web-N, giving each guest two minutes to shut down
  berth.fleet.power:
    name: web
    state: stopped
    shutdown_timeout: 120

- name: Start them again
  berth.fleet.power:
    name: web
    state: running

- name: Pause one instance
  berth.fleet.power:
    name: web-2
    state: paused
"""

RETURN = r"""
instances:
  description:
    - One entry per instance - C(name), C(host), C(was) (its state in the ledger before),
      C(domain_state) (libvirt's, before), C(action) (V(start), V(shut down), V(pause),
      V(resume), V(reboot), or null for none), C(state) (its state in the ledger now, or in check
      mode what it would be), C(changed), C(msg); C(shutdown) (V(graceful), V(powered off),
      V(off already)) where it was shut down; C(instance) (the ledger's row) when not in check mode;
      C(failed) where it failed.
  returned: always
  type: list
  elements: dict
"""
