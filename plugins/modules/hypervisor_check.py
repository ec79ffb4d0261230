#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Runs on the controller as the action plugin of the same name; this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: hypervisor_check
short_description: Check that a hypervisor has what Berth needs, and say what is missing
version_added: 0.2.0
description:
  - Connects to the task's host through libvirt, from the controller, as a launch and the
    tracker sync do - with the C(berth_libvirt_uri), C(timeout) and C(storage_pool) its
    P(berth.fleet.hypervisors#inventory) source gives it, and the credentials of the
    environment (C(BERTH_LIBVIRT_USERNAME), C(BERTH_LIBVIRT_PASSWORD)) - and checks each
    prerequisite of the collection's install guide.
  - C(connection) - the URI passes Berth's URI policy (O(uri_policy)), and libvirt answers and lets this user manage it. A refused connection says what
    to look at for its kind of URI (for C(qemu+ssh://) the SSH user's key, the hypervisor's host
    key in C(known_hosts), and the user's C(libvirt) group or polkit rule); nothing else is
    checked then.
  - C(libvirt) - libvirt 9.0.0 or newer, the oldest Berth is tested with.
  - C(driver) - the QEMU driver, offering C(kvm) or C(qemu) guests.
  - C(storage_pool) - the source's storage pool exists, is active and is autostarted.
  - C(networks) - each network of O(networks) exists and is active; without O(networks), the
    active networks are listed.
  - Fails, for this host, when anything is missing, with each missing thing and how to mend it
    in C(msg) and C(missing). Changes nothing on the hypervisor or in the ledger.
  - C(playbooks/check.yml) runs it on every hypervisor of the inventory.
options:
  networks:
    description: The libvirt networks launches will attach instances to (their C(networks)).
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - berth.fleet.uri_policy
attributes:
  check_mode:
    support: full
    description: It only reads; check mode runs the same checks.
  diff_mode:
    support: none
    description: Nothing to show.
notes:
  - The host's variables must come from a P(berth.fleet.hypervisors#inventory) source (its
    C(berth_libvirt_uri) and C(berth_hypervisor)); run it on the hypervisors' group.
seealso:
  - plugin: berth.fleet.hypervisors
    plugin_type: inventory
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Check the hypervisors before the first sync
  hosts: hypervisors
  gather_facts: false
  tasks:
    - name: Check each hypervisor's prerequisites
      berth.fleet.hypervisor_check:
        networks: [default]
"""

RETURN = r"""
ready:
  description: Nothing is missing.
  returned: always
  type: bool
checks:
  description: Each check - check (its name), ok, detail (what was found, or what is missing and how to mend it).
  returned: always
  type: list
  elements: dict
missing:
  description: The details of the checks that failed, each prefixed with the check's name.
  returned: always
  type: list
  elements: str
summary:
  description: One line for a person - the host, then each check's detail (ready) or what is missing.
  returned: always
  type: str
"""
