#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done on the controller by the action plugin of the same name
# (plugins/action/volume.py); this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: volume
short_description: Create, attach, detach and delete data volumes of Berth instances
version_added: 0.2.0
description:
  - A data volume (OpenStack Cinder's volume, on a hypervisor's storage pool) is a qcow2 file
    C(berth-volume-<name>.qcow2) of the operator's O(storage_pool) on one hypervisor, recorded in
    the ledger and claimed against that hypervisor's disk like an instance's disks - DiskFilter,
    the claims' re-check and C(playbooks/capacity.yml) count it, attached or not.
  - V(present) records the volume (its disk claimed under the hypervisor's lock, refused where it
    has no room) and then makes it, empty, of O(size_gb); if it cannot be made the record and the
    claim go. V(absent) deletes it, refused while it is attached.
  - V(attached) attaches it to O(instance), which must run on the volume's hypervisor (a volume
    is local to its host; one on another host is refused naming both). The disk is added to the
    domain's definition and, where the domain runs, hot-plugged into the guest in the same libvirt
    call (C(VIR_DOMAIN_AFFECT_CONFIG) and C(VIR_DOMAIN_AFFECT_LIVE)), on the next free device of
    the instance's disk bus after its own disks (C(vde) .. C(vdz) on virtio). The attachment is
    recorded in the ledger first and taken back if libvirt refuses it. A volume attached to
    another instance is refused.
  - V(detached) detaches it from its instance (its definition and, where it runs, the guest).
  - An attached volume moves with its instance - M(berth.fleet.migrate) cold or live,
    C(playbooks/drain.yml), a resize onto another host - as its own disks do (copied into the
    destination's pool, the source's copy removed), and its claim with it.
  - With O(state=present), O(pool) may name one of the operator's O(shared_pools) (NFS, Ceph RBD)
    instead. The volume is then made there through O(host), charged to no hypervisor's disk,
    attached to an instance wherever it runs, and no move copies it - the destination re-attaches
    the same file.
  - Idempotent - a volume already in O(state) is not touched.
options:
  name:
    description: The volume's name, a DNS label (unique in the ledger).
    type: str
    required: true
  state:
    description: What the volume should be.
    type: str
    choices: [present, absent, attached, detached]
    default: present
  size_gb:
    description: Its size in GiB, to create it (V(present)).
    type: int
  host:
    description:
      - Inventory name of the hypervisor whose O(storage_pool) holds it, to create it (V(present)); for a
        volume of one of O(shared_pools), the hypervisor it is made through.
    type: str
  instance:
    description: The instance to attach it to (V(attached)).
    type: str
  pool:
    description:
      - The pool to make it in (V(present)) - O(storage_pool) (the default) or one of O(shared_pools);
        any other is refused naming O(pool).
    type: str
  storage_pool:
    description: The storage pool of the instance's volumes, the same name on every host.
    type: str
    default: default
  shared_pools:
    description:
      - The storage pools whose volumes every hypervisor sees (NFS, Ceph, a SAN), by name. A volume
        made in one of them is charged to no hypervisor's disk and is never copied by a move. An
        operator's setting, as C(berth_shared_pools).
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds each libvirt call may take.
    type: float
    default: 30
extends_documentation_fragment:
  - berth.fleet.uri_policy
  - berth.fleet.ledger
  - berth.fleet.limits
attributes:
  check_mode:
    support: full
    description: Checks the volume, the instance and the room as a real run would (the claim re-checked and rolled
      back) and says what it would do; changes nothing.
  diff_mode:
    support: none
    description: Nothing to show beyond the volume in the result.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: A 10 GiB volume on kvm01
  berth.fleet.volume:
    name: data-1
    size_gb: 10
    host: kvm01

- name: Attached to web-1 (which runs on kvm01)
  berth.fleet.volume:
    name: data-1
    state: attached
    instance: web-1

- name: A 100 GiB volume on the shared pool nfs (one of berth_shared_pools), made through kvm01
  berth.fleet.volume:
    name: data-2
    size_gb: 100
    host: kvm01
    pool: nfs

- name: Detached again
  berth.fleet.volume:
    name: data-1
    state: detached

- name: Deleted
  berth.fleet.volume:
    name: data-1
    state: absent
"""

RETURN = r"""
name:
  description: The volume's name.
  returned: always
  type: str
volume:
  description:
    - The ledger's record of the volume - C(name), C(host), C(pool), C(size_gb), C(instance), C(target), its
      device in the instance's definition, and C(shared), whether its pool is a shared one (charged to no host) -
      as it was before a deletion or detachment; null when there is none.
  returned: always
  type: dict
"""
