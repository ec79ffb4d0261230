from __future__ import annotations

DOCUMENTATION = r"""
name: hypervisors
short_description: libvirt hypervisors as inventory hosts, with Berth's host state
version_added: 0.1.0
description:
  - Reads a YAML inventory source whose name ends in C(berth.yml) or C(berth.yaml).
  - Each hypervisor listed there becomes a host in the group C(hypervisors). Its libvirt facts
    are gathered in parallel, each libvirt call under O(timeout), and stored in the one hostvar
    C(berth_host_state) (the schema of Berth's DESIGN.md); every value that comes from a
    hypervisor is marked unsafe, so it is never templated.
  - A hypervisor that does not answer is still listed, in the group C(down), with
    C(berth_host_state.service_up=false) and the reason in C(berth_host_state.down_reason); the
    rest of the inventory is whole.
options:
  plugin:
    description: The name of this plugin; makes the file an inventory source for it.
    required: true
    choices: [berth.fleet.hypervisors]
    type: str
  hypervisors:
    description:
      - The hypervisors, by inventory name.
      - C(uri) is the libvirt URI the controller reaches the hypervisor with.
      - C(cpu_allocation_ratio) (default 4.0), C(ram_allocation_ratio) (1.0),
        C(disk_allocation_ratio) (1.0), C(reserved_host_memory_mb) (512) and
        C(reserved_host_disk_mb) (0) override Nova's defaults for that host.
    required: true
    type: dict
  storage_pool:
    description: The libvirt storage pool that holds instance disks; its capacity is the disk.
    type: str
    default: default
  timeout:
    description: Seconds each libvirt call may take before the hypervisor is reported down.
    type: float
    default: 10
"""

EXAMPLES = r"""
# fleet.berth.yml
plugin: berth.fleet.hypervisors
storage_pool: default
hypervisors:
  kvm01:
    uri: qemu+ssh://root@kvm01.example.com/system
  kvm02:
    uri: qemu+ssh://root@kvm02.example.com/system
    ram_allocation_ratio: 1.5
    reserved_host_memory_mb: 2048
"""

from ansible.errors import AnsibleError, AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.host_facts import gather, validate_hypervisors

HYPERVISOR_GROUP = "hypervisors"
DOWN_GROUP = "down"


class InventoryModule(BaseInventoryPlugin):
    NAME = "berth.fleet.hypervisors"

    def verify_file(self, path):
        return super().verify_file(path) and path.endswith(("berth.yml", "berth.yaml"))

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        try:
            hypervisors = validate_hypervisors(self.get_option("hypervisors"))
            states = gather(hypervisors, self.get_option("storage_pool"), float(self.get_option("timeout")))
        except InputError as exc:
            raise AnsibleParserError(f"{path}: {exc}") from exc
        except BerthError as exc:
            raise AnsibleError(f"{path}: {exc}") from exc
        self._populate(hypervisors, states)

    def _populate(self, hypervisors, states):
        self.inventory.add_group(HYPERVISOR_GROUP)
        self.inventory.add_group(DOWN_GROUP)
        for name, state in states.items():
            self.inventory.add_host(name, group=HYPERVISOR_GROUP)
            self.inventory.set_variable(name, "berth_host_state", wrap_var(state))
            self.inventory.set_variable(name, "berth_libvirt_uri", wrap_var(hypervisors[name]["uri"]))
            if not state["service_up"]:
                self.inventory.add_host(name, group=DOWN_GROUP)
                self.display.warning(f"hypervisor {name} is down: {state['down_reason']}")
