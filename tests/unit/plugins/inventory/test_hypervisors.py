"""The inventory plugin takes only sources named like *berth.yml / *berth.yaml."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.inventory.hypervisors import InventoryModule


@pytest.mark.parametrize(
    "name, taken",
    [("fleet.berth.yml", True), ("berth.yaml", True), ("lab.berth.yaml", True),
     ("fleet.yml", False), ("berth.yml.bak", False), ("hosts.ini", False)],
)
def test_source_file_names(tmp_path, name, taken):
    path = tmp_path / name
    path.write_text("plugin: berth.fleet.hypervisors\n")
    assert InventoryModule().verify_file(str(path)) is taken
