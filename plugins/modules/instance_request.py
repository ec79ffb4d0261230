#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done on the controller by the action plugin of the same name; this file carries
# the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: instance_request
short_description: Check a launch request before anything is scheduled or claimed
version_added: 0.1.0
description:
  - Checks the instance names (DNS labels, with their index), the count, the image, networks,
    metadata, user data and boot paths of a launch, so that bad input fails before
    M(berth.fleet.schedule) claims anything.
  - When an image or a libvirt network is asked for, asks each answering hypervisor of
    O(hypervisor_group) (read only) whether it has them. An image that no hypervisor has and
    that has no C(source) to upload it from is refused; so is a network one of them lacks.
options:
  name:
    description: The launch name; instances are C(<name>-1) .. C(<name>-<count>).
    type: raw
    required: true
  count:
    description: How many instances are wanted under O(name), 1 to 1000.
    type: raw
    default: 1
  image:
    description:
      - A volume name in O(storage_pool), or a dict with C(name), C(format) (V(qcow2) or V(raw))
        and C(source), an absolute path on the controller to upload the image from where a
        hypervisor lacks it.
      - Names never leave the pool, no C(/), no C(..).
    type: raw
  networks:
    description: Interfaces, each a dict with C(type) (V(none), V(user), V(network), V(bridge)) and C(name).
    type: raw
    default: []
  metadata:
    description: Extra key/value pairs for the domains' Berth metadata.
    type: raw
    default: {}
  user_data:
    description: cloud-init user data (at most 64 KiB).
    type: raw
  boot:
    description: Direct kernel boot, C(kernel), C(initrd) (absolute paths on the hypervisor), C(cmdline).
    type: raw
    default: {}
  storage_pool:
    description: The storage pool that holds images and instance volumes.
    type: str
    default: default
  hypervisor_group:
    description: Inventory group of the hypervisors.
    type: str
    default: hypervisors
  timeout:
    description: Seconds each libvirt call may take.
    type: float
    default: 10
attributes:
  check_mode:
    support: full
    description: Never changes anything.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Check the request
  berth.fleet.instance_request:
    name: web
    count: 3
    image: {name: debian-12.qcow2, source: /srv/images/debian-12.qcow2}
    networks: [{type: user}]
"""

RETURN = r"""
names:
  description: The instance names the launch wants.
  returned: always
  type: list
  elements: str
hosts_with_image:
  description: Answering hypervisors whose pool holds the image.
  returned: always
  type: list
  elements: str
hosts_without_image:
  description: Answering hypervisors the image would be uploaded to if chosen.
  returned: always
  type: list
  elements: str
"""
