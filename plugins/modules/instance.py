#!/usr/bin/python
# The work is done on the controller by the action plugin of the same name
# (plugins/action/instance.py), which reaches the hypervisor through its libvirt URI; this file
# carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: instance
short_description: Build or remove the libvirt domain of one placed Berth instance
version_added: 0.1.0
description:
  - With O(state=active), on the hypervisor O(host) reached through O(uri), creates the
    instance's root volume in O(storage_pool) through libvirt's storage API, renders the domain
    XML from O(template) with Jinja2 autoescaping (every value is XML-escaped), defines the
    domain and starts it, then marks the instance ACTIVE in the ledger.
  - If any step fails, the domain and the volume are removed again, the claim is released and
    the instance is marked ERROR with the reason; the task fails.
  - A domain already running under the instance's UUID is left alone (no change).
  - With O(state=absent), destroys and undefines the domain, deletes its volume and removes
    the instance and its claim from the ledger. Idempotent.
  - Normally used through the role C(berth.fleet.instance), with placements from
    M(berth.fleet.schedule).
options:
  state:
    description: Whether the instance's domain should run (V(active)) or be gone (V(absent)).
    type: str
    choices: [active, absent]
    default: active
  name:
    description: Instance name; also the domain name.
    type: str
    required: true
  uuid:
    description: Instance UUID from the ledger; also the domain UUID.
    type: str
    required: true
  host:
    description: Inventory name of the hypervisor (for messages).
    type: str
    required: true
  uri:
    description: libvirt URI of the hypervisor.
    type: str
    required: true
  flavor:
    description: The flavor (C(name), C(vcpus), C(memory_mb), C(root_gb) ...); required with O(state=active).
    type: dict
  template:
    description: Domain XML template, looked up in the role's templates/ like M(ansible.builtin.template).
    type: str
    default: domain.xml.j2
  domain_type:
    description: libvirt domain type, V(kvm) or V(qemu) (plain emulation).
    type: str
    default: kvm
  boot:
    description: Direct kernel boot, with C(kernel), C(initrd) and C(cmdline) paths on the hypervisor.
    type: dict
    default: {}
  serial_log_dir:
    description: Directory on the hypervisor for the serial console log C(<name>.serial.log).
    type: str
    default: /var/log/libvirt/qemu
  storage_pool:
    description: Storage pool for the instance's root volume.
    type: str
    default: default
  timeout:
    description: Seconds each libvirt call may take.
    type: float
    default: 30
  ledger:
    description: Record the outcome in the ledger.
    type: bool
    default: true
  ledger_url:
    description: SQLAlchemy URL of the ledger (see M(berth.fleet.schedule)). Never printed.
    type: str
attributes:
  check_mode:
    support: full
    description: Reports what it would do and changes nothing.
  diff_mode:
    support: none
author:
  - Berth developers
"""

EXAMPLES = r"""
- name: Build a placed instance
  berth.fleet.instance:
    name: "{{ item.name }}"
    uuid: "{{ item.uuid }}"
    host: "{{ item.host }}"
    uri: "{{ item.uri }}"
    flavor: "{{ item.flavor }}"
    domain_type: qemu
  loop: "{{ plan.placements }}"

- name: Delete it
  berth.fleet.instance:
    state: absent
    name: web-1
    uuid: 0f7d7a4e-4a7c-4b0c-9a55-1d1c7d1d3c11
    host: kvm01
    uri: qemu+ssh://root@kvm01.example.com/system
"""

RETURN = r"""
domain:
  description: The domain as libvirt reports it after the build (name, uuid, state, vcpus, memory_mb, disks).
  returned: with state=active
  type: dict
"""
