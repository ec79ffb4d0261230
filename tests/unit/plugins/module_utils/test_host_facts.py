"""Facts to host state: the arithmetic of DESIGN.md's host-state fields."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.host_facts import (
    down_state,
    host_state,
    validate_hypervisors,
)


def facts(domains=()):
    return {
        "nodename": "node1", "uuid": "11111111-2222-3333-4444-555555555555", "vcpus_total": 8,
        "hypervisor_type": "QEMU", "hypervisor_version": 7002000, "cpu_info": {},
        "supported_instances": [["x86_64", "qemu", "hvm"], ["x86_64", "kvm", "hvm"]],
        "memory": {"total_mb": 16000, "free_mb": 9000, "buffers_mb": 500, "cached_mb": 2500},
        "pool": {"name": "default", "capacity_gb": 100, "allocation_mb": 0, "available_mb": 0},
        "domains": list(domains),
    }


def domain(name, vcpus, memory_mb, disk_mb=0, berth=None):
    disks = [{"path": f"/p/{name}.qcow2", "capacity_mb": disk_mb}] if disk_mb else []
    return {"name": name, "uuid": name, "state": "running", "vcpus": vcpus, "memory_mb": memory_mb,
            "disks": disks, "berth": berth}


def test_usage_counts_every_domain_and_the_reserved_memory():
    state = host_state("hv1", facts([
        domain("a", 2, 2048, 10240, berth={"instance_uuid": "u-a", "name": "a", "flavor": "x"}),
        domain("b", 1, 1024),
    ]), {"reserved_host_memory_mb": 1000})
    assert state["vcpus_used"] == 3
    assert state["free_ram_mb"] == 16000 - 1000 - 3072
    assert state["free_disk_mb"] == 100 * 1024 - 0 - 10240
    assert state["num_instances"] == 2
    assert state["instances"] == ["u-a"]
    assert state["orphans"] == ["b"]
    # /proc/meminfo view: used = total - (free + buffers + cached)
    assert state["hv_memory_used_mb"] == 16000 - (9000 + 500 + 2500)
    assert state["cpu_allocation_ratio"] == 4.0 and state["reserved_host_memory_mb"] == 1000


def test_free_ram_may_go_negative():
    state = host_state("hv1", facts([domain("big", 1, 16000)]), {})
    assert state["free_ram_mb"] == 16000 - 512 - 16000


def test_down_host_keeps_its_settings_and_reason():
    state = down_state("hv2", {"ram_allocation_ratio": 1.5}, "connection refused")
    assert (state["service_up"], state["down_reason"], state["ram_allocation_ratio"]) == (False, "connection refused", 1.5)


@pytest.mark.parametrize(
    "hypervisors, field",
    [
        ({}, "hypervisors"),
        ({"hv1": "qemu:///system"}, "hypervisors.hv1"),
        ({"hv1": {"uri": "not a uri"}}, "hypervisors.hv1.uri"),
        ({"hv1": {"uri": "qemu:///system", "ram_allocation_ratio": 0}}, "hypervisors.hv1.ram_allocation_ratio"),
        ({"hv1": {"uri": "qemu:///system", "reserved_host_memory_mb": -1}}, "hypervisors.hv1.reserved_host_memory_mb"),
        ({"hv1": {"uri": "qemu:///system", "colour": "red"}}, "hypervisors.hv1.colour"),
    ],
    ids=["empty", "not-a-mapping", "bad-uri", "zero-ratio", "negative-reserved", "unknown-setting"],
)
def test_bad_inventory_sources_name_the_field(hypervisors, field):
    with pytest.raises(InputError) as info:
        validate_hypervisors(hypervisors)
    assert info.value.field == field
