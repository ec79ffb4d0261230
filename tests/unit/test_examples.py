"""The shipped example inventory source is valid as written."""

from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.berth.fleet.plugins.module_utils.host_facts import (
    connection_uri,
    host_aggregates,
    validate_aggregates,
    validate_hypervisors,
)

REPO = Path(__file__).resolve().parents[2]


def test_awx_example_source_is_valid():
    source = yaml.safe_load((REPO / "examples" / "awx" / "fleet.berth.yml").read_text())
    assert source["plugin"] == "berth.fleet.hypervisors"
    hypervisors = validate_hypervisors(source["hypervisors"], source["uri_template"])
    aggregates = validate_aggregates(source["aggregates"], hypervisors)
    assert hypervisors["kvm01"]["uri"] == "qemu+ssh://kvm01.example.com/system"
    assert connection_uri("kvm04", hypervisors["kvm04"]["uri"], ssh_user="berth", ssh_keyfile="/run/key") == (
        "qemu+ssh://berth@kvm04.mgmt.example.com/system?keyfile=/run/key&no_tty=1")
    assert host_aggregates("kvm04", aggregates)[1] == "az2"
    assert [agg["name"] for agg in host_aggregates("kvm02", aggregates)[0]] == ["rack_a", "ssd"]
