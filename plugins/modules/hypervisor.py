#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Runs on the controller as the action plugin of the same name; this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: hypervisor
short_description: Disable, enable, retire or re-home a hypervisor in Berth's ledger
version_added: 0.1.0
description:
  - C(disabled) keeps the hypervisor and its instances but the scheduler skips it from then on
    (ComputeFilter rejects it as disabled, with the reason), as Nova's C(openstack compute
    service set --disable --disable-reason) does. C(enabled) lets it take instances again.
  - C(retired) is the operator saying the hypervisor is gone for good. Its claims are dropped
    (their instances become ERROR, with the reason), and so are its inventories and unmanaged
    usage. A tracker sync never does this by itself - it only marks a hypervisor missing.
  - C(rehomed) gives the hypervisor's host UUID to another inventory name (O(name)) and/or URI
    (O(uri)), with the O(reason) recorded on it (C(rehomed_reason) in
    M(berth.fleet.ledger_info)). A host's identity is the UUID it reports; a tracker sync never
    gives a UUID the ledger holds to another name or URI (that is an identity conflict, reported
    and refused - two hosts with one UUID, a copied SMBIOS or host_uuid, or a host claiming
    another's). Re-home a UUID when its host was renamed or readdressed; its instances follow.
  - The hypervisor is named by its inventory name or its libvirt host UUID, and must have been
    recorded by a sync (M(berth.fleet.tracker_sync), or a launch).
options:
  host:
    description: Inventory name or libvirt host UUID of the hypervisor.
    type: str
    required: true
  state:
    description: What the hypervisor should be.
    type: str
    choices: [enabled, disabled, retired, rehomed]
    required: true
  reason:
    description:
      - Why it is disabled; required with O(state=disabled), shown in every rejection.
      - Why its UUID is re-homed; required with O(state=rehomed), recorded.
    type: str
  name:
    description: With O(state=rehomed), the inventory name that owns the UUID from now on.
    type: str
  uri:
    description:
      - With O(state=rehomed), the URI the hypervisor is reached at from now on; it must pass
        O(uri_policy).
    type: str
extends_documentation_fragment:
  - berth.fleet.uri_policy
  - berth.fleet.ledger
attributes:
  check_mode:
    support: full
    description: Says what would change (and, for C(retired), which claims would be dropped); writes nothing.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Take kvm02 out of scheduling for a disk swap
  berth.fleet.hypervisor:
    host: kvm02
    state: disabled
    reason: disk swap, ticket OPS-1234

- name: Back in service
  berth.fleet.hypervisor:
    host: kvm02
    state: enabled

- name: kvm01 was renamed kvm01b; its host UUID goes with it
  berth.fleet.hypervisor:
    host: kvm01
    state: rehomed
    name: kvm01b
    uri: qemu+ssh://kvm01b.example.com/system
    reason: renamed in the rack move, ticket OPS-1300

- name: kvm07 was decommissioned - give its claims back
  berth.fleet.hypervisor:
    host: kvm07
    state: retired
"""

RETURN = r"""
host:
  description: The hypervisor's inventory name.
  returned: always
  type: str
uuid:
  description: Its libvirt host UUID.
  returned: when it is in the ledger
  type: str
disabled:
  description: Whether it is disabled now.
  returned: with state enabled or disabled
  type: bool
disabled_reason:
  description: Why.
  returned: with state enabled or disabled
  type: str
was:
  description: With state rehomed, the name and URI that held the UUID before ({host, uri}).
  returned: with state rehomed
  type: dict
rehomed_reason:
  description: With state rehomed, the reason recorded.
  returned: with state rehomed
  type: str
released_claims:
  description: The claims dropped by retiring it (id, instance_uuid, host, sizes, owner).
  returned: with state retired
  type: list
  elements: dict
"""
