"""Facts to host state: the arithmetic of DESIGN.md's host-state fields."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.host_facts import (
    connection_uri,
    down_state,
    host_aggregates,
    host_state,
    is_local,
    validate_aggregates,
    validate_hypervisors,
)
from ansible_collections.berth.fleet.plugins.module_utils.huge_pages import (
    host_reserved_pages,
    parse_reserved_huge_pages,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.numa import numa_cells


def facts(domains=()):
    return {
        "nodename": "node1", "uuid": "11111111-2222-3333-4444-555555555555", "vcpus_total": 8,
        "hypervisor_type": "QEMU", "hypervisor_version": 7002000, "libvirt_version": 9000000,
        "cpu_info": {}, "numa_topology": {"cells": []},
        "supported_instances": [["x86_64", "qemu", "hvm"], ["x86_64", "kvm", "hvm"]],
        "memory": {"total_mb": 16000, "free_mb": 9000, "buffers_mb": 500, "cached_mb": 2500},
        "memory_source": "libvirt", "metrics": {}, "uri_uuid": "derived",
        "storage_pool": "default",
        "pools": [{"name": "default", "active": True, "capacity_mb": 100 * 1024 + 700, "allocation_mb": 0, "available_mb": 0},
                  {"name": "iso", "active": True, "capacity_mb": 50, "allocation_mb": 0, "available_mb": 0}],
        "domains": list(domains),
    }


def domain(name, vcpus, memory_mb, disk_mb=0, berth=None):
    disks = [{"path": f"/p/{name}.qcow2", "capacity_mb": disk_mb, "pool": "default"}] if disk_mb else []
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
        ({"hv1": {"uri": "qemu:///system", "host_ip": "hv1.example.com"}}, "hypervisors.hv1.host_ip"),
    ],
    ids=["empty", "not-a-mapping", "bad-uri", "zero-ratio", "negative-reserved", "unknown-setting",
         "host-ip-not-an-address"],
)
def test_bad_inventory_sources_name_the_field(hypervisors, field):
    with pytest.raises(InputError) as info:
        validate_hypervisors(hypervisors)
    assert info.value.field == field


def test_disks_outside_the_instance_pool_take_nothing_from_it():
    dom = domain("a", 1, 512, 2048)
    dom["disks"].append({"path": "/iso/x.iso", "capacity_mb": 4000, "pool": "iso"})
    dom["disks"].append({"path": "/elsewhere.img", "capacity_mb": 0, "pool": None})
    state = host_state("hv1", facts([dom]), {})
    # Pool capacity 100 GiB + 700 MiB counts as 100 whole GiB, as total_usable_disk_gb says.
    assert state["total_usable_disk_gb"] == 100
    assert state["free_disk_mb"] == 100 * 1024 - 2048


def test_unknown_free_memory_stays_unknown():
    raw = facts()
    raw["memory"] = {"total_mb": 4096, "free_mb": None, "buffers_mb": None, "cached_mb": None}
    state = host_state("hv1", raw, {})
    assert state["hv_memory_used_mb"] is None and state["hv_memory_free_mb"] is None
    assert state["total_usable_ram_mb"] == 4096 and state["free_ram_mb"] == 4096 - 512


def test_uuid_falls_back_to_the_one_derived_from_the_uri():
    raw = facts()
    raw["uuid"] = ""
    assert host_state("hv1", raw, {})["uuid"] == "derived"


AGGREGATES = {
    "rack1": {"hosts": ["hv1", "hv2"], "metadata": {"availability_zone": "az1", "cpu_allocation_ratio": "2.0"}},
    "tight": {"hosts": ["hv1"], "metadata": {"cpu_allocation_ratio": 1.5, "ram_allocation_ratio": 0.9}},
    "gpu": {"hosts": ["hv3"], "metadata": {"gpu": "true"}},
}
HOSTS = {"hv1": {"uri": "qemu:///system"}, "hv2": {"uri": "qemu:///system", "cpu_allocation_ratio": 16.0},
         "hv3": {"uri": "qemu:///system", "cpu_allocation_ratio": 3.0}, "hv4": {"uri": "qemu:///system"}}


@pytest.mark.parametrize(
    "host, names, zone, cpu_ratio, ram_ratio",
    [
        ("hv1", ["rack1", "tight"], "az1", 1.5, 0.9),  # the smallest aggregate value wins
        ("hv2", ["rack1"], "az1", 2.0, 1.0),           # the aggregate wins over the host's own 16.0
        ("hv3", ["gpu"], "nova", 3.0, 1.0),            # no ratio in its aggregate: the host's own
        ("hv4", [], "nova", 4.0, 1.0),                 # in none: default zone, Nova's defaults
    ],
    ids=["two-aggregates", "aggregate-over-host", "host-setting", "no-aggregate"],
)
def test_aggregates_give_zone_metadata_and_ratios(host, names, zone, cpu_ratio, ram_ratio):
    aggregates = validate_aggregates(AGGREGATES, HOSTS)
    mine, my_zone = host_aggregates(host, aggregates)
    state = host_state(host, facts(), HOSTS[host], mine, my_zone)
    assert [agg["name"] for agg in state["aggregates"]] == names
    assert state["availability_zone"] == zone
    assert (state["cpu_allocation_ratio"], state["ram_allocation_ratio"]) == (cpu_ratio, ram_ratio)
    if "rack1" in names:
        assert state["aggregates"][0]["metadata"] == {"availability_zone": "az1", "cpu_allocation_ratio": "2.0"}


@pytest.mark.parametrize(
    "aggregates, field",
    [
        ([], "aggregates"),
        ({"bad-name": {"hosts": ["hv1"]}}, "aggregates.bad-name"),
        ({"a": {"hosts": ["nope"]}}, "aggregates.a.hosts"),
        ({"a": {"hosts": ["hv1"], "colour": 1}}, "aggregates.a.colour"),
        ({"a": {"hosts": ["hv1"], "metadata": {"x": [1]}}}, "aggregates.a.metadata.x"),
        ({"a": {"hosts": ["hv1"], "metadata": {"cpu_allocation_ratio": "lots"}}}, "aggregates.a.metadata.cpu_allocation_ratio"),
        ({"a": {"hosts": ["hv1"], "metadata": {"availability_zone": "az1"}},
          "b": {"hosts": ["hv1"], "metadata": {"availability_zone": "az2"}}}, "aggregates.b.metadata.availability_zone"),
    ],
    ids=["not-a-mapping", "not-a-group-name", "unknown-host", "unknown-key", "list-value", "bad-ratio", "two-zones"],
)
def test_bad_aggregates_name_the_field(aggregates, field):
    with pytest.raises(InputError) as info:
        validate_aggregates(aggregates, HOSTS)
    assert info.value.field == field


def test_uri_template_fills_hosts_without_uri():
    checked = validate_hypervisors({"kvm01": None, "kvm02": {"uri": "qemu:///system"}},
                                   uri_template="qemu+ssh://{name}.example.com/system")
    assert checked["kvm01"]["uri"] == "qemu+ssh://kvm01.example.com/system"
    assert checked["kvm02"]["uri"] == "qemu:///system"


def test_a_password_in_a_uri_is_refused_without_repeating_it():
    with pytest.raises(InputError) as info:
        validate_hypervisors({"hv1": {"uri": "qemu+tcp://admin:s3cret@kvm/system"}})
    assert info.value.field == "hypervisors.hv1.uri"
    assert "s3cret" not in str(info.value)


@pytest.mark.parametrize(
    "uri, options, expected",
    [
        ("qemu:///system", {"ssh_user": "root"}, "qemu:///system"),
        ("qemu+ssh://kvm/system", {},
         "qemu+ssh://kvm/system?no_tty=1"),
        ("qemu+ssh://kvm:2222/system?socket=/run/x", {"ssh_user": "berth", "ssh_keyfile": "/k/id"},
         "qemu+ssh://berth@kvm:2222/system?socket=/run/x&keyfile=/k/id&no_tty=1"),
        ("qemu+ssh://me@kvm/system", {"ssh_user": "berth", "verify_host_keys": False},
         "qemu+ssh://me@kvm/system?no_verify=1&no_tty=1"),
        ("qemu+libssh://kvm/system", {"known_hosts": "/k/known"},
         "qemu+libssh://kvm/system?known_hosts=/k/known"),
        ("qemu+libssh2://kvm/system", {"verify_host_keys": False},
         "qemu+libssh2://kvm/system?known_hosts_verify=ignore"),
    ],
    ids=["local-untouched", "ssh-batch", "user-and-key", "no-verify", "libssh-known-hosts", "libssh2-no-verify"],
)
def test_connection_uri(uri, options, expected):
    assert connection_uri("hypervisors.x.uri", uri, **options) == expected


@pytest.mark.parametrize(
    "uri, options, field",
    [
        ("qemu+ssh://kvm/system?no_verify=1", {}, "hypervisors.x.uri"),
        ("qemu+libssh://kvm/system?known_hosts_verify=ignore", {}, "hypervisors.x.uri"),
        ("qemu+ssh://kvm/system", {"known_hosts": "/k/known"}, "known_hosts"),
    ],
    ids=["ssh-uri-turns-checking-off", "libssh-uri-turns-checking-off", "known-hosts-with-plain-ssh"],
)
def test_host_key_checking_is_only_turned_off_by_the_source(uri, options, field):
    with pytest.raises(InputError) as info:
        connection_uri("hypervisors.x.uri", uri, **options)
    assert info.value.field == field


@pytest.mark.parametrize(
    "uri, local",
    [("qemu:///system", True), ("qemu+unix:///system?socket=/s", True), ("qemu+ssh://h/system", False),
     ("qemu+tcp://h/system", False), ("test:///default", False), ("test+unix:///x.xml?socket=/s", False)],
)
def test_is_local(uri, local):
    assert is_local(uri) is local


def test_the_sources_host_ip_wins_over_the_address_found_and_stays_when_down():
    gathered = {**facts(), "host_ip": "10.0.0.11"}
    assert host_state("hv1", gathered, {})["host_ip"] == "10.0.0.11"
    assert host_state("hv1", gathered, {"host_ip": "192.0.2.7"})["host_ip"] == "192.0.2.7"
    assert host_state("hv1", facts(), {})["host_ip"] is None
    assert down_state("hv1", {"host_ip": "192.0.2.7"}, "refused")["host_ip"] == "192.0.2.7"
    # A setting, not an allocation knob: it never joins the effective settings.
    assert "host_ip" in validate_hypervisors({"hv1": {"uri": "qemu:///system", "host_ip": "192.0.2.7"}})["hv1"]


# ---- issue 24's facts: which CPUs instances may use, NUMA cells, PCI devices ------------------

def _two_cells():
    cells = [{"id": cell, "memory_mb": 1024, "cpus": [4 * cell + n for n in range(4)], "cpu_topology": [],
              "pages": [{"size_kb": 2048, "total": 64, "free": 60}]} for cell in (0, 1)]
    return {**facts(), "numa_topology": {"cells": cells}}


@pytest.mark.parametrize("hypervisors, fleet, expected", [
    ({"hv1": {"uri": "test:///default", "cpu_dedicated_set": "2-7", "cpu_shared_set": "0-1"}}, {},
     {"cpu_dedicated_set": "2-7", "cpu_shared_set": "0-1"}),
    ({"hv1": {"uri": "test:///default"}}, {"cpu_dedicated_set": "4-7"}, {"cpu_dedicated_set": "4-7"}),
    # A host's own set replaces both of the source's (they belong together).
    ({"hv1": {"uri": "test:///default", "cpu_shared_set": "0"}}, {"cpu_dedicated_set": "0-7"},
     {"cpu_shared_set": "0"}),
    ({"hv1": {"uri": "test:///default"}}, {}, {}),
], ids=["host", "fleet", "host-replaces-fleet", "none"])
def test_cpu_sets_per_host_and_fleet_wide(hypervisors, fleet, expected):
    settings = validate_hypervisors(hypervisors, fleet_cpu=fleet)["hv1"]
    assert {key: settings[key] for key in ("cpu_dedicated_set", "cpu_shared_set") if key in settings} == expected


@pytest.mark.parametrize("hypervisors, fleet, field", [
    ({"hv1": {"uri": "test:///default", "cpu_dedicated_set": "0-3,x"}}, {}, "hypervisors.hv1.cpu_dedicated_set"),
    ({"hv1": {"uri": "test:///default", "cpu_dedicated_set": "0-3", "cpu_shared_set": "3-5"}}, {},
     "hypervisors.hv1.cpu_shared_set"),
    ({"hv1": {"uri": "test:///default"}}, {"cpu_shared_set": "5-1"}, "cpu_shared_set"),
], ids=["syntax", "overlap", "fleet-syntax"])
def test_bad_cpu_sets_name_the_field(hypervisors, fleet, field):
    with pytest.raises(InputError) as caught:
        validate_hypervisors(hypervisors, fleet_cpu=fleet)
    assert caught.value.field == field


def test_cpu_sets_are_checked_against_the_hosts_cells():
    state = host_state("hv1", _two_cells(), {"cpu_dedicated_set": "2-7,^5", "cpu_shared_set": "0-1"})
    topology = state["numa_topology"]
    assert topology["cpu_dedicated_set"] == [2, 3, 4, 6, 7] and topology["cpu_shared_set"] == [0, 1]
    assert topology["cells"][1]["pages"] == [{"size_kb": 2048, "total": 64, "free": 60}]
    with pytest.raises(InputError) as caught:
        host_state("hv1", _two_cells(), {"cpu_dedicated_set": "4-9"})
    assert caught.value.field == "hypervisors.hv1.cpu_dedicated_set"
    assert "hv1 has no CPU 8-9 (its CPUs: 0-7)" in str(caught.value)


def test_a_host_without_cells_has_cpus_0_to_vcpus_total():
    assert host_state("hv1", facts(), {"cpu_shared_set": "7"})["numa_topology"] == {
        "cells": [], "cpu_dedicated_set": None, "cpu_shared_set": [7]}
    with pytest.raises(InputError):
        host_state("hv1", facts(), {"cpu_shared_set": "8"})


def test_pci_devices_come_through_and_older_facts_have_none():
    device = {"name": "pci_0000_3b_00_0", "address": "0000:3b:00.0", "vendor_id": "8086", "product_id": "1572",
              "numa_node": 1, "dev_type": "type-PF", "mdev_types": [], "virtual_functions": []}
    state = host_state("hv1", {**facts(), "pci_devices": [device],
                               "pci_devices_skipped": {"beyond_limit": 3, "unreadable": 1}}, {})
    assert state["pci_devices"] == [device]
    assert state["pci_devices_skipped"] == {"beyond_limit": 3, "unreadable": 1}
    # Facts cached or gathered before these fields existed.
    state = host_state("hv1", facts(), {})
    assert state["pci_devices"] == [] and state["pci_devices_skipped"] == {"beyond_limit": 0, "unreadable": 0}
    down = down_state("hv1", {}, "gone")
    assert down["pci_devices"] == [] and down["numa_topology"] == {"cells": []}


# ---- reserved_huge_pages: checked against the host's cells, recorded for the NUMA fit ---------

RESERVED_FIELD = "hypervisors.hv1.reserved_huge_pages"


def test_reservations_are_checked_against_the_hosts_cells():
    cells = _two_cells()["numa_topology"]["cells"]  # 64 pages of 2 MiB per cell
    assert host_reserved_pages(RESERVED_FIELD, parse_reserved_huge_pages(RESERVED_FIELD, ["node:1,size:2MB,count:16"]), cells,
                               "hv1") == {"1": {"2048": 16}}
    for value, field, words in ((["node:2,size:2048,count:1"], RESERVED_FIELD + "[0].node", "hv1 has no NUMA cell 2"),
                                (["node:0,size:1GB,count:1"], RESERVED_FIELD + "[0].size", "has no 1048576 KiB pages"),
                                (["node:0,size:2048,count:65"], RESERVED_FIELD + "[0].count", "has 64 pages of 2048 KiB")):
        with pytest.raises(InputError, match=words) as caught:
            host_reserved_pages(RESERVED_FIELD, parse_reserved_huge_pages(RESERVED_FIELD, value), cells, "hv1")
        assert caught.value.field == field


def test_the_source_hands_reservations_to_the_host_state_and_the_fit_counts_them():
    hypervisors = validate_hypervisors(
        {"hv1": {"uri": "test:///default", "reserved_huge_pages": ["node:0,size:2048,count:48"]},
         "hv2": {"uri": "test:///default"}},
        fleet_cpu={"reserved_huge_pages": [{"node": 1, "size": "2MB", "count": 8}]})
    # A host's own replaces the source's, as for the CPU sets.
    assert hypervisors["hv1"]["reserved_huge_pages"] == ["node:0,size:2048,count:48"]
    assert hypervisors["hv2"]["reserved_huge_pages"] == [{"node": 1, "size": "2MB", "count": 8}]
    topology = host_state("hv1", _two_cells(), hypervisors["hv1"])["numa_topology"]
    assert topology["reserved_pages"] == {"0": {"2048": 48}}
    assert [cell.free_pages(2048) for cell in numa_cells(topology, [])] == [16, 64]
    assert "reserved_pages" not in host_state("hv1", _two_cells(), {})["numa_topology"]
    with pytest.raises(InputError) as caught:
        validate_hypervisors({"hv1": {"uri": "test:///default", "reserved_huge_pages": "node:0"}})
    assert caught.value.field == RESERVED_FIELD
    with pytest.raises(InputError) as caught:
        host_state("hv1", _two_cells(), {"reserved_huge_pages": ["node:0,size:2048,count:99"]})
    assert caught.value.field == RESERVED_FIELD + "[0].count"
