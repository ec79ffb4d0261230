"""The inventory plugin takes only sources named like *berth.yml / *berth.yaml, and checks each
URI against its source's policy, which it hands on to the run."""

from __future__ import annotations

import pytest
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.berth.fleet.plugins.inventory.hypervisors import InventoryModule
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy


@pytest.mark.parametrize(
    "name, taken",
    [("fleet.berth.yml", True), ("berth.yaml", True), ("lab.berth.yaml", True),
     ("fleet.yml", False), ("berth.yml.bak", False), ("hosts.ini", False)],
)
def test_source_file_names(tmp_path, name, taken):
    path = tmp_path / name
    path.write_text("plugin: berth.fleet.hypervisors\n")
    assert InventoryModule().verify_file(str(path)) is taken


# ---- the URI policy: checked in the source, handed on to the run's tasks --------------------------

def make_plugin(**options):
    """The plugin with the options a source would give it (no gathering)."""
    plugin = InventoryModule()
    plugin._options = {"uri_template": None, "aggregates": {}, "default_availability_zone": "nova",
                       "gather_facts": False, "storage_pool": "default", "timeout": 10, "keepalive_interval": 5,
                       "keepalive_count": 3, "verify_host_keys": True, "known_hosts": None, "ssh_user": None,
                       "ssh_keyfile": None, "uri_policy": None, "strict": False, "compose": {}, "groups": {},
                       "keyed_groups": [], "leading_separator": True, "use_extra_vars": False, "cpu_mode": None,
                       "cpu_models": None, "cpu_model_extra_flags": None, "cpu_dedicated_set": None,
                       "cpu_shared_set": None, "reserved_huge_pages": None, **options}
    plugin.inventory = InventoryData()
    plugin.templar = Templar(loader=DataLoader())
    return plugin


LAB_URI = "qemu+unix:///system?socket=/run/lab/hv1/libvirt-sock"


def test_a_uri_the_sources_policy_refuses_fails_the_source_naming_the_host():
    plugin = make_plugin(hypervisors={"hv1": {"uri": "qemu+ext:///system?command=/tmp/evil"}})
    with pytest.raises(InputError, match="ext transport runs the program") as caught:
        plugin._source()
    assert caught.value.field == "hypervisors.hv1.uri"
    plugin = make_plugin(hypervisors={"hv1": {"uri": LAB_URI}})
    with pytest.raises(InputError, match="socket= picks the unix socket"):
        plugin._source()


def test_the_sources_policy_becomes_the_runs_berth_uri_policy_with_its_ssh_settings_and_hosts():
    plugin = make_plugin(hypervisors={"hv1": {"uri": LAB_URI}, "kvm2": {"uri": "qemu+ssh://kvm2.example.com/system"}},
                         uri_policy={"allow_parameters": ["socket"]}, ssh_keyfile="/root/.ssh/berth")
    hypervisors, aggregates, targets = plugin._source()
    assert "keyfile=/root/.ssh/berth" in targets["kvm2"]
    plugin._populate(hypervisors, aggregates, targets, None)
    handed = plugin.inventory.groups["all"].vars["berth_uri_policy"]
    assert handed == {"allow_parameters": ["keyfile=/root/.ssh/berth", "socket"], "allow_tcp": False,
                      "allow_test_files": False, "credential_hosts": ["kvm2.example.com"]}
    # What the run's tasks rebuild from it opens what the source opens, and no more.
    again = UriPolicy.from_settings(handed)
    assert all(again.refusal(uri) is None for uri in targets.values())
    assert again.refusal("qemu+ext:///system?command=/tmp/evil") is not None


def test_reserved_huge_pages_reach_each_hosts_settings_the_hosts_own_first():
    plugin = make_plugin(hypervisors={"hv1": {"uri": "test:///default"},
                                      "hv2": {"uri": "test:///default", "reserved_huge_pages": ["node:1,size:2MB,count:4"]}},
                         reserved_huge_pages=[{"node": 0, "size": 2048, "count": 64}])
    hypervisors, aggregates, targets = plugin._source()
    plugin._populate(hypervisors, aggregates, targets, None)
    settings = {name: plugin.inventory.get_host(name).vars["berth_hypervisor"]["settings"] for name in ("hv1", "hv2")}
    assert settings["hv1"]["reserved_huge_pages"] == [{"node": 0, "size": 2048, "count": 64}]
    assert settings["hv2"]["reserved_huge_pages"] == ["node:1,size:2MB,count:4"]
    with pytest.raises(InputError) as caught:
        make_plugin(hypervisors={"hv1": {"uri": "test:///default"}}, reserved_huge_pages=["node:0"])._source()
    assert caught.value.field == "reserved_huge_pages[0]"
