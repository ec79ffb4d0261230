"""A seeded generator of random placement scenarios: fleets, flavors, groups, aggregates, hints.

Used by the equivalence test of the two engine paths and the capacity tests. It reaches every
filter and weigher of the registry, with random multipliers and per-aggregate overrides of
each. Values are drawn from small pools on purpose, so that ties, equal bounds, full hosts,
group collisions and metadata matches come up often.
"""
from __future__ import annotations

import random
from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import (
    FILTERS,
    WEIGHERS,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
    DEFAULT_FILTERS,
)

ZONES = ["az1", "az2"]
FLAVOR_NAMES = ["m1.tiny", "m1.small", "m1.medium"]
UUIDS = [f"uuid-{number}" for number in range(8)]
IMAGES = ["debian.qcow2", "alpine.raw"]
NETWORKS = ["default", "private"]
PROJECTS = ["default", "team-a", "team-b"]
METRICS = ["cpu.percent", "load"]
MULTIPLIER_OPTIONS = sorted(weigher.multiplier_option for weigher in WEIGHERS.values())
# Image properties an instance or a request may carry (legacy spellings included: the request
# canonicalises them), and aggregate metadata that isolates on some of them.
IMAGE_PROPERTIES = {
    "os_distro": ["debian", "alpine", "windows"],
    "hw_architecture": ["x86_64", "aarch64", "amd64"],
    "hw_vm_mode": ["hvm", "hv"],
    "hw_machine_type": ["q35", "pc"],
    "isolation.os_distro": ["debian", "alpine"],
}
# PCI devices: a host has none, or 1 to 4 VFs of one PF (some held by an instance), and a
# request may ask for 1 or 2 of them.
PCI_ALIASES = [{"name": "nic", "vendor_id": "8086", "product_id": "154c", "device_type": "type-VF"}]


def random_pci_devices(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    count = rng.choice([0, 0, 1, 2, 4])
    devices = [{"name": f"vf{index}", "address": f"0000:3b:02.{index}", "vendor_id": "8086",
                "product_id": "154c", "numa_node": 0, "dev_type": "type-VF", "mdev_types": [],
                "parent_address": "0000:3b:00.0"} for index in range(count)]
    held = rng.sample(devices, rng.randint(0, count))
    return devices, [{"pci": [{"address": device["address"]}]} for device in held]


def random_numa_topology(rng: random.Random) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A host's numa_topology (none, one or two cells of two cores with two threads, 2 MiB pages,
    CPU sets or Nova's legacy mode) and the NUMA assignments of the instances pinned there."""
    cells = rng.choice([0, 1, 1, 2])
    if not cells:
        return {}, []
    topology: dict[str, Any] = {"cells": []}
    for cell in range(cells):
        cpus = list(range(cell * 4, cell * 4 + 4))
        memory_mb = rng.choice([1024, 4096])
        topology["cells"].append({
            "id": cell, "memory_mb": memory_mb, "cpus": cpus,
            "cpu_topology": [{"id": cpu, "siblings": [cpu - cpu % 2, cpu - cpu % 2 + 1]} for cpu in cpus],
            "pages": [{"size_kb": 4, "total": memory_mb * 256}, {"size_kb": 2048, "total": rng.choice([0, 64, 512])}]})
    if rng.random() < 0.5:
        topology["cpu_shared_set"] = [cell * 4 for cell in range(cells)]
        topology["cpu_dedicated_set"] = [cpu for cell in range(cells) for cpu in range(cell * 4 + 1, cell * 4 + 4)]
    held = []
    for _instance in range(rng.choice([0, 0, 1, 2])):
        pinned = rng.sample(range(1, 4), rng.randint(1, 2))
        held.append({"numa": {"cpu_policy": "dedicated", "cells": [{
            "id": 0, "host_cell": 0, "vcpus": list(range(len(pinned))), "memory_mb": 128,
            "page_size_kb": rng.choice([None, 2048]), "cpuset": [],
            "pinning": {str(vcpu): cpu for vcpu, cpu in enumerate(pinned)}}],
            "emulator_cpus": sorted(pinned), "emulator_isolated": False}})
    return topology, held


def random_aggregate(rng: random.Random, number: int) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if rng.random() < 0.4:
        metadata["availability_zone"] = rng.choice(ZONES + ["az1,az2", "az2, nova"])
    for key, values in (("ram_allocation_ratio", ["1.0", "1.5", "0.5"]),
                        ("cpu_allocation_ratio", ["2.0", "8.0", "bad"]),
                        ("disk_allocation_ratio", ["1.0", "2.0"]),
                        ("max_instances_per_host", ["3", "10", "2.5"]),
                        ("max_io_ops_per_host", ["1", "5"]),
                        ("instance_type", ["m1.tiny", "m1.small, m1.medium"]),
                        ("ssd", ["true", "false"]),
                        ("storage", ["ssd,nvme", "hdd"]),
                        ("filter_tenant_id", ["team-a", "team-a,team-b"]),
                        ("filter_tenant_id_2", ["default"]),
                        ("os_distro", ["debian,alpine", "windows"]),
                        ("hw_architecture", ["x86_64", "aarch64"]),
                        ("isolation.os_distro", ["debian"])):
        if rng.random() < 0.15:
            metadata[key] = rng.choice(values)
    # Any weigher's multiplier, overridden for the aggregate's hosts.
    for option in MULTIPLIER_OPTIONS:
        if rng.random() < 0.1:
            metadata[option] = rng.choice(["-2.0", "0.0", "0.5", "3", "1000", "bad"])
    return {"name": f"agg{number}", "metadata": metadata}


def random_image_properties(rng: random.Random, most: int) -> dict[str, Any]:
    keys = rng.sample(sorted(IMAGE_PROPERTIES), rng.randint(0, most))
    return {key: rng.choice(IMAGE_PROPERTIES[key]) for key in keys}


def random_host(rng: random.Random, number: int, aggregates: list[dict[str, Any]]) -> dict[str, Any]:
    ram_total = rng.choice([2048, 8192, 16384])
    disk_gb = rng.choice([10, 40, 100])
    vcpus = rng.choice([0, 2, 4, 8])
    pci_devices, assignments = random_pci_devices(rng)
    numa_topology, numa_assignments = random_numa_topology(rng)
    return {
        "host": f"hv{number}" if rng.random() < 0.95 else "hv0",
        "nodename": f"node{number}",
        "uuid": f"u{number}",
        "service_up": rng.random() < 0.93,
        "disabled": rng.random() < 0.05,
        "vcpus_total": vcpus,
        "vcpus_used": rng.randint(0, vcpus * 3),
        "total_usable_ram_mb": ram_total,
        "free_ram_mb": rng.choice([ram_total - 512, rng.randint(-1024, ram_total),
                                   ram_total // 2]),
        "total_usable_disk_gb": disk_gb,
        "free_disk_mb": rng.choice([disk_gb * 1024, rng.randint(-2048, disk_gb * 1024)]),
        "num_instances": rng.choice([0, 1, 2, 5, 50]),
        "num_io_ops": rng.choice([0, 0, 1, 3, 8]),
        "cpu_allocation_ratio": rng.choice([4.0, 1.0, 16]),
        "ram_allocation_ratio": rng.choice([1.0, 1.5]),
        "disk_allocation_ratio": rng.choice([1.0, 2.0]),
        "hypervisor_type": "QEMU",
        "hypervisor_version": rng.choice([None, 6000000, 9000000, 9000000]),
        "supported_instances": rng.choice([[], [["x86_64", "kvm", "hvm"]],
                                           [["x86_64", "qemu", "hvm"], ["aarch64", "qemu", "hvm"]]]),
        "cpu_info": {"arch": "x86_64", "vendor": rng.choice(["Intel", "AMD"])},
        "aggregates": rng.sample(aggregates, rng.randint(0, min(2, len(aggregates)))),
        "availability_zone": rng.choice([None, None, None, "az1"]),
        "metrics": rng.choice([{}, {"cpu.percent": rng.choice([5, 50])},
                               {"cpu.percent": 20, "load": 1.5}, {"cpu.percent": 20, "load": 1.5},
                               {"cpu.percent": 80, "load": 0.2}, {"load": "n/a"}]),
        "instances": rng.sample(UUIDS, rng.randint(0, 2)),
        "failed_builds": rng.choice([0, 0, 0, 1, 3]),
        # As the ledger gives them: seconds since the last sync (None for live facts), and the
        # images and networks it listed.
        "sync_age_s": rng.choice([None, None, 12.5, 400.0, 900.0]),
        "images": rng.sample(IMAGES, rng.randint(0, len(IMAGES))),
        "networks": rng.sample(NETWORKS, rng.randint(0, len(NETWORKS))),
        "host_ip": rng.choice([None, f"10.0.{rng.randint(0, 1)}.{number % 250 + 1}",
                               f"192.168.1.{number % 250 + 1}", f"fd00::{number + 1:x}"]),
        "instance_image_properties": [random_image_properties(rng, 3)
                                      for _instance in range(rng.randint(0, 3))],
        "pci_devices": pci_devices,
        "numa_topology": numa_topology,
        "assignments": assignments + numa_assignments,
    }


def random_fleet(rng: random.Random, hosts: int) -> list[dict[str, Any]]:
    aggregates = [random_aggregate(rng, number) for number in range(rng.randint(0, 4))]
    return [random_host(rng, number, aggregates) for number in range(hosts)]


def random_request(rng: random.Random, host_names: list[str]) -> dict[str, Any]:
    flavor: dict[str, Any] = {
        "name": rng.choice(FLAVOR_NAMES), "vcpus": rng.choice([1, 2, 4, 9]),
        "memory_mb": rng.choice([512, 1024, 2048, 4096, 20000]),
        "root_gb": rng.choice([1, 5, 20]), "ephemeral_gb": rng.choice([0, 0, 5]),
        "swap": rng.choice([0, 0, 512]), "extra_specs": {},
    }
    for key, value in (("aggregate_instance_extra_specs:ssd", "true"),
                       ("capabilities:cpu_info:vendor", "<or> Intel <or> AMD"),
                       ("capabilities:vcpus_total", ">= 4"), ("hw:cpu_policy", "dedicated"),
                       ("capabilities:hypervisor_version", "s>= 7")):
        if rng.random() < 0.15:
            flavor["extra_specs"][key] = value
    if rng.random() < 0.5:
        enabled = list(DEFAULT_FILTERS)
    else:
        enabled = rng.sample(list(FILTERS), rng.randint(1, len(FILTERS)))
    others = sorted(set(FILTERS) - set(enabled))
    if others and rng.random() < 0.3:
        # Every filter beyond the defaults comes up in some of the requests.
        enabled += rng.sample(others, rng.randint(1, min(4, len(others))))
    request: dict[str, Any] = {
        "flavor": flavor, "count": rng.randint(1, 6), "enabled_filters": enabled,
        "weighers": (list(WEIGHERS) if rng.random() < 0.5
                     else rng.sample(list(WEIGHERS), rng.randint(0, len(WEIGHERS)))),
        "host_subset_size": rng.choice([1, 1, 2, 3]), "seed": rng.randint(0, 1000),
        "max_attempts": rng.choice([1, 3, 5]),
        "explain": rng.choice(["full", "compact", "auto"]),
        "max_instances_per_host": rng.choice([50, 3]),
        "max_io_ops_per_host": rng.choice([8, 2]),
    }
    if rng.random() < 0.2:
        request["driver"] = "chance"
    if rng.random() < 0.6:
        options = rng.sample(MULTIPLIER_OPTIONS, rng.randint(1, len(MULTIPLIER_OPTIONS)))
        request["weight_multipliers"] = {
            option: rng.choice([-2.0, -1.0, 0.0, 0.5, 2.5, 1000.0, 3]) for option in options}
    if rng.random() < 0.3:
        request["availability_zone"] = rng.choice(ZONES + ["nova"])
    if rng.random() < 0.3:
        request["image_properties"] = rng.choice([
            {"hw_architecture": "x86_64"}, {"img_hv_type": "qemu", "hw_vm_mode": "hvm"},
            {"architecture": "aarch64", "img_hv_requested_version": ">= 7.0"},
            {"hw_architecture": "amd64", "hw_vm_mode": "hv"}])
    if rng.random() < 0.4:
        request["image_properties"] = {**request.get("image_properties", {}),
                                       **random_image_properties(rng, 3)}
    if rng.random() < 0.3:
        request["project_id"] = rng.choice(PROJECTS)
    if rng.random() < 0.2:
        request["aggregate_image_properties_isolation_namespace"] = "isolation"
    if request.get("image_properties") and rng.random() < 0.5:
        # Nova's default 0.0 turns ImagePropertiesWeigher off: turn it on where it has work.
        request.setdefault("weight_multipliers", {})["image_props_weight_multiplier"] = (
            rng.choice([-1.0, 2.0, 1000.0]))
    if rng.random() < 0.3:
        request["image_props_weight_setting"] = rng.choice([
            [], ["os_distro=1"], ["os_distro=2", "hw_machine_type=-1.5"], ["hw_vm_mode=0"]])
    if rng.random() < 0.4:
        policy = rng.choice(["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"])
        group_hosts = rng.sample(host_names, min(len(host_names), rng.randint(0, 2)))
        request["server_group"] = {
            "name": "web", "policy": policy, "hosts": group_hosts,
            "rules": {"max_server_per_host": rng.choice([1, 2])},
        }
    hints: dict[str, Any] = {}
    if rng.random() < 0.15:
        hints["same_host"] = rng.sample(UUIDS, 2)
    if rng.random() < 0.15:
        hints["different_host"] = rng.sample(UUIDS, 2)
    if rng.random() < 0.15:
        hints["query"] = rng.choice([
            '[">=", "$free_ram_mb", 4096]',
            '["and", ["<", "$num_instances", 5], ["in", "$cpu_info.vendor", "Intel", "AMD"]]',
            '["not", ["=", "$hypervisor_version", 6000000]]', "[]",
            '["or", [], ["=", "$host_ip", "10.0.0.1"]]'])
    if rng.random() < 0.2:
        hints["build_near_host_ip"] = rng.choice(["10.0.0.9", "10.0.1.200", "fd00::1"])
        if rng.random() < 0.5:
            hints["cidr"] = rng.choice(["/16", "/24", "/120", "/32"])
    if hints:
        request["scheduler_hints"] = hints
    if rng.random() < 0.15:
        # Nova's [host, node] pairs (nodes are "node<n>" for host "hv<n>"), or a bare name.
        request["retry_hosts"] = [
            rng.choice([name, [name, "node" + name[2:]], [name, "node0"]])
            for name in rng.sample(host_names, min(2, len(host_names)))]
    if rng.random() < 0.15:
        request["isolated_hosts"] = rng.sample(host_names, min(2, len(host_names)))
        request["isolated_images"] = rng.choice([[], ["img-1"]])
        request["image_id"] = rng.choice(["img-1", "img-2"])
        request["restrict_isolated_hosts_to_isolated_images"] = rng.random() < 0.5
    if rng.random() < 0.3:
        request["metrics_weight_setting"] = rng.choice([["cpu.percent=-1.0"],
                                                        ["cpu.percent=1", "load=2.0"],
                                                        ["load=0"]])
        # Nova's default (required) fails on a host without the metric unless MetricsFilter
        # removed it: mostly off or filtered here, so that decisions, not errors, dominate.
        if rng.random() < 0.5:
            request["metrics_required"] = False
        elif rng.random() < 0.7 and "MetricsFilter" not in request["enabled_filters"]:
            request["enabled_filters"] = request["enabled_filters"] + ["MetricsFilter"]
    if rng.random() < 0.3:
        request["service_down_time"] = rng.choice([600, 60])
    if rng.random() < 0.2:
        request["image_volume"] = rng.choice(IMAGES)
    if rng.random() < 0.2:
        request["requested_networks"] = rng.sample(NETWORKS, rng.randint(1, len(NETWORKS)))
    if rng.random() < 0.1:
        request["ignore_hosts"] = rng.sample(host_names, 1)
    if rng.random() < 0.05:
        request["force_hosts"] = rng.sample(host_names, min(2, len(host_names)))
    if rng.random() < 0.3:
        request["pci_alias"] = PCI_ALIASES
        if rng.random() < 0.5:
            flavor["extra_specs"]["pci_passthrough:alias"] = rng.choice(["nic:1", "nic:2"])
    if rng.random() < 0.15:
        # NUMA placement, or a policy Nova does not know, refused before anything is decided.
        flavor["extra_specs"]["hw:cpu_policy"] = rng.choice(["dedicated", "dedicated", "shared", "realtime"])
        if rng.random() < 0.4:
            flavor["extra_specs"]["hw:mem_page_size"] = rng.choice(["2MB", "small", "any"])
        if rng.random() < 0.2:
            flavor["extra_specs"]["hw:numa_nodes"] = "2"
    if rng.random() < 0.2:
        # The operator's host rules on the fleet's aggregates (agg0..agg3), of every kind.
        request["host_rules"] = [
            {"name": f"rule{index}", "kind": rng.choice(["must", "should", "must_not", "should_not"]),
             "aggregate": f"agg{rng.randint(0, 3)}", "instance_label": "db", "weight": rng.choice([1.0, 2.5])}
            for index in range(rng.randint(1, 2))]
    return request
