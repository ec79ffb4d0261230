#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Runs on the controller as the action plugin of the same name; this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: instance_info
short_description: List the instances in Berth's ledger
version_added: 0.1.0
description:
  - Reads the ledger; changes nothing. Contacts no hypervisor.
  - Each instance's C(address) is the one the P(berth.fleet.instances#inventory) inventory found for it (its
    C(ansible_host)) when a source of that inventory is among the play's inventories, else null.
options:
  name:
    description: Only the instances of this launch name (C(<name>-<index>), in index order), and an adopted instance of exactly this name.
    type: str
extends_documentation_fragment:
  - berth.fleet.ledger
attributes:
  check_mode:
    support: full
    description: Reads only.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Where do the web instances run?
  berth.fleet.instance_info:
    name: web
  register: web
"""

RETURN = r"""
instances:
  description:
    - Ledger rows (uuid, name, flavor, vcpus, memory_mb, root_gb, host, hypervisor_uuid, state, failure_reason,
      timestamps), each with C(age_s) (seconds since it was created) and C(address) (see the description).
  returned: always
  type: list
  elements: dict
ledger:
  description: The ledger read, its URL without a password.
  returned: always
  type: str
"""
