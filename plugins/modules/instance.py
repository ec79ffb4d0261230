#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
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
    instance's root volume in O(storage_pool) through libvirt's storage API (a qcow2 overlay of
    the O(image)'s base volume when an image is given; an image missing from that pool is
    uploaded through a libvirt stream from C(image.source), or refused), a NoCloud seed where
    O(user_data), SSH keys (O(ssh_authorized_keys), O(key_name)) or static interface settings
    (O(networks)) are given, renders the domain
    XML from O(template) with Jinja2 autoescaping (every value is XML-escaped), defines the
    domain and starts it, then marks the instance ACTIVE in the ledger.
  - Before it makes anything on a hypervisor, the build records in the ledger each volume and
    the domain it is about to make there (its artefacts), and only while the instance's claim
    there has a lease that has not expired. Whatever a run that dies leaves is then known, and
    M(berth.fleet.tracker_sync) removes it once the lease is over, O(state=absent) with its
    instance.
  - If any step fails, the domain and the volume are removed again, the claim is released and
    the instance is marked ERROR with the reason; the task fails.
  - A domain already running under the instance's UUID is left alone (no change).
  - With O(state=absent), destroys and undefines the domain, deletes its volumes (root disk,
    seed, UEFI variable store), removes what
    the ledger recorded of the instance's builds on any hypervisor (an attempt that failed
    elsewhere, an earlier instance of the same name that a relaunch replaced), and removes the
    instance and its claim from the ledger. Idempotent; after a run that died halfway, running
    it again finishes the work.
  - Normally used through the role C(berth.fleet.instance), with placements from
    M(berth.fleet.schedule).
options:
  state:
    description: Whether the instance's domain should run (V(active)) or be gone (V(absent)).
    type: str
    choices: [active, absent]
    default: active
  name:
    description: Instance name; also the domain name. Required without O(placements).
    type: str
  uuid:
    description: Instance UUID from the ledger; also the domain UUID. Required except in check mode.
    type: str
  host:
    description: Inventory name of the hypervisor. Required without O(placements).
    type: str
  uri:
    description: libvirt URI of the hypervisor. Required without O(placements).
    type: str
  placements:
    description:
      - Several instances at once, each a dict with C(name), C(uuid), C(host), C(uri), C(flavor)
        C(domain_types), C(cpu) (the host's recorded guest CPU settings and domain capabilities),
        C(cpu_shared_set) (the host CPUs a guest without NUMA cells floats over there)
        and C(targets) (the C(placements) of M(berth.fleet.schedule), or ledger rows to remove,
        which carry their hypervisor's C(uri)), and C(assignment), what the instance's claim holds
        on C(host) (pinned CPUs, NUMA cells, huge pages, devices), which its domain carries; a
        retry on an alternate takes that claim's instead.
      - Hosts are built in parallel, each host's instances one after the other; each instance's
        result is in C(results). The task fails if any instance failed, after all were tried.
    type: list
    elements: dict
  flavor:
    description: The flavor (C(name), C(vcpus), C(memory_mb), C(root_gb) ...); required with O(state=active).
    type: dict
  template:
    description: Domain XML template, looked up in the role's templates/ like M(ansible.builtin.template).
    type: str
    default: domain.xml.j2
  domain_type:
    description:
      - libvirt domain type, V(kvm) or V(qemu) (plain emulation).
      - Empty means V(kvm) where the host offers it (the placement's C(domain_types), from its
        capabilities as the tracker sync recorded them), else V(qemu).
    type: str
    choices: [kvm, qemu, ""]
    default: ""
  image:
    description:
      - Base image, a volume name in O(storage_pool) or a dict with C(name), C(format)
        (V(qcow2) or V(raw)) and C(source) (absolute path on the controller to upload from),
        or C(url) and C(checksum) (downloaded into O(image_cache_dir) unless there already, as
        M(berth.fleet.instance_request) does; uploaded where the pool lacks it; where the pool
        has a volume of that name, its checksum is read back through libvirt and must match).
      - Names with C(/) or C(..) are refused; only volumes the pool lists are used.
      - Without an image the root disk is an empty qcow2 volume of the flavor's C(root_gb).
    type: raw
  networks:
    description:
      - Interfaces, each a dict with C(type) (V(none), V(user), V(network), V(bridge)) and C(name)
        (the libvirt network or the bridge). MAC addresses are derived from the instance UUID.
      - Each may carry the guest's static settings of its interface (C(addresses), C(gateway), C(routes),
        C(nameservers), C(dhcp)), given on the NoCloud seed as
        M(berth.fleet.server)'s O(berth.fleet.server#module:networks) describes them.
    type: raw
    default: []
  user_data:
    description: cloud-init user data, given to the guest on a NoCloud seed ISO (label C(cidata)).
    type: str
  metadata:
    description: Extra key/value pairs kept in the domain's Berth metadata (escaped).
    type: dict
    default: {}
  domain_types:
    description: The domain types O(host) offers (V(kvm), V(qemu)), for an empty O(domain_type).
    type: list
    elements: str
    default: []
  targets:
    description:
      - The hosts to retry on, best first, each a dict with C(host), C(hypervisor_uuid), C(uri),
        C(domain_types), C(cpu) and C(cpu_shared_set) (a placement's C(targets) from
        M(berth.fleet.schedule)).
      - After a failed build on a host, everything made there is removed and the claim released;
        the next one is claimed through the ledger (re-checked for room) and tried.
    type: list
    elements: dict
    default: []
  max_attempts:
    description:
      - Hosts tried in all, O(host) first; after that the instance is ERROR with every reason.
      - A host where the failed build could not be cleaned up (it stopped answering) ends the tries
        there, the instance BUILDING with its claim on that host, for the tracker sync to settle after
        the lease (built again elsewhere, it could run twice).
    type: int
    default: 3
  lease_seconds:
    description: Lease of the claim taken on an alternate while it builds (the role passes C(berth_lease_seconds)).
    type: int
    default: 3600
  autostart:
    description: Start the domain when its libvirtd starts.
    type: bool
    default: false
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
  from_vars:
    description:
      - Take each requester option this task does not set (O(image), O(networks), O(metadata), O(user_data),
        O(key_name), the guest's hardware...) from the variable C(instance_<option>), else from C(berth_<option>)
        (the operator's fleet-wide default, C(berth_domain_type)). How the role C(berth.fleet.instance) passes
        its variables through without naming each option.
      - An operator setting (O(storage_pool), O(serial_log_dir), O(boot), O(key_pairs), O(image_source_dirs),
        O(lease_seconds), O(max_attempts)...; C(docs/docsite/rst/settings.rst) lists them) is never taken from
        C(instance_<option>). Such a variable is ignored, and the task's result warns, naming it and the
        C(berth_<option>) variable to set instead.
      - O(state), O(placements), O(name), O(uuid), O(host), O(uri), O(flavor), O(template), O(timeout),
        O(domain_types) and O(targets) are the task's own, never taken.
      - Whether or not this is set, an operator setting the task does not set comes from C(berth_<option>)
        (O(boot) from C(berth_boot_kernel), C(berth_boot_initrd) and C(berth_boot_cmdline)).
    type: bool
    default: false
  ledger:
    description: Record the outcome in the ledger.
    type: bool
    default: true
  ledger_url:
    description: SQLAlchemy URL of the ledger (see M(berth.fleet.schedule)). Never printed.
    type: str
extends_documentation_fragment:
  - berth.fleet.uri_policy
  - berth.fleet.guest
  - berth.fleet.seed
  - berth.fleet.image_download
  - berth.fleet.limits
attributes:
  check_mode:
    support: full
    description: Reports what it would do (with read-only calls to the hypervisor) and changes nothing.
  diff_mode:
    support: full
    description: Shows the domain XML libvirt has now and the one Berth would define.
author:
  - Berth developers (@berth)
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
host:
  description: The hypervisor the instance was built on (O(host) or an alternate).
  returned: with state=active
  type: str
failed_attempts:
  description: "Why each earlier host failed, each as C(<host>: <reason>)."
  returned: with state=active
  type: list
  elements: str
cpu:
  description:
    - The guest CPU the host's settings gave it (see the option O(berth.fleet.hypervisors#inventory:cpu_mode) of
      the inventory plugin), C(mode), C(model) (with mode custom), C(features)
      ([{policy, name}]), C(topology) ({sockets, cores, threads}) and, where a default had to change
      on that host, C(note) saying why; null for domain types without CPU models.
  returned: with state=active
  type: dict
domain:
  description: The domain as libvirt reports it after the build (name, uuid, state, vcpus, memory_mb, disks).
  returned: with state=active
  type: dict
instance:
  description:
    - The instance as the ledger has it after the build (C(name), C(uuid), C(host), C(state), C(vcpus),
      C(memory_mb)...), as M(berth.fleet.instance_info) would read it.
  returned: with state=active, with the ledger, not in check mode
  type: dict
results:
  description: With O(placements), one result as above per instance, in the order of O(placements), each with C(item).
  returned: with O(placements)
  type: list
  elements: dict
"""
