"""A 50-hypervisor heterogeneous fleet through libvirt's test driver and the real ansible-inventory.

Each hypervisor is a ``test:///abs/path/hvN.xml`` node file with its own CPUs, memory and
preloaded domains (TESTBED.md). The expected facts are computed here from the same numbers that
went into the files, not through Berth's helpers.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from facts_helpers import ansible_env, group_members, plain, run_inventory, strings_not_unsafe

pytestmark = pytest.mark.integration

HOSTS = 50
MODELS = ["Westmere", "Haswell", "Skylake-Server", "EPYC", "Nehalem"]
# The test driver reports every pool at 100 GiB whatever the file says (TESTBED.md).
POOL_GB = 100
ROOT_DISK_GB = 10
BERTH_NS = "urn:berth:instance:1"


def spec(i: int) -> dict:
    """The made-up hardware and domains of hypervisor i (1-based)."""
    cpus = 2 + (i % 8) * 2
    domains = []
    for d in range(i % 4):
        domains.append({
            "name": f"dom{i}-{d}", "uuid": f"00000000-0000-4000-8000-{i:06d}{d:06d}",
            "vcpus": 1 + d, "memory_mb": 512 * (d + 1),
            "state": ("running", "shutoff")[d % 2],
            # The first domain of a host is a Berth instance with a root volume in the pool.
            "berth": f"11111111-0000-4000-8000-{i:06d}{d:06d}" if d == 0 else None,
        })
    settings = {}
    if i % 7 == 0:
        settings["reserved_host_memory_mb"] = 1024
    if i % 10 == 0:
        settings["ram_allocation_ratio"] = 1.5
    return {"cpus": cpus, "memory_mb": 4096 * (1 + i % 6), "model": MODELS[i % 5],
            "mhz": 2000 + 100 * i, "domains": domains, "settings": settings}


def node_xml(i: int, s: dict) -> str:
    doms = []
    for dom in s["domains"]:
        metadata = disks = ""
        if dom["berth"]:
            metadata = (f'<metadata><berth:instance xmlns:berth="{BERTH_NS}"><berth:uuid>{dom["berth"]}'
                        f'</berth:uuid><berth:name>{dom["name"]}</berth:name><berth:flavor>m1.tiny'
                        "</berth:flavor></berth:instance></metadata>")
            disks = (f'<disk type="file" device="disk"><source file="/pool{i}/{dom["name"]}.qcow2"/>'
                     '<target dev="vda"/></disk>')
        # A disk that is no pool volume takes nothing from the pool.
        disks += (f'<disk type="file" device="disk"><source file="/elsewhere/{dom["name"]}.img"/>'
                  '<target dev="vdb"/></disk>')
        runstate = {"running": 1, "shutoff": 5}[dom["state"]]
        doms.append(f"""
  <domain type="test" xmlns:test="http://libvirt.org/schemas/domain/test/1.0">
    <name>{dom["name"]}</name><uuid>{dom["uuid"]}</uuid>
    <memory unit="MiB">{dom["memory_mb"]}</memory><vcpu>{dom["vcpus"]}</vcpu>
    <os><type>hvm</type></os>{metadata}
    <devices>{disks}</devices>
    <test:runstate>{runstate}</test:runstate>
  </domain>""")
    volumes = "".join(
        f'<volume type="file"><name>{dom["name"]}.qcow2</name><capacity unit="GiB">{ROOT_DISK_GB}</capacity>'
        f'<allocation>0</allocation><target><path>/pool{i}/{dom["name"]}.qcow2</path></target></volume>'
        for dom in s["domains"] if dom["berth"]
    )
    return f"""<node>
  <cpu><mhz>{s["mhz"]}</mhz><model>{s["model"]}</model><active>{s["cpus"]}</active><max>{s["cpus"]}</max>
    <nodes>1</nodes><sockets>1</sockets><cores>{s["cpus"] // 2}</cores><threads>2</threads></cpu>
  <memory>{s["memory_mb"] * 1024}</memory>{"".join(doms)}
  <pool type="dir"><name>default</name><uuid>22222222-0000-4000-8000-{i:012d}</uuid>
    <capacity unit="GiB">{POOL_GB}</capacity><target><path>/pool{i}</path></target>{volumes}</pool>
</node>
"""


def rack(i: int) -> str | None:
    return "rack_a" if i <= 25 else "rack_b" if i <= 48 else None


@pytest.fixture(scope="module")
def fleet_source(tmp_path_factory):
    directory = tmp_path_factory.mktemp("testfleet")
    specs = {}
    lines = ["plugin: berth.fleet.hypervisors", "storage_pool: default", "timeout: 10",
             "uri_policy: {allow_test_files: true}", "hypervisors:"]
    for i in range(1, HOSTS + 1):
        specs[f"hv{i}"] = s = spec(i)
        path = directory / f"hv{i}.xml"
        path.write_text(node_xml(i, s))
        lines.append(f"  hv{i}:")
        lines.append(f"    uri: test://{path}")
        lines += [f"    {key}: {value}" for key, value in s["settings"].items()]
    lines += ["  broken:", f"    uri: test://{directory}/missing.xml"]
    lines += [
        "aggregates:",
        "  rack_a:",
        f"    hosts: [{', '.join(f'hv{i}' for i in range(1, 26))}]",
        "    metadata: {availability_zone: az1}",
        "  rack_b:",
        f"    hosts: [{', '.join(f'hv{i}' for i in range(26, 49))}]",
        "    metadata: {availability_zone: az2, owner: team-b}",
        "  ssd:",
        f"    hosts: [{', '.join(f'hv{i}' for i in range(2, HOSTS + 1, 2))}]",
        '    metadata: {cpu_allocation_ratio: "2.0", disk: ssd}',
        "keyed_groups:",
        "  - key: berth_host_state.availability_zone",
        "    prefix: az",
        "  - key: berth_host_state.cpu_info.model",
        "    prefix: cpu",
        "groups:",
        "  big_memory: berth_host_state.total_usable_ram_mb >= 16384",
        "compose:",
        "  berth_free_ram_mb: berth_host_state.free_ram_mb",
    ]
    source = directory / "fleet.berth.yml"
    source.write_text("\n".join(lines) + "\n")
    return source, specs


def test_fifty_hypervisors_give_the_right_facts_and_groups(fleet_source):
    source, specs = fleet_source
    inventory = run_inventory(source)
    hostvars = inventory["_meta"]["hostvars"]

    assert group_members(inventory, "hypervisors") == set(specs) | {"broken"}
    assert group_members(inventory, "down") == {"broken"}
    broken = plain(hostvars["broken"]["berth_host_state"])
    assert broken["service_up"] is False and "missing.xml" in broken["down_reason"]
    assert "hypervisor broken is down" in inventory["_stderr"]

    uuids = set()
    for i in range(1, HOSTS + 1):
        name, s = f"hv{i}", specs[f"hv{i}"]
        raw = hostvars[name]["berth_host_state"]
        assert strings_not_unsafe(raw) == [], f"{name}: strings from the hypervisor not marked unsafe"
        state = plain(raw)
        reserved_mb = s["settings"].get("reserved_host_memory_mb", 512)
        berth_domains = [d for d in s["domains"] if d["berth"]]
        expected = {
            "host": name, "service_up": True, "down_reason": None,
            "vcpus_total": s["cpus"],
            "vcpus_used": sum(d["vcpus"] for d in s["domains"]),
            "total_usable_ram_mb": s["memory_mb"],
            "free_ram_mb": s["memory_mb"] - reserved_mb - sum(d["memory_mb"] for d in s["domains"]),
            "total_usable_disk_gb": POOL_GB,
            "free_disk_mb": POOL_GB * 1024 - ROOT_DISK_GB * 1024 * len(berth_domains),
            "num_instances": len(s["domains"]),
            "reserved_host_memory_mb": reserved_mb,
            "ram_allocation_ratio": s["settings"].get("ram_allocation_ratio", 1.0),
            "cpu_allocation_ratio": 2.0 if i % 2 == 0 else 4.0,
            "availability_zone": {"rack_a": "az1", "rack_b": "az2", None: "nova"}[rack(i)],
            "hypervisor_type": "TEST",
            "instances": [d["berth"] for d in berth_domains],
            "orphans": [d["name"] for d in s["domains"] if not d["berth"]],
            # The test driver cannot say how much memory is free: unknown, not 0.
            "hv_memory_free_mb": None, "hv_memory_used_mb": None, "hv_memory_source": "getInfo",
        }
        assert {key: state[key] for key in expected} == expected, name
        assert state["cpu_info"]["model"] == s["model"]
        assert state["cpu_info"]["mhz"] == s["mhz"]
        assert state["cpu_info"]["topology"] == {"sockets": 1, "cores": s["cpus"] // 2, "threads": 2}
        assert ["i686", "test", "hvm"] in state["supported_instances"]
        assert [(p["name"], p["capacity_mb"]) for p in state["pools"]] == [("default", POOL_GB * 1024)]
        domains = {d["name"]: d for d in state["domains"]}
        assert set(domains) == {d["name"] for d in s["domains"]}
        for dom in s["domains"]:
            got = domains[dom["name"]]
            assert (got["uuid"], got["state"], got["vcpus"], got["memory_mb"]) == (
                dom["uuid"], dom["state"], dom["vcpus"], dom["memory_mb"])
            assert (got["berth"] or {}).get("instance_uuid") == dom["berth"]
            pool_disks = [disk["capacity_mb"] for disk in got["disks"] if disk["pool"] == "default"]
            assert pool_disks == ([ROOT_DISK_GB * 1024] if dom["berth"] else [])
        aggregates = [a["name"] for a in state["aggregates"]]
        assert aggregates == sorted(filter(None, [rack(i), "ssd" if i % 2 == 0 else None]))
        if rack(i) == "rack_b":
            rack_b = next(a for a in state["aggregates"] if a["name"] == "rack_b")
            assert rack_b["metadata"] == {"availability_zone": "az2", "owner": "team-b"}
        assert hostvars[name]["berth_free_ram_mb"] == expected["free_ram_mb"]
        uuids.add(state["uuid"])
    assert len(uuids) == HOSTS and all(re.fullmatch(r"[0-9a-f-]{36}", u) for u in uuids)

    assert group_members(inventory, "rack_a") == {f"hv{i}" for i in range(1, 26)}
    assert group_members(inventory, "rack_b") == {f"hv{i}" for i in range(26, 49)}
    assert group_members(inventory, "ssd") == {f"hv{i}" for i in range(2, HOSTS + 1, 2)}
    assert group_members(inventory, "az_az1") == {f"hv{i}" for i in range(1, 26)}
    assert group_members(inventory, "az_nova") == {"hv49", "hv50", "broken"}
    for model in MODELS:
        assert group_members(inventory, f"cpu_{model.replace('-', '_')}") == {
            name for name, s in specs.items() if s["model"] == model}
    assert group_members(inventory, "big_memory") == {
        name for name, s in specs.items() if s["memory_mb"] >= 16384}


def test_cached_facts_are_reused_until_flushed(fleet_source, tmp_path):
    source, specs = fleet_source
    cached = tmp_path / "cached.berth.yml"
    cached.write_text(source.read_text() + "\n".join([
        "cache: true",
        "cache_plugin: ansible.builtin.jsonfile",
        f"cache_connection: {tmp_path / 'cache'}",
        "cache_timeout: 3600",
    ]) + "\n")
    xml = Path(source.parent / "hv1.xml")
    original = xml.read_text()
    first = plain(run_inventory(cached)["_meta"]["hostvars"]["hv1"]["berth_host_state"])
    assert first["vcpus_total"] == specs["hv1"]["cpus"]
    try:
        # The hypervisor changes; the cache still answers with what was gathered.
        changed = re.sub(r"<active>\d+</active><max>\d+</max>", "<active>64</active><max>64</max>", original)
        xml.write_text(re.sub(r"<cores>\d+</cores>", "<cores>32</cores>", changed))
        second = plain(run_inventory(cached)["_meta"]["hostvars"]["hv1"]["berth_host_state"])
        assert second["vcpus_total"] == specs["hv1"]["cpus"]
        assert second["gathered_at"] == first["gathered_at"]
        fresh = plain(run_inventory(cached, "--flush-cache")["_meta"]["hostvars"]["hv1"]["berth_host_state"])
        assert fresh["vcpus_total"] == 64
    finally:
        xml.write_text(original)


# ---- issue 24's facts through the test driver: NUMA cells and pages, CPU sets, PCI devices ----

DEVICES_NODE = """<node>
  <cpu><mhz>2000</mhz><model>Haswell</model><active>4</active><max>4</max>
    <nodes>1</nodes><sockets>1</sockets><cores>2</cores><threads>2</threads></cpu>
  <memory>4194304</memory>
  <pool type="dir"><name>default</name><uuid>22222222-0000-4000-8000-999999999999</uuid>
    <capacity unit="GiB">100</capacity><target><path>/pool-devices</path></target></pool>
  <pool type="dir"><name>default-pool</name><uuid>22222222-0000-4000-8000-999999999998</uuid>
    <capacity unit="GiB">100</capacity><target><path>/pool-devices-2</path></target></pool>
  <device><name>pci_0000_3b_00_0</name><parent>computer</parent>
    <capability type='pci'><domain>0</domain><bus>59</bus><slot>0</slot><function>0</function>
      <product id='0x1572'>Ethernet Controller X710</product><vendor id='0x8086'>Intel Corporation</vendor>
      <capability type='virt_functions' maxCount='64'>
        <address domain='0x0000' bus='0x3b' slot='0x02' function='0x0'/></capability>
      <numa node='1'/></capability></device>
  <device><name>pci_0000_3b_02_0</name><parent>computer</parent>
    <capability type='pci'><domain>0</domain><bus>59</bus><slot>2</slot><function>0</function>
      <product id='0x154c'>Ethernet Virtual Function 700 Series</product><vendor id='0x8086'>Intel Corporation</vendor>
      <capability type='phys_function'><address domain='0x0000' bus='0x3b' slot='0x00' function='0x0'/></capability>
      <numa node='1'/></capability></device>
  <device><name>pci_0000_86_00_0</name><parent>computer</parent>
    <capability type='pci'><domain>0</domain><bus>134</bus><slot>0</slot><function>0</function>
      <product id='0x1eb8'>TU104GL [Tesla T4]</product><vendor id='0x10de'>NVIDIA Corporation</vendor>
      <capability type='mdev_types'><type id='nvidia-222'><name>GRID T4-1B</name><deviceAPI>vfio-pci</deviceAPI>
        <availableInstances>16</availableInstances></type></capability>
      <numa node='0'/></capability></device>
</node>
"""


def numa_source(directory: Path, dedicated: str) -> Path:
    (directory / "devices.xml").write_text(DEVICES_NODE)
    source = directory / "numa.berth.yml"
    source.write_text("\n".join([
        "plugin: berth.fleet.hypervisors", "uri_policy: {allow_test_files: true}",
        # test:///default's only pool; the node file has one of that name too.
        "storage_pool: default-pool",
        'cpu_shared_set: "0-1"',
        "hypervisors:",
        # test:///default: two cells of 8 CPUs, 4 KiB pages in cell 0, 8 KiB in cell 1, none free
        # as far as the driver says.
        "  numa:", "    uri: test:///default", f'    cpu_dedicated_set: "{dedicated}"',
        "    reserved_huge_pages: ['node:1,size:8,count:16']",
        "  devices:", f"    uri: test://{directory / 'devices.xml'}",
    ]) + "\n")
    return source


def test_numa_cells_cpu_sets_and_pci_devices_from_libvirt(tmp_path):
    hostvars = run_inventory(numa_source(tmp_path, "2-15,^8"))["_meta"]["hostvars"]
    assert strings_not_unsafe(hostvars["devices"]["berth_host_state"]) == []
    numa = plain(hostvars["numa"]["berth_host_state"])
    topology = numa["numa_topology"]
    assert [(cell["id"], cell["memory_mb"], cell["cpus"]) for cell in topology["cells"]] == [
        (0, 2048, list(range(8))), (1, 4096, list(range(8, 16)))]
    assert topology["cells"][1]["cpu_topology"][0] == {"id": 8, "socket_id": 1, "die_id": 0, "core_id": 0,
                                                       "siblings": [8]}
    assert topology["cells"][0]["pages"] == [{"size_kb": 4, "total": 524288, "free": None},
                                             {"size_kb": 2048, "total": 0, "free": None},
                                             {"size_kb": 1048576, "total": 0, "free": None}]
    assert topology["cells"][1]["pages"][0] == {"size_kb": 8, "total": 524288, "free": None}
    # A host that sets only its dedicated set takes neither of the source's.
    assert topology["cpu_dedicated_set"] == [2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15]
    assert topology["cpu_shared_set"] is None
    assert topology["reserved_pages"] == {"1": {"8": 16}}
    assert numa["pci_devices"] == []

    devices = plain(hostvars["devices"]["berth_host_state"])
    # No cells: the CPUs are 0 to vcpus_total - 1, and the source's shared set applies.
    assert devices["numa_topology"] == {"cells": [], "cpu_dedicated_set": None, "cpu_shared_set": [0, 1]}
    assert devices["pci_devices_skipped"] == {"beyond_limit": 0, "unreadable": 0}
    assert devices["pci_devices"] == [
        {"name": "pci_0000_3b_00_0", "address": "0000:3b:00.0", "vendor_id": "8086", "product_id": "1572",
         "numa_node": 1, "dev_type": "type-PF", "mdev_types": [], "virtual_functions": ["0000:3b:02.0"]},
        {"name": "pci_0000_3b_02_0", "address": "0000:3b:02.0", "vendor_id": "8086", "product_id": "154c",
         "numa_node": 1, "dev_type": "type-VF", "mdev_types": [], "parent_address": "0000:3b:00.0"},
        {"name": "pci_0000_86_00_0", "address": "0000:86:00.0", "vendor_id": "10de", "product_id": "1eb8",
         "numa_node": 0, "dev_type": "type-PCI", "mdev_types": [
             {"type": "nvidia-222", "name": "GRID T4-1B", "device_api": "vfio-pci", "available_instances": 16}]},
    ]


def test_a_cpu_set_naming_cpus_the_host_lacks_puts_that_host_down_naming_it(tmp_path):
    # What the host reports decides whether the setting fits: a host that reports fewer CPUs
    # than the operator gave it is down with why, as in the tracker sync, and the source's other
    # hosts are listed as usual (a lying host cannot fail every play that reads the source).
    inventory = run_inventory(numa_source(tmp_path, "2-16"), env=ansible_env(ANSIBLE_INVENTORY_UNPARSED_FAILED="1"))
    reason = "hypervisors.numa.cpu_dedicated_set: numa has no CPU 16 (its CPUs: 0-15)"
    numa = plain(inventory["_meta"]["hostvars"]["numa"]["berth_host_state"])
    assert (numa["service_up"], numa["down_reason"]) == (False, reason)
    assert group_members(inventory, "down") == {"numa"}
    assert reason in " ".join(inventory["_stderr"].split())
    assert plain(inventory["_meta"]["hostvars"]["devices"]["berth_host_state"])["service_up"] is True
