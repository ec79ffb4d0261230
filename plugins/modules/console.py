#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done on the controller by the action plugin of the same name
# (plugins/action/console.py); this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: console
short_description: Show the last lines of a Berth instance's serial console
version_added: 0.2.0
description:
  - Returns the last O(lines) lines of the serial console log of the instance O(name), as Nova's
    C(get-console-output) (C(openstack console log show)) does - how to see why a guest does not
    boot. Changes nothing, in check mode or not.
  - The log is the file the instance's serial port writes on its hypervisor,
    C(<serial_log_dir>/<name>.serial.log). It holds everything the guest wrote on its console since
    the file was made (boots append to it), on that hypervisor - after a move, what the guest wrote
    before the move stays in the log on the hypervisor it left.
  - The hypervisor is the one the ledger places the instance on, reached through the URI of its last
    sync (checked against O(uri_policy), as every URI is); the instance may be in any state there,
    C(ERROR) too (a build that failed after its domain started leaves its log).
  - The file is read through libvirt's storage API, never by logging in to the hypervisor - as a
    volume of the active storage pool whose target is O(serial_log_dir) where the operator defined
    one (any name), else of a transient directory pool (C(berth-read-<random>)) that Berth starts
    for the read and destroys right after; a transient pool leaves nothing behind, not even across
    a restart of libvirt, so the task reports no change. The libvirt login must therefore be allowed
    to manage storage pools (a read-only connection is not enough). To have no pool come and go,
    define one over the directory, for example
    C(virsh pool-define-as berth-serial-logs dir --target /var/log/libvirt/qemu), then
    C(virsh pool-start berth-serial-logs) and C(virsh pool-autostart berth-serial-logs).
  - At most the last 64 KiB of the file are read and sent, whatever its size (volume download by
    offset and length), and the lines are taken from those; when they start inside the file, their
    first, cut line is dropped. C(truncated) says when earlier output was left out.
  - What the guest wrote is untrusted - it is decoded as UTF-8 with invalid bytes replaced by
    U+FFFD, the carriage return before each newline is dropped, and every other control or
    formatting character (escape sequences, carriage returns, bidirectional overrides, line
    separators; not tabs) is shown escaped, as C(\x1b) or C(\u202e), so that nothing in the
    output acts on a terminal or a web page.
  - Only a plain file is read - a symbolic link (where Berth can see one - the daemon on the
    controller's machine) or any other kind of volume is refused.
options:
  name:
    description: The instance, by its name in the ledger (a DNS label, such as C(web-1)).
    type: str
    required: true
  lines:
    description: How many lines, from the end (1 to 1000; at most the lines the last 64 KiB of the log hold).
    type: int
    default: 100
  timeout:
    description: Seconds each libvirt call may take.
    type: float
    default: 30
extends_documentation_fragment:
  - berth.fleet.serial_log
  - berth.fleet.uri_policy
  - berth.fleet.ledger
  - berth.fleet.limits
attributes:
  check_mode:
    support: full
    description: Reads only; the same in check mode.
  diff_mode:
    support: none
    description: Nothing to show.
notes:
  - Fails, saying why, for an instance the ledger does not know, one it places on no hypervisor (it never
    started), a hypervisor the ledger has no URI for or that cannot be reached, and an instance whose log
    does not exist (yet) on its hypervisor.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Why does web-1 not boot?
  berth.fleet.console:
    name: web-1
    lines: 40
  register: web_console

- name: Show it
  ansible.builtin.debug:
    msg: "{{ web_console.output }}"
"""

RETURN = r"""
output:
  description: The lines, oldest first, escaped as the description says; at most O(lines) of them.
  returned: success
  type: list
  elements: str
  sample: ["[    0.000000] Linux version 6.1.0-28-cloud-amd64", "BERTH-GUEST-BOOTED instance=6f1c..."]
truncated:
  description: Whether the log holds earlier output than C(output) shows.
  returned: success
  type: bool
log:
  description: The log's path on the hypervisor.
  returned: success
  type: str
  sample: /var/log/libvirt/qemu/web-1.serial.log
log_size_bytes:
  description: The log's size when it was read.
  returned: success
  type: int
read_bytes:
  description: How much of its end was read (at most 65536).
  returned: success
  type: int
name:
  description: The instance.
  returned: success
  type: str
uuid:
  description: The instance's UUID.
  returned: success
  type: str
host:
  description: The hypervisor the log was read on.
  returned: success
  type: str
state:
  description: The instance's state in the ledger.
  returned: success
  type: str
"""
