#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done on the controller by the action plugin of the same name
# (plugins/action/rescue.py); this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: rescue
short_description: Boot an instance from a rescue image with its own disk attached, and back, as Nova's server rescue
version_added: 0.2.0
description:
  - With O(state=rescued), shuts the instance O(name) down on its host (gracefully, within
    O(shutdown_timeout) seconds, then powered off), makes a rescue disk from O(image) - by default the
    image it was launched with, as Nova does - and boots it from that disk, with its own root disk
    attached as its second disk (the root disk's device on the next letter, C(vdb) for C(vda)) and its
    seed (config drive) kept. Its ephemeral and swap disks and its data volumes are not attached while it
    is in rescue, as in Nova's libvirt driver. The instance is C(RESCUED) in the ledger, its claim kept;
    nothing moves, powers, rebuilds or snapshots it until it is unrescued, and a sync leaves it alone.
  - With O(state=unrescued), powers the rescue guest off, defines the instance again as Berth defines it
    (from its recorded request, every disk and volume back), removes the rescue disk and starts it -
    C(ACTIVE). An instance that is not in rescue is left as it is.
  - The rescue image is checked as a launch checks an image (its name, format, URL and checksum, a source
    file only inside the operator's O(image_source_dirs)), and the host is asked with the scheduler's
    filters whether it would take the instance with that image (ImagePropertiesFilter, PoolImageFilter,
    the host up), as M(berth.fleet.rebuild) asks; a host that would not, or a domain with what Berth did
    not define there (which the unrescue would lose), is refused before anything is changed.
  - A rescue that fails or dies half way leaves the instance C(RESCUED) with the reason; run the rescue
    again to finish it, or the unrescue to boot it from its own disk. An unrescue that dies is finished by
    running it again.
  - O(carry_definition) and O(transfer_timeout) do not apply; O(carry_definition=true) is refused.
options:
  name:
    description: The instance, by its name in the ledger.
    type: str
    required: true
  state:
    description: V(rescued) boots it from the rescue image; V(unrescued) from its own disk again.
    type: str
    choices: [rescued, unrescued]
    default: rescued
  image:
    description:
      - The rescue image (O(state=rescued)), as a launch's C(image) option of M(berth.fleet.server) - a volume
        name of the hypervisors' storage pool, or a dict with C(name), C(format), C(source) or C(url) and
        C(checksum), and C(properties). By default the image the instance was launched with (or last rebuilt
        from).
    type: raw
  shutdown_timeout:
    description: Seconds the guest has to shut down after the power button is pressed, before it is powered off.
    type: int
    default: 60
extends_documentation_fragment:
  - berth.fleet.scheduler
  - berth.fleet.devices
  - berth.fleet.uri_policy
  - berth.fleet.image_download
  - berth.fleet.ledger
  - berth.fleet.limits
  - berth.fleet.move
attributes:
  check_mode:
    support: full
    description: The image checked (and downloaded, where it is given by URL), the host asked and the domain
      compared with Berth's definition; nothing stopped, made, defined or recorded.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Boot web-1 from the rescue image, its own disk as vdb
  berth.fleet.rescue:
    name: web-1
    image: debian-rescue.qcow2

- name: Boot web-1 from its own disk again
  berth.fleet.rescue:
    name: web-1
    state: unrescued
"""

RETURN = r"""
name:
  description: The instance.
  returned: always
  type: str
uuid:
  description: Its UUID.
  returned: always
  type: str
host:
  description: Its host.
  returned: always
  type: str
state:
  description: Its state in the ledger after the task (C(RESCUED) or C(ACTIVE); in check mode, before).
  returned: always
  type: str
image:
  description: The rescue image (O(state=rescued)).
  returned: when state is rescued and changed
  type: str
"""
