#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done on the controller by the action plugin of the same name
# (plugins/action/server.py, over plugins/plugin_utils/operations/); this file carries the
# documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: server
short_description: Declare one named Berth instance - present, running, stopped or absent
version_added: 0.2.0
description:
  - The declarative way to use Berth in a play, as M(community.libvirt.virt) or
    C(openstack.cloud.server) are used - one task per instance, idempotent.
  - With O(state=present) (or V(running), V(stopped)), an instance named O(name) that the ledger
    does not have (or has in C(ERROR)) is launched as C(playbooks/launch.yml) launches one - the
    request is checked, the scheduler decides from the ledger (Nova's filters and weighers, the
    explanation recorded as a decision), the resources are claimed atomically, and the domain is
    built on the chosen hypervisor and retried on the alternates up to O(max_attempts) hosts. An
    instance that exists is left as it is (it is not resized or rebuilt when the options differ -
    M(berth.fleet.resize) resizes it).
  - O(state=running) and O(state=stopped) then bring its domain to that power state as
    M(berth.fleet.power) does (a stopped guest is shut down gracefully first).
  - With O(state=absent), the instance's domain and volumes are removed from its hypervisor, what
    the ledger recorded of its builds anywhere is removed, and its claim and row are deleted, as
    C(playbooks/delete.yml) does.
  - Without O(count), O(name) is the instance's own name, not a prefix - no C(-1) is added. With O(count) the
    module manages C(<name>-1) .. C(<name>-<count>) as C(playbooks/launch.yml) does, which is this module with
    O(from_vars=true).
options:
  name:
    description:
      - The instance's name, a DNS label (it becomes the domain's name and the guest's hostname).
      - An instance to launch named as a hypervisor of the fleet (the ledger's, or a host of the play's
        C(hypervisors) group), in any case, or C(localhost), is refused before anything is claimed, since
        C(berth.fleet.instances) lists instances as inventory hosts of their names.
    type: str
    required: true
  count:
    description:
      - How many instances are wanted under O(name) - C(<name>-1) .. C(<name>-<count>), 1 to 1000, scheduled
        together in one decision and claimed at once, as C(playbooks/launch.yml) launches them. Raising it adds
        instances; a second run with the same count changes nothing.
      - Not given, the one instance is named O(name) itself.
    type: int
  from_vars:
    description:
      - Take each requester option this task does not set (O(flavor), O(image), O(networks), O(key_name),
        O(availability_zone), O(server_group), O(scheduler_hints), the guest's hardware...) from the play's variable
        of the same name, else from the variable C(berth_<option>) (the operator's fleet-wide default). This is how
        C(playbooks/launch.yml) passes its extra variables (C(-e flavor=m1.small -e firmware=uefi)) through
        without naming each option.
      - An operator setting (O(image_source_dirs), O(uri_policy), O(enabled_filters), O(key_pairs), O(boot),
        O(project_id), O(force_hosts), O(max_attempts)...; C(docs/docsite/rst/settings.rst) lists them) is never
        taken from a play variable of its bare name - a launch's extra variables and an AWX survey's answers are
        the requester's. Such a variable is ignored, and the task's result warns, naming it and the
        C(berth_<option>) variable to set instead.
      - O(state), O(template), O(timeout) and O(shutdown_timeout) are the task's own, never taken.
      - Whether or not this is set, an operator setting the task does not set comes from C(berth_<option>)
        (O(boot) from C(berth_boot_kernel), C(berth_boot_initrd) and C(berth_boot_cmdline)), set once in the
        inventory, group vars or a job template.
    type: bool
    default: false
  state:
    description: What the instances should be.
    type: str
    choices: [present, running, stopped, absent]
    default: present
  domain_type:
    description:
      - libvirt domain type, V(kvm) or V(qemu) (plain emulation); empty means V(kvm) where the chosen
        hypervisor offers it, else V(qemu).
    type: str
    choices: [kvm, qemu, ""]
    default: ""
  autostart:
    description: Start the domain when its libvirtd starts.
    type: bool
    default: false
  ha:
    description:
      - Restart the instance on another hypervisor when its own fails (an HA instance), highest
        O(ha_priority) first; the ledger keeps it with the instance (not in its recorded request), and
        M(berth.fleet.instance_ha) changes it later.
      - The operator's C(berth_failover_hosts) keeps room free to restart the HA instances of that many
        failed hypervisors (M(berth.fleet.capacity) reports it); a launch that would take that room is
        refused or warned (C(berth_failover_enforce)).
    type: bool
    default: false
  ha_priority:
    description: The instance's place in the HA restart order, from 0 to 1000, highest first.
    type: int
    default: 0
  project_id:
    description:
      - The project the instance is for (AggregateMultiTenancyIsolation), recorded on it; see M(berth.fleet.schedule).
      - An operator setting (C(berth_project_id)) - Nova takes the project from the caller's identity, never
        from the request.
    type: str
    default: default
  availability_zone:
    description: The availability zone to launch into; see M(berth.fleet.schedule).
    type: str
  server_group:
    description: The server group (a name from M(berth.fleet.server_group)) the instance joins; see M(berth.fleet.schedule).
    type: raw
  labels:
    description:
      - Short names (DNS labels, at most 16) the operator's host rules (M(berth.fleet.host_rule)) select instances
        by - C(labels=[db]) puts the instances under every rule written for the label C(db). The requester picks
        labels; the operator writes the rules. Recorded with each instance, so that every move is held to the same
        rules.
    type: list
    elements: str
    default: []
  scheduler_hints:
    description: Nova's scheduler hints (C(different_host), C(same_host), C(query), C(build_near_host_ip)...); see M(berth.fleet.schedule).
    type: dict
  force_hosts:
    description:
      - Only these hypervisors, the filters skipped (never the claim's check); see M(berth.fleet.schedule).
      - An operator setting (C(berth_force_hosts)) - forcing a host is an administrator's privilege in Nova.
    type: list
    elements: str
    default: []
  ignore_hosts:
    description: Never these hypervisors.
    type: list
    elements: str
  max_attempts:
    description: Hosts tried in all, the chosen one first, then the scheduler's alternates (Nova's C(max_attempts)).
    type: int
    default: 3
  source:
    description: Where the host states come from, V(ledger) (the last tracker sync) or V(inventory); see M(berth.fleet.schedule).
    type: str
    choices: [ledger, inventory]
    default: ledger
  service_down_time:
    description: Seconds after its last sync when a hypervisor counts as down (Nova's C(service_down_time)).
    type: int
    default: 600
  lease_seconds:
    description: Lease of the claim while the instance builds; a sync releases an expired one whose domain is not there.
    type: int
    default: 3600
  storage_pool:
    description: Storage pool for the instance's volumes.
    type: str
    default: default
  serial_log_dir:
    description: Directory on the hypervisor for the serial console log C(<name>.serial.log).
    type: str
    default: /var/log/libvirt/qemu
  template:
    description: Domain XML template, looked up as M(ansible.builtin.template) looks up its source; default the role C(berth.fleet.instance)'s.
    type: str
  shutdown_timeout:
    description: With O(state=stopped), seconds a guest has to shut down before it is powered off (as M(berth.fleet.power)).
    type: int
    default: 60
  timeout:
    description: Seconds each libvirt call may take.
    type: float
    default: 30
extends_documentation_fragment:
  - berth.fleet.scheduler
  - berth.fleet.devices
  - berth.fleet.uri_policy
  - berth.fleet.headroom
  - berth.fleet.packing
  - berth.fleet.launch
  - berth.fleet.guest
  - berth.fleet.seed
  - berth.fleet.image_download
  - berth.fleet.ledger
  - berth.fleet.limits
attributes:
  check_mode:
    support: full
    description:
      - Decides where a new instance would go (the same host a real run picks, unless the fleet
        changes in between) and what would change; writes nothing to the ledger or the fleet.
  diff_mode:
    support: full
    description:
      - Without O(count), the instance as the ledger has it before and as it is after (name, uuid, host, state, vcpus,
        memory_mb).
      - For each instance built (or, in check mode, planned), its domain XML as libvirt has it before and as Berth
        defines it after, headed with the instance's name and hypervisor. Ansible prints these at normal verbosity, so
        C(ansible-playbook playbooks/launch.yml --check --diff) shows each planned instance's domain.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: A database server, running, kept apart from its peers
  berth.fleet.server:
    name: db-1
    flavor: m1.small
    image: debian-12.qcow2
    networks: [{type: network, name: default}]
    server_group: db
    availability_zone: az1

- name: Stopped for maintenance
  berth.fleet.server:
    name: db-1
    state: stopped

- name: Gone
  berth.fleet.server:
    name: db-1
    state: absent
"""

RETURN = r"""
instances:
  description:
    - Each instance as the ledger has it afterwards, in name order; in check mode the planned ones with
      C(state=PLANNED), their C(host) and C(alternates).
  returned: always
  type: list
  elements: dict
placements:
  description: Where the scheduler put the instances it launched, as M(berth.fleet.schedule) returns them.
  returned: when instances were launched or planned
  type: list
  elements: dict
results:
  description:
    - Each launched (or deleted) instance's build result, as M(berth.fleet.instance) returns them, but for its
      C(diff), which is the task's.
  returned: when instances were built or deleted
  type: list
  elements: dict
instance:
  description:
    - The instance as the ledger has it afterwards (C(name), C(uuid), C(host), C(state), C(vcpus), C(memory_mb)...);
      in check mode for a new one the planned C(name), C(host) and C(state=PLANNED); null when absent.
  returned: without O(count)
  type: dict
decision_id:
  description: The ledger's record of the scheduling decision that placed a new instance (M(berth.fleet.ledger_info) shows it).
  returned: when an instance was launched, not in check mode
  type: int
summary:
  description: The scheduler's one-line summary of that decision.
  returned: when an instance was launched or planned
  type: str
failed_attempts:
  description: "Why each earlier host failed, each as C(<host>: <reason>)."
  returned: when a launch was retried on an alternate
  type: list
  elements: str
msg:
  description: What was done (or would be, in check mode).
  returned: always
  type: str
"""
