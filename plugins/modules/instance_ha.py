#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Runs on the controller as the action plugin of the same name; this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: instance_ha
short_description: Mark an instance HA (restarted elsewhere when its hypervisor fails) and set its priority
version_added: 0.2.0
description:
  - Changes, in Berth's ledger, whether an existing instance is an HA instance - one restarted on another
    hypervisor when its own fails, highest O(ha_priority) first - as the launch options
    O(berth.fleet.server#module:ha) and O(berth.fleet.server#module:ha_priority) set it at launch.
  - The ledger keeps both with the instance itself (not in its recorded launch request, which says how to
    re-create the guest), so they survive its moves, and the operator's failover headroom
    (C(berth_failover_hosts), M(berth.fleet.capacity)) counts the instance from the next run on.
  - Nothing on the hypervisor changes. Run again with the same values, it reports no change.
options:
  name:
    description: The instance, by its name in the ledger.
    type: str
    required: true
  ha:
    description: Whether the instance is restarted elsewhere when its hypervisor fails. Not given, left as it is.
    type: bool
  ha_priority:
    description: Its place in the restart order, from 0 to 1000, highest first. Not given, left as it is.
    type: int
extends_documentation_fragment:
  - berth.fleet.ledger
attributes:
  check_mode:
    support: full
    description: Says what would change; writes nothing.
  diff_mode:
    support: full
    description: Shows C(ha) and C(ha_priority) before and after.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Restart the database first when its hypervisor fails
  berth.fleet.instance_ha:
    name: db-1
    ha: true
    ha_priority: 100

- name: No longer restart a scratch instance
  berth.fleet.instance_ha:
    name: scratch-1
    ha: false
"""

RETURN = r"""
instance:
  description: The instance as the ledger has it after the change (in check mode, as it would).
  returned: success
  type: dict
  contains:
    name: {description: Its name., type: str}
    uuid: {description: Its uuid., type: str}
    host: {description: The hypervisor it is placed on., type: str}
    state:
      description: Its state, such as C(ACTIVE) or C(ERROR).
      type: str
    ha: {description: Whether it is an HA instance., type: bool}
    ha_priority: {description: Its restart priority., type: int}
msg:
  description: What changed, e.g. C(db-1 - ha False -> True, ha_priority 0 -> 100).
  returned: success
  type: str
"""
