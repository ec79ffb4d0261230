#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: hypervisor_facts
short_description: Gather Berth's host state on the hypervisor itself
version_added: 0.1.0
description:
  - Runs ON a hypervisor (over SSH, like any module) and reads its /proc and its local libvirt,
    for fleets whose libvirt cannot be reached from the controller.
  - Returns the same host state as the C(berth.fleet.hypervisors) inventory plugin puts in
    C(berth_host_state) (see C(ansible-doc -t inventory berth.fleet.hypervisors) for every
    field), as the fact C(berth_host_state).
  - Needs Python 3.9 or newer, the libvirt Python binding (C(python3-libvirt)) and PyYAML
    (C(python3-yaml)) on the hypervisor; the module reads its options from this documentation
    there, so that what it accepts is what is written here.
options:
  name:
    description: The host's name in the host state; the inventory name is the usual choice.
    type: str
    required: true
  uri:
    description: The local libvirt URI; it must pass O(uri_policy).
    type: str
    default: qemu:///system
  uri_policy:
    description:
      - "What the URI may hold beyond Berth's strict default, as the
        O(berth.fleet.server#module:uri_policy) option of the modules describes it (keys
        C(allow_parameters), C(allow_tcp), C(allow_test_files), C(credential_hosts)); for example
        C({allow_parameters: [socket]}) for a daemon on a socket of its own."
    type: dict
  storage_pool:
    description: The libvirt storage pool that holds instance disks.
    type: str
    default: default
  timeout:
    description: Seconds each libvirt call may take.
    type: float
    default: 10
  cpu_allocation_ratio:
    description: This host's CPU allocation ratio (Nova's default 4.0).
    type: float
  ram_allocation_ratio:
    description: This host's RAM allocation ratio (1.0).
    type: float
  disk_allocation_ratio:
    description: This host's disk allocation ratio (1.0).
    type: float
  reserved_host_memory_mb:
    description: Memory kept for the host itself, in MiB (512).
    type: int
  reserved_host_disk_mb:
    description: Disk kept for the host itself, in MiB (0).
    type: int
  aggregates:
    description:
      - The aggregates the host is in, C([{name, metadata}]); their availability zone and
        ratios apply as in the inventory plugin.
    type: list
    elements: dict
    default: []
  default_availability_zone:
    description: The zone when no aggregate names one.
    type: str
    default: nova
attributes:
  check_mode:
    support: full
    description: It only reads; check mode changes nothing and returns the facts.
  diff_mode:
    support: none
    description: Nothing to show.
  facts:
    support: full
    description: Returns the host state as the fact C(berth_host_state).
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Gather the host state on each hypervisor over SSH
  berth.fleet.hypervisor_facts:
    name: "{{ inventory_hostname }}"
    storage_pool: default
    reserved_host_memory_mb: 2048

- name: Use it
  ansible.builtin.debug:
    msg: "{{ berth_host_state.free_ram_mb }} MiB free"
"""

RETURN = r"""
host_state:
  description: The host state (the fields of the inventory plugin's C(berth_host_state)).
  returned: always
  type: dict
  sample: {"host": "kvm01", "service_up": true, "vcpus_total": 32, "free_ram_mb": 120000}
ansible_facts:
  description: C(berth_host_state), the same dict.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule, _load_params, missing_required_lib

from ansible_collections.berth.fleet.plugins.module_utils._documented_spec import documented_argument_spec
from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.host_facts import (
    HOST_SETTINGS,
    host_aggregates,
    outcome_state,
    validate_aggregates,
    validate_hypervisors,
)
from ansible_collections.berth.fleet.plugins.module_utils.host_fetch import fetch_one
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy


def run_module(module: AnsibleModule) -> dict:
    params = module.params
    name = params["name"]
    settings = {"uri": params["uri"], **{key: params[key] for key in HOST_SETTINGS if params[key] is not None}}
    try:
        settings = validate_hypervisors({name: settings})[name]
    except InputError as exc:
        # The checks are the inventory source's; name the module's own option instead.
        option = exc.field.rsplit(".", 1)[-1]
        raise InputError(option, str(exc).replace(f"hypervisors.{name}.", "")) from None
    declared = {}
    for index, aggregate in enumerate(params["aggregates"]):
        if not isinstance(aggregate, dict) or not isinstance(aggregate.get("name"), str):
            raise InputError(f"aggregates[{index}]", f"aggregates[{index}] must be {{name, metadata}}")
        declared[aggregate["name"]] = {"hosts": [name], "metadata": aggregate.get("metadata") or {}}
    checked = validate_aggregates(declared, {name: settings})
    mine, zone = host_aggregates(name, checked, params["default_availability_zone"])
    uri_policy = UriPolicy.from_settings(params["uri_policy"])
    outcome = fetch_one(name, settings["uri"], params["storage_pool"], params["timeout"], {"uri_policy": uri_policy})
    if "facts" not in outcome:
        raise BerthError(outcome["down_reason"])
    # Answers that do not make a host state give it down with why, as in the inventory plugin.
    state = outcome_state(name, outcome, settings, mine, zone)
    return {"changed": False, "host_state": state, "ansible_facts": {"berth_host_state": state}}


def main() -> None:
    try:
        # The options as DOCUMENTATION states them, read here on the hypervisor.
        argument_spec = documented_argument_spec(DOCUMENTATION)
    except ImportError:
        # Without PyYAML the options cannot be read: take whatever was passed, only to say why.
        passed = {name: {"type": "raw"} for name in _load_params()}
        AnsibleModule(argument_spec=passed).fail_json(msg=missing_required_lib("PyYAML"))
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    try:
        module.exit_json(**run_module(module))
    except InputError as exc:
        module.fail_json(msg=str(exc), field=exc.field)
    except BerthError as exc:
        module.fail_json(msg=str(exc))


if __name__ == "__main__":
    main()
