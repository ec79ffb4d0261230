#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done on the controller by the action plugin of the same name
# (plugins/action/rebuild.py); this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: rebuild
short_description: Make an instance's disks anew from an image on its own host, as Nova's server rebuild does
version_added: 0.2.0
description:
  - Removes the instance O(name)'s domain and disks (root, ephemeral, swap, seed) from its host and
    builds it there anew from O(image) - another image, or by default the one it was launched with -
    keeping its name, UUID, MAC addresses, static network settings, SSH keys, user data, flavor, server
    group and claim. The data of its disks is lost. It comes back running (C(ACTIVE)), whatever its state
    was.
  - The image is checked as a launch checks it (its name, format, URL and checksum, a source file only
    inside the operator's O(image_source_dirs)); then the host is asked, with the scheduler's filters on
    the request with the new image and the instance's own claim given back, whether it would take it -
    ImagePropertiesFilter (the image's C(hw_architecture), C(img_hv_type), C(hw_vm_mode) and
    C(img_hv_requested_version) against the host), the aggregates' image isolation, PoolImageFilter (the
    image volume there, unless it is uploaded from a source), the host up. A host that would not is
    refused with the filter's reason before anything is removed.
  - The guest's hardware options recorded at its launch are kept; the new image's properties are
    recorded with the instance (the scheduler and ImagePropertiesWeigher read them from then on).
  - While its disks are made anew the instance is C(ERROR) with the reason C(rebuilding from image ...) -
    a rebuild that dies half way leaves it so, with its claim, and a sync leaves it alone; run the
    rebuild again to finish it. A build that fails removes what it made and leaves it C(ERROR) the same way.
  - O(carry_definition) and O(transfer_timeout) do not apply; O(carry_definition=true) is refused.
options:
  name:
    description: The instance to rebuild, by its name in the ledger.
    type: str
    required: true
  image:
    description:
      - The image to rebuild from, as a launch's C(image) option of M(berth.fleet.server) - a volume name of the
        hypervisors' storage pool, or a dict with C(name), C(format), C(source) or C(url) and C(checksum), and
        C(properties). By default the image the instance was launched with (or last rebuilt from).
    type: raw
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
    description: The image checked (and downloaded, where it is given by URL) and the host asked; nothing removed,
      built or recorded.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Rebuild web-1 from the golden image
  berth.fleet.rebuild:
    name: web-1
    image: web-golden.qcow2

- name: Rebuild db-1 from the image it was launched with
  berth.fleet.rebuild:
    name: db-1
"""

RETURN = r"""
name:
  description: The rebuilt instance.
  returned: always
  type: str
uuid:
  description: Its UUID, kept.
  returned: always
  type: str
host:
  description: Its host, kept.
  returned: always
  type: str
image:
  description: The image it was rebuilt from.
  returned: always
  type: str
previous_image:
  description: The image it ran from before.
  returned: always
  type: str
instance:
  description: The instance as the ledger has it after the rebuild (not in check mode).
  returned: changed
  type: dict
"""
