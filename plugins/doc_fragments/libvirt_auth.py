# The libvirt login options of the inventory plugins that connect to hypervisors
# (berth.fleet.hypervisors, berth.fleet.instances); Hypervisor reads the same variables.
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  username:
    description: The user name libvirt's authentication asks for (SASL, ESX...). Never shown.
    type: str
    env:
      - name: BERTH_LIBVIRT_USERNAME
  password:
    description: The password libvirt's authentication asks for. Never shown, never cached.
    type: str
    env:
      - name: BERTH_LIBVIRT_PASSWORD
"""
