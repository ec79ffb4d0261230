# The serial_log_dir option: where each instance's serial console log is kept on its hypervisor,
# <serial_log_dir>/<name>.serial.log (roles/instance/templates/domain.xml.j2).
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  serial_log_dir:
    description:
      - Directory on the hypervisors for the serial console logs, C(<serial_log_dir>/<name>.serial.log),
        as M(berth.fleet.instance) writes them (the playbooks pass C(berth_serial_log_dir)).
      - An absolute path; C(..), C(.) and C(//) are refused.
    type: str
    default: /var/log/libvirt/qemu
"""
