#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Runs on the controller as the action plugin of the same name; this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: adopt
short_description: Take a domain that already exists on a hypervisor into Berth's ledger
version_added: 0.1.0
description:
  - Makes a domain that Berth did not build - defined by hand, by virt-install, by
    M(community.libvirt.virt) - a Berth instance where it is. Nothing about the domain moves or
    restarts.
  - In one ledger transaction the domain becomes an C(ACTIVE) instance with the domain's UUID, it
    gets a claim of its vCPUs, memory and disk on that hypervisor, and it stops counting as
    unmanaged usage (an orphan of the tracker sync). Berth's metadata (instance UUID, name,
    flavor) is written into the domain, running and persistent definition alike, so that the
    tracker attributes it. If the ledger write fails, the domain's metadata is put back.
  - Adoption records what already runs, so it is never refused for room. A hypervisor it leaves
    over its limits takes no new instances until something goes.
  - A second run changes nothing. A domain that was adopted before but lost its metadata gets it
    back.
  - C(playbooks/migrate.yml) then moves the instance like any other, with its disks in the storage
    pool. C(playbooks/delete.yml) deletes it like any other. It undefines the domain and removes the
    volumes Berth made. Disks that Berth did not make (the adopted domain's own) are left where
    they are.
options:
  host:
    description:
      - Name of the hypervisor the domain is on - a host of a P(berth.fleet.hypervisors#inventory)
        source (its live facts are synced first), or a hypervisor the ledger knows (reached at the
        URI of its last sync).
    type: str
    required: true
  domain:
    description: The domain's name or UUID, as virsh takes either.
    type: str
    required: true
  name:
    description:
      - The instance's name in the ledger, a DNS label. It must not be taken by another instance.
      - Default is the name in the domain's Berth metadata, else the domain's own name.
    type: str
  flavor:
    description:
      - A flavor name from O(flavors_file), or a dict of sizes (C(vcpus), C(memory_mb), C(root_gb)).
        Its vCPUs and memory must be the domain's. The ledger counts what runs.
      - Default is the domain's own sizes under the flavor name C(adopted). The disk is its volumes
        in the storage pools, rounded up to whole GB.
    type: raw
  flavors_file:
    description: YAML file with a C(berth_flavors) mapping; default the collection's C(playbooks/vars/flavors.yml).
    type: path
  timeout:
    description: Seconds allowed for each libvirt call.
    type: float
    default: 30
extends_documentation_fragment:
  - berth.fleet.uri_policy
  - berth.fleet.ledger
  - berth.fleet.limits
attributes:
  check_mode:
    support: full
    description: Says what would be adopted and under which name and sizes; writes nothing anywhere.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Take the hand-made legacy-db domain on kvm03 into the ledger
  berth.fleet.adopt:
    host: kvm03
    domain: legacy-db

- name: Adopt by UUID under a DNS-friendly name, as an m1.small
  berth.fleet.adopt:
    host: kvm03
    domain: 9f0c5a4e-2b8e-4b43-8f6e-0d1b1f7f2c11
    name: billing-1
    flavor: m1.small
"""

RETURN = r"""
instance:
  description: The instance as the ledger holds it (uuid, name, flavor, vcpus, memory_mb, root_gb, host, state ...).
  returned: success
  type: dict
domain:
  description: The domain (name, uuid, host, state, vcpus, memory_mb, and its Berth metadata).
  returned: success
  type: dict
msg:
  description: What was done, or why nothing was.
  returned: always
  type: str
"""
