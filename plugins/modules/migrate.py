#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done on the controller by the action plugin of the same name; this file carries
# the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: migrate
short_description: Move a Berth instance to another hypervisor
version_added: 0.1.0
description:
  - Moves the ACTIVE or STOPPED instance O(name) to O(to_host), or to the host the scheduler
    picks among the others (never the one it is on), with the instance's flavor, project and
    image properties and the ledger's usage. A stopped instance moves cold and stays stopped; a
    paused one is refused (resume it first).
  - The destination is claimed through the ledger first (re-checked for room); the source keeps
    the instance's amounts as held usage until the domain is gone from it, then releases them.
  - Cold migration stops the domain, copies its volumes to the destination's pool through libvirt
    streams (its base image too, if the destination lacks it), defines it there, starts it if it
    ran, and removes it and its volumes from the source.
  - Live migration (peer to peer, copying the disks) is used with O(mode=auto) where the domain
    runs and both hosts offer it in their capabilities; if it fails, O(mode=auto) falls back to
    cold migration and says why. The destination's hostvar C(berth_migration_address), or the
    play's variable of that name, if set, is the address the source's QEMU sends memory and disks
    to (else its hostname).
  - Before a live migration, as Nova's conductor and compute do, each destination the scheduler
    chooses is asked, through its own libvirt (C(compareHypervisorCPU), else C(compareCPU)),
    whether it can run the guest's CPU as the running domain has it on the source (a host-model
    CPU as libvirt expanded it, a host-passthrough guest the source host's CPU), and the custom
    CPU its definition asks for where the guest got less. A host that cannot, cannot be reached,
    or fails the comparison is passed over with the reason (libvirt's, naming the missing
    features) in RV(why), and the scheduler is asked again without it, up to
    O(migrate_max_retries) times. With no host left, a O(mode=live) migration is refused before
    anything is claimed, naming each host and its reason; O(mode=auto) moves cold to the first
    host chosen and says why in RV(live_refused). A guest under plain QEMU emulation (domain
    type C(qemu), TCG) is not compared, as Nova does not compare it - its CPU is QEMU's software.
    A cold move is not compared either, since the destination defines and starts the guest afresh,
    and libvirt checks its CPU as it starts it (a failed start leaves it on the source).
  - On any failure the destination is cleaned up, the domain runs on the source again and the
    claim goes back to the source.
  - Each step is printed as it happens (C(web-1 on hv1 - claimed hv2), C(web-1 on hv1 - moved to
    hv2 (live))) on the controller's console.
  - What moves is the domain's disks and CD-ROMs that are volumes of O(storage_pool) (an adopted
    domain's own disks too), with their backing chains, and a UEFI instance's variable store,
    the volume C(berth-<uuid>-nvram.fd) of that pool. A cold move copies the store once the
    domain is off. A live move copies it before QEMU moves the guest, and QEMU writes the flash
    contents it migrated into it as the guest resumes; the source's store is deleted.
  - Refused before anything is claimed, and in check mode too, are the following. Storage a
    move cannot carry (another pool, block or network disks, NVRAM outside the pool, as in
    libvirt's default C(/var/lib/libvirt/qemu/nvram)). A backing file outside the pool. A volume
    that another domain or volume on the source still uses. A volume name the destination
    already has.
options:
  name:
    description: The instance name (as in the ledger).
    type: str
    required: true
  to_host:
    description: Inventory name of the destination; omitted, the scheduler picks one.
    type: str
  mode:
    description: V(auto), V(cold) or V(live).
    type: str
    choices: [auto, cold, live]
    default: auto
  ledger_url:
    description: SQLAlchemy URL of the ledger (see M(berth.fleet.schedule)). Never printed.
    type: str
  migrate_max_retries:
    description:
      - How many more destinations a live migration tries after the scheduler's first choice cannot
        run the guest's CPU (Nova's option of that name); V(-1) until no host is left, V(0) the
        first choice only.
    type: int
    default: -1
  skip_cpu_compare_on_dest:
    description:
      - Do not compare the guest's CPU with the destinations before a live migration (Nova's
        C([workarounds]) option of that name). libvirt still checks the CPU on the destination
        during the migration, which then fails late, with the guest left on the source.
    type: bool
    default: false
extends_documentation_fragment:
  - berth.fleet.scheduler
  - berth.fleet.devices
  - berth.fleet.uri_policy
  - berth.fleet.limits
  - berth.fleet.move
attributes:
  check_mode:
    support: full
    description: Decides the destination and reports it, and refuses what the move would refuse (storage it cannot
      carry, a name clash on the destination); claims and moves nothing.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Move web-1 wherever the scheduler says
  berth.fleet.migrate:
    name: web-1

- name: Move web-2 to kvm02, cold
  berth.fleet.migrate:
    name: web-2
    to_host: kvm02
    mode: cold
"""

RETURN = r"""
from_host:
  description: Where the instance ran.
  returned: always
  type: str
to_host:
  description: Where it runs now (or would, in check mode).
  returned: always
  type: str
why:
  description:
    - Named by to_host, or the scheduler's summary; for a live migration, the hosts passed over
      before it and why (each CPU refusal names the features the host lacks), and whether its CPU
      was compared.
  returned: always
  type: str
mode:
  description: V(cold) or V(live), the way it moved.
  returned: changed and not check mode
  type: str
live_refused:
  description: Why an O(mode=auto) migration was not live (in check mode too, where no destination can run its CPU).
  returned: when mode is cold
  type: str
source_left:
  description:
    - Why the instance's copy on RV(from_host) could not be removed once it ran on RV(to_host) (that
      host's libvirtd went away). The ledger follows the instance all the same; what it left there
      is recorded and removed by the next tracker sync (C(playbooks/gather.yml)) that reaches the
      host. A warning says so too.
  returned: when the source could not be cleaned up
  type: str
"""
