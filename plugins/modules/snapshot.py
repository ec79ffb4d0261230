#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done on the controller by the action plugin of the same name
# (plugins/action/snapshot.py); this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: snapshot
short_description: Write an instance's root disk as an image that later launches use by name, as Nova's server image create
version_added: 0.2.0
description:
  - Writes the root disk of the instance O(name) as a standalone qcow2 image O(image) into the operator's image
    directory - the first of O(image_source_dirs) - with its SHA-256 checksum and the instance's image
    properties in C(<image>.berth-image.json) beside it. A later launch with C(image=<image>) (that name alone)
    uses it, uploaded from there to the hypervisors whose pool lacks it, with those properties.
  - A running guest is made consistent first - its file systems frozen through its QEMU guest agent where one
    answers; else, by O(snapshot_consistency), paused for the copy (V(pause), the default) or refused until it
    is stopped (V(stopped)). The copy is made on its own host (libvirt's C(createXMLFrom) reads the overlay and
    its base image into one file) and the guest thawed or resumed at once; the download to the controller comes
    after, while it runs.
  - An image of that name is never overwritten. Nothing is left when it fails - the copy in the pool, the
    partial file - and the instance and the ledger are never changed.
  - A run holds a journal in the image directory, C(.berth-snapshot-<instance uuid>.json), locked while it runs
    and saying what it holds (the guest paused or frozen, the partial file). The next snapshot of the instance
    undoes what a run that was killed left - resumes or thaws the guest, removes the copy and the unfinished
    image - and says so in RV(undone); another snapshot of the instance is refused while one runs.
options:
  name:
    description: The instance, by its name in the ledger.
    type: str
    required: true
  image:
    description: The new image's name (a volume name - no C(/), no C(..)), e.g. C(web-golden.qcow2).
    type: str
    required: true
  snapshot_consistency:
    description:
      - What a snapshot does with a running guest whose guest agent cannot freeze its file systems - V(pause) it
        for the copy on its host (its memory and disk stay as they are, a crash-consistent image), or refuse
        (V(stopped)) until it is stopped.
      - An operator setting (C(berth_snapshot_consistency)).
    type: str
    choices: [pause, stopped]
    default: pause
  storage_pool:
    description: The storage pool of the instance's volumes, the same name on every host.
    type: str
    default: default
  timeout:
    description: Seconds each libvirt call may take, except the copy and the download.
    type: float
    default: 120
  transfer_timeout:
    description: Seconds the copy on the host, and the download, may each take.
    type: float
    default: 3600
extends_documentation_fragment:
  - berth.fleet.uri_policy
  - berth.fleet.image_download
  - berth.fleet.ledger
  - berth.fleet.limits
attributes:
  check_mode:
    support: full
    description: Checks the name, the directory and the instance; nothing is touched.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: The golden image of web-1
  berth.fleet.snapshot:
    name: web-1
    image: web-golden.qcow2

- name: Launch two more like it
  berth.fleet.server:
    name: web-golden
    count: 2
    image: web-golden.qcow2
"""

RETURN = r"""
image:
  description: The new image's name.
  returned: always
  type: str
path:
  description: Where it was written on the controller.
  returned: always
  type: str
checksum:
  description: Its checksum, C(sha256:<hex>).
  returned: changed
  type: str
consistency:
  description: How the guest's disk was made consistent (frozen by its agent, paused, or it was not running).
  returned: changed
  type: str
properties:
  description: The image properties recorded with it (the instance's).
  returned: changed
  type: dict
undone:
  description: What this run undid that an earlier snapshot of the instance, killed halfway, had left.
  returned: changed
  type: list
  elements: str
"""
