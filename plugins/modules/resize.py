#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done on the controller by the action plugin of the same name
# (plugins/action/resize.py); this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: resize
short_description: Give a Berth instance another flavor, as Nova's resize does
version_added: 0.2.0
description:
  - Gives the C(ACTIVE) or C(STOPPED) instance O(name) the flavor O(flavor) (vCPUs, memory, root
    disk), as Nova's resize does; a running instance is shut down and started again, a stopped
    one stays stopped.
  - The new flavor is scheduled, as Nova schedules a resize - on the ledger's host states, with the
    instance's project and image properties. Its own host is preferred where the new flavor
    passes every filter there once the instance's own claim is given back (Nova's
    C(allow_resize_to_same_host=True); Nova only allows it, Berth prefers it because then nothing
    moves); else the scheduler picks one of the other hosts.
  - On its own host, the claim is resized in one ledger transaction that locks the hypervisor
    and re-checks its room from the ledger, as a launch's claim does. Until the domain runs with
    its new size the claim holds the larger of the two sizes in each resource, so that whichever
    size the host ends up running, nobody took its room. Then the guest is shut down (gracefully,
    within O(shutdown_timeout) seconds, as M(berth.fleet.power) does), the domain is redefined
    with the new vCPUs and memory (and the flavor's name in Berth's metadata), the root volume is
    grown to the new C(root_gb), and the domain is started again if it ran.
  - On another host, the destination is claimed first for the new flavor (locked and re-checked,
    with the instance's server group), as M(berth.fleet.migrate) does; the instance is moved cold
    by the same code as a cold migration, its domain redefined with the new size and its root
    volume grown on the way; the source's claim is released only once the domain is gone from it.
    What a migration refuses to move, a resize onto another host refuses too, before anything is
    claimed.
  - A failure at any step leaves the old size - on its own host the old definition and root
    volume size are put back and its claim gets its old size back; on another host the
    destination is cleaned up and its claim released. The domain is started again if it ran.
    The task fails and says so.
  - A disk is never shrunk - a flavor with a smaller C(root_gb) or C(ephemeral_gb) is refused, as
    Nova's libvirt driver refuses it. A domain with per-vCPU settings or NUMA cells is refused.
  - The ephemeral disk grows to the new C(ephemeral_gb) (it is made where the old flavor had
    none) and the swap disk is made anew at the new C(swap), as Nova makes it; the guest makes it
    swap space again at its next boot (the seed's vendor-data).
  - There is no confirm step - Nova keeps a resized instance in C(VERIFY_RESIZE), with the old one
    kept on its source host, until the user confirms or reverts it (or C(resize_confirm_window)
    confirms it). Berth confirms at once - once the resized domain is defined (and started, if it
    ran), the old one is gone and the ledger holds the new flavor. To go back, resize again to the
    old flavor (possible when the root disk did not grow).
  - The same flavor again (same name and sizes) changes nothing.
options:
  name:
    description: The instance name (as in the ledger).
    type: str
    required: true
  flavor:
    description:
      - The new flavor - a name from O(flavors_file) or a dict of sizes (C(vcpus), C(memory_mb),
        C(root_gb), C(ephemeral_gb), C(swap), C(name)), as M(berth.fleet.schedule) takes it.
    type: raw
    required: true
  flavors_file:
    description: YAML file with a mapping C(berth_flavors) of flavor names to sizes; default the collection's C(playbooks/vars/flavors.yml).
    type: path
  shutdown_timeout:
    description: Seconds the guest has to shut down after the power button is pressed, before it is powered off.
    type: int
    default: 60
  lease_seconds:
    description: Lease of the claim while the resize is under way (a tracker sync leaves the instance's state alone meanwhile).
    type: int
    default: 3600
extends_documentation_fragment:
  - berth.fleet.scheduler
  - berth.fleet.devices
  - berth.fleet.uri_policy
  - berth.fleet.ledger
  - berth.fleet.limits
  - berth.fleet.move
attributes:
  check_mode:
    support: full
    description:
      - Decides where the instance would be resized (its own host, or the scheduler's pick) and reports it, and
        refuses what the resize would refuse (a smaller disk, storage a move cannot carry); claims, stops and
        changes nothing.
  diff_mode:
    support: none
    description: Nothing to show beyond the flavors and hosts in the result.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Give web-1 the flavor m1.small (on its own host if it still fits)
  berth.fleet.resize:
    name: web-1
    flavor: m1.small

- name: Give db-1 more memory, with an inline flavor
  berth.fleet.resize:
    name: db-1
    flavor: {name: db.large, vcpus: 4, memory_mb: 16384, root_gb: 80}
    shutdown_timeout: 300
"""

RETURN = r"""
from_flavor:
  description: The flavor it had.
  returned: always
  type: str
to_flavor:
  description: The flavor it has now (or would have, in check mode).
  returned: always
  type: str
from_host:
  description: Where it ran.
  returned: always
  type: str
to_host:
  description: Where it runs now (or would, in check mode).
  returned: always
  type: str
same_host:
  description: Whether it stays on its own host.
  returned: changed
  type: bool
why:
  description: Why that host - its own host still has room, or why not and the scheduler's summary.
  returned: changed
  type: str
shutdown:
  description: How the guest was shut down - V(graceful), V(powered off) (after O(shutdown_timeout)) or V(off already).
  returned: changed and not check mode
  type: str
instance:
  description: The instance as the ledger has it afterwards.
  returned: changed and not check mode
  type: dict
source_left:
  description:
    - Why the instance's copy on RV(from_host) could not be removed once it ran on RV(to_host) (that
      host's libvirtd went away). The ledger follows the instance all the same; what it left there
      is recorded and removed by the next tracker sync (C(playbooks/gather.yml)) that reaches the
      host. A warning says so too.
  returned: when the source could not be cleaned up
  type: str
"""
