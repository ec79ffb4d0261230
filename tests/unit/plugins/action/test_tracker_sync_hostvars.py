"""The tracker sync reads each host's variables from the inventory behind ``hostvars``
(``HostVars._inventory``), not through ``hostvars[host]``, which templates every variable of the
host. That is a private attribute of ansible-core: this checks it is still there, on the
ansible-core this runs with (CI runs the unit tests on the oldest and the newest supported)."""

from __future__ import annotations

from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from ansible_collections.berth.fleet.plugins.action.tracker_sync import inventory_variables


def test_variables_come_from_the_inventory_untemplated():
    loader = DataLoader()
    inventory = InventoryManager(loader=loader)  # a host added as an inventory plugin adds it
    inventory.add_host("hv1")
    inventory.get_host("hv1").set_variable("berth_libvirt_uri", "qemu:///{{ not_templated }}")
    hostvars = HostVars(inventory, VariableManager(loader=loader, inventory=inventory), loader)

    variables = inventory_variables(hostvars)

    # The host's own variables, as the inventory holds them: the fast path, not hostvars[host].
    assert variables("hv1") is inventory.get_host("hv1").vars
    assert variables("hv1")["berth_libvirt_uri"] == "qemu:///{{ not_templated }}"
    assert variables("nowhere") == {}
