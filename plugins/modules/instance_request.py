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
  - Checks the instance names (DNS labels, with their index), the count, the flavor, the image,
    networks, metadata, user data, SSH keys, scheduler hints and boot paths of a launch, each against its limits, so that bad
    input fails before M(berth.fleet.schedule) decides, claims or records anything.
  - Checks the guest's hardware options (firmware, disk bus, NIC model, guest agent, graphics).
  - Downloads an image given by C(image.url) into O(image_cache_dir) on the controller, unless
    it is there already, and refuses it when its checksum is not C(image.checksum), or when it
    fails the checks of an upload; this happens before M(berth.fleet.schedule) claims anything,
    and in check mode too (the dry run fills the controller's cache, nothing else).
  - Contacts no hypervisor. Which hypervisors have the image and the networks is known from the
    ledger's last tracker sync; M(berth.fleet.schedule) filters out those that lack them
    (C(PoolImageFilter), C(NetworkFilter)) and says so, given the C(image_volume) and
    C(requested_networks) this module returns. The image's safety (no link, no backing file
    outside the pool) is checked again on the chosen hypervisor before anything is made there.
options:
  name:
    description:
      - The launch name; instances are C(<name>-1) .. C(<name>-<count>).
      - Required; left unmarked so that a launch without it gets Berth's message saying how to give it.
    type: raw
  count:
    description: How many instances are wanted under O(name), 1 to 1000.
    type: raw
    default: 1
extends_documentation_fragment:
  - berth.fleet.launch
  - berth.fleet.guest
  - berth.fleet.seed
  - berth.fleet.image_download
  - berth.fleet.limits
attributes:
  check_mode:
    support: full
    description: Changes nothing on the fleet or the ledger; an image by URL is downloaded into the controller's cache, as in a real run.
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
    flavor: m1.small
    image: {name: debian-12.qcow2, source: /srv/images/debian-12.qcow2}
    networks: [{type: user}]

- name: Check a UEFI request with a cloud image by URL
  berth.fleet.instance_request:
    name: db
    image:
      name: debian-12-genericcloud-amd64.qcow2
      url: https://cloud.debian.org/images/cloud/bookworm/latest/debian-12-genericcloud-amd64.qcow2
      checksum: "sha512:{{ debian_12_sha512 }}"
    firmware: uefi
    graphics: {type: vnc}
"""

RETURN = r"""
names:
  description: The instance names the launch wants.
  returned: always
  type: list
  elements: str
request:
  description:
    - The request, checked, in the form the ledger records it with each instance (C(version) 2) - C(flavor) with its
      extra specs, C(image) (C(name), C(format), C(url), C(checksum), C(properties)), C(guest) (every guest hardware
      option as it will be built, the image's properties filling what the request did not say), C(networks) with
      their static settings (normalised), C(key_name), C(public_keys), C(metadata), C(boot), C(availability_zone),
      C(server_group), C(scheduler_hints), C(labels), C(project_id), C(domain_type), C(autostart). User data is checked but not
      returned (it may hold secrets).
  returned: always
  type: dict
image_downloaded:
  description: Whether this task downloaded the image given by C(image.url) into the controller's cache.
  returned: always
  type: bool
image_volume:
  description:
    - The volume every chosen hypervisor's pool must hold (M(berth.fleet.schedule)'s O(berth.fleet.schedule#module:image_volume));
      null without an image, or when the image has a C(source) to upload it from where it is missing.
  returned: always
  type: str
requested_networks:
  description: The libvirt networks every chosen hypervisor must define, by name.
  returned: always
  type: list
  elements: str
"""
