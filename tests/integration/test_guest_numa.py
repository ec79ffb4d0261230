"""NUMA placement, dedicated CPUs and huge pages on the real lab fleet (issue 24).

The domain XML an assignment renders against real libvirt: a domain with a PCI hostdev and an
mdev hostdev passes the QEMU driver's checks on define, and a lab guest with a pinned vCPU and
2 MiB huge pages starts, boots, and shows exactly its assignment in ``virsh vcpupin``,
``virsh numatune`` and its live memory backing. Then the whole path: launch.yml with
hw:cpu_policy=dedicated and hw:mem_page_size=2MB claims a host's dedicated CPU and pages and the
running guest has exactly what the ledger claimed; a second launch goes to the other host, a
third fails with the reason, a delete gives them back; a live migration fits the guest anew on
the other host; eight launches racing for the two hosts' dedicated CPUs never pin one CPU
twice; and an ordinary guest beside a pinned one floats over the shared CPU only (issue 38)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import xml.etree.ElementTree as ET

import fleet
import pytest
from conftest import failed_messages, rows, task_result

from ansible_collections.berth.fleet.plugins.module_utils.request import Boot, Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import DEFAULT_FILTERS
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import DEFAULT_TEMPLATE, DomainTemplate

pytestmark = pytest.mark.integration

HOST = "hv1"
BOOT_TIMEOUT_S = 120
TINY = Flavor(name="numa.tiny", vcpus=1, memory_mb=128, root_gb=1)
# What a claim of hw:cpu_policy=dedicated, hw:mem_page_size=2MB would hold on a lab hypervisor
# (cpu_dedicated_set 1, cpu_shared_set 0, one NUMA cell): vCPU 0 on host CPU 1, the emulator
# threads on the shared CPU 0, 64 pages of 2 MiB on host cell 0.
PINNED = {"numa": {"cpu_policy": "dedicated", "emulator_cpus": [0], "emulator_isolated": False, "cells": [
    {"id": 0, "host_cell": 0, "vcpus": [0], "memory_mb": 128, "page_size_kb": 2048, "pinning": {"0": 1}}]}}
DEVICES = {"pci": [{"address": "0000:81:00.2", "alias": "nic", "dev_type": "type-VF", "numa_node": 0}],
           "mdevs": [{"parent": "0000:06:00.0", "type": "nvidia-35"}]}


def rendered(lab, name: str, uuid: str, assignment: dict) -> str:
    """The domain XML berth.fleet.instance renders for a lab guest with ``assignment``."""
    request = Request(flavor=TINY, boot=Boot(os.path.join(lab.dir, "guest", "vmlinuz"),
                                             os.path.join(lab.dir, "guest", "initrd.img"), "console=ttyS0"))
    made = {"disk": {"path": f"{fleet.POOL_TARGET}/{name}.qcow2"}, "seed": None, "nvram": None}
    return DomainTemplate(DEFAULT_TEMPLATE).render(request, name, uuid, made, "qemu", fleet.QEMU_LOG_DIR,
                                                   assignment=assignment)


def define(lab, xml: str) -> subprocess.CompletedProcess:
    return subprocess.run(["virsh", "-c", lab.hosts[HOST]["uri"], "define", "/dev/stdin"], input=xml, text=True,
                          capture_output=True, check=False, timeout=60)


def cpu_ids(text: str) -> set[int]:
    """The host CPUs of a libvirt CPU list ("0-2,5")."""
    found = set()
    for part in text.strip().split(","):
        first, _dash, last = part.partition("-")
        found.update(range(int(first), int(last or first) + 1))
    return found


def test_hostdevs_pass_libvirt_s_checks_on_define(numa_lab):
    name, uuid = "numa-dev", "0b6e6c9e-4f3a-4d1e-9a55-3c2b1a0f9e11"
    result = define(numa_lab, rendered(numa_lab, name, uuid, DEVICES))
    try:
        assert result.returncode == 0, result.stderr
        devices = ET.fromstring(numa_lab.virsh(HOST, "dumpxml", "--inactive", name)).find("devices")
        pci = devices.find("hostdev[@type='pci']")
        assert pci.get("managed") == "yes"
        assert {key: int(value, 16) for key, value in pci.find("source/address").attrib.items()} == {
            "domain": 0, "bus": 0x81, "slot": 0, "function": 2}
        mdev = devices.find("hostdev[@type='mdev']")
        assert mdev.get("model") == "vfio-pci" and mdev.find("source/address").get("uuid")
    finally:
        subprocess.run(["virsh", "-c", numa_lab.hosts[HOST]["uri"], "undefine", name], capture_output=True,
                       check=False)


def test_a_pinned_guest_in_huge_pages_runs_with_exactly_its_assignment(numa_lab):
    name, uuid = "numa-pin", "3f1d2c4b-5a69-4e8f-b7c6-d5e4f3a2b190"
    numa_lab.virsh(HOST, "vol-create-as", "default", f"{name}.qcow2", "1G", "--format", "qcow2")
    result = define(numa_lab, rendered(numa_lab, name, uuid, PINNED))
    assert result.returncode == 0, result.stderr
    try:
        numa_lab.virsh(HOST, "start", name)
        # vcpupin: "<vCPU> <host CPUs>" per line, after a header.
        pins = {int(vcpu): cpu_ids(cpus) for vcpu, cpus in
                re.findall(r"^\s*(\d+)\s+([\d,-]+)\s*$", numa_lab.virsh(HOST, "vcpupin", name), re.M)}
        [cell] = PINNED["numa"]["cells"]
        assert pins == {int(vcpu): {host_cpu} for vcpu, host_cpu in cell["pinning"].items()}
        emulator = re.search(r"^\s*\*:\s*([\d,-]+)", numa_lab.virsh(HOST, "emulatorpin", name), re.M)
        assert emulator and cpu_ids(emulator.group(1)) == set(PINNED["numa"]["emulator_cpus"])
        numatune = dict(re.findall(r"^(\w+)\s*:\s*(\S+)", numa_lab.virsh(HOST, "numatune", name), re.M))
        assert (numatune["numa_mode"], cpu_ids(numatune["numa_nodeset"])) == ("strict", {cell["host_cell"]})
        live = ET.fromstring(numa_lab.virsh(HOST, "dumpxml", name))
        assert [page.attrib for page in live.findall("memoryBacking/hugepages/page")] == [
            {"size": str(cell["page_size_kb"]), "unit": "KiB", "nodeset": str(cell["id"])}]
        assert [memnode.attrib for memnode in live.findall("numatune/memnode")] == [
            {"cellid": str(cell["id"]), "mode": "strict", "nodeset": str(cell["host_cell"])}]
        assert [cell.get("memAccess") for cell in live.findall("cpu/numa/cell")] == ["shared"]
        # QEMU took the guest's memory from the daemon's hugetlbfs, and the guest boots in it.
        qemu_log = (fleet.log_dir(numa_lab.dir, HOST) / f"{name}.log").read_text(errors="replace")
        assert f"{fleet.host_root(numa_lab.dir, HOST) / fleet.HUGETLBFS_DIR}/libvirt/qemu" in qemu_log
        serial = fleet.log_dir(numa_lab.dir, HOST) / f"{name}.serial.log"
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        while "BERTH-GUEST-BOOTED" not in (serial.read_text(errors="replace") if serial.exists() else ""):
            assert time.monotonic() < deadline, f"{name} printed no boot marker in {BOOT_TIMEOUT_S} s"
            time.sleep(0.5)
    finally:
        subprocess.run(["virsh", "-c", numa_lab.hosts[HOST]["uri"], "destroy", name], capture_output=True, check=False)
        numa_lab.virsh(HOST, "undefine", name)
        numa_lab.virsh(HOST, "vol-delete", "--pool", "default", f"{name}.qcow2")


def test_the_lab_s_inventory_gives_each_hypervisor_its_share_of_the_pages(numa_lab):
    source = (fleet.inventory_dir(numa_lab.dir) / "fleet.berth.yml").read_text()
    hosts = len(numa_lab.hosts)
    assert source.count('cpu_dedicated_set: "1"') == source.count('cpu_shared_set: "0"') == hosts
    assert source.count("reserved_huge_pages:") == hosts
    added = fleet.huge_pages_added(numa_lab.dir)
    assert sum(added.values()) == 128
    # Each hypervisor sees all of the machine's pages and keeps back all but its share.
    machine = {node: int(open(fleet.NODE_HUGE_PAGES.format(node=node)).read()) for node in added}
    assert fleet.reserved_huge_pages(numa_lab.dir, hosts) == [
        f"node:{node},size:2048,count:{machine[node] - added[node] // hosts}" for node in sorted(machine)]


# One dedicated vCPU in 2 MiB pages: on a numa_lab hypervisor (cpu_dedicated_set "1", 64 pages of
# its own) exactly one such guest fits.
PIN_FLAVOR = {"name": "numa.pin", "vcpus": 1, "memory_mb": 128, "root_gb": 1,
              "extra_specs": {"hw:cpu_policy": "dedicated", "hw:mem_page_size": "2MB"}}
# NUMATopologyFilter is not a default, as in Nova: a NUMA fleet's operator enables it.
NUMA_FILTERS = [*DEFAULT_FILTERS, "NUMATopologyFilter"]


# An ordinary guest: no pinning, no cells, no pages.
PLAIN_FLAVOR = {"name": "numa.plain", "vcpus": 1, "memory_mb": 128, "root_gb": 1}


def launch_args(name: str, flavor: dict | None = None, **more) -> tuple[str, str]:
    # The filters are the operator's setting (berth_enabled_filters), never a requester's.
    return "-e", json.dumps({"name": name, "flavor": flavor or PIN_FLAVOR, "berth_enabled_filters": NUMA_FILTERS,
                             **more})


def claimed(lab) -> dict[str, tuple[str, dict]]:
    """Instance name -> (host, assignment) as the ledger's claims hold them (read with sqlite3)."""
    url = f"sqlite:///{lab.ledger_path}"
    names = {row["uuid"]: row["name"] for row in rows(url, "instances")}
    hosts = {row["uuid"]: row["name"] for row in rows(url, "hypervisors")}
    return {names[row["instance_uuid"]]: (hosts[row["hypervisor_uuid"]], json.loads(row["assignment"]))
            for row in rows(url, "claims") if row["assignment"]}


def vcpu_pins(lab, host: str, name: str) -> dict[int, set[int]]:
    return {int(vcpu): cpu_ids(cpus) for vcpu, cpus in
            re.findall(r"^\s*(\d+)\s+([\d,-]+)\s*$", lab.virsh(host, "vcpupin", name), re.M)}


def emulator_pin(lab, host: str, name: str) -> set[int]:
    found = re.search(r"^\s*\*:\s*([\d,-]+)", lab.virsh(host, "emulatorpin", name), re.M)
    assert found, lab.virsh(host, "emulatorpin", name)
    return cpu_ids(found.group(1))


def delete(lab, *names: str) -> None:
    for name in names:
        deleted = lab.playbook("delete.yml", "-e", f"name={name}")
        assert deleted["rc"] == 0, failed_messages(deleted)


def test_a_dedicated_launch_in_huge_pages_runs_with_exactly_what_the_ledger_claimed(numa_lab):
    # Check mode claims nothing, and its diff shows the domain with what the claim would take.
    dry = numa_lab.playbook("launch.yml", *launch_args("pin-a"), "--diff", check=True)
    assert dry["rc"] == 0, failed_messages(dry)
    [planned] = task_result(dry, "Launch the instances")["diff"]
    domain = ET.fromstring(planned["after"])
    assert [(pin.get("vcpu"), pin.get("cpuset")) for pin in domain.findall("cputune/vcpupin")] == [("0", "1")]
    assert [page.get("size") for page in domain.findall("memoryBacking/hugepages/page")] == ["2048"]
    assert claimed(numa_lab) == {}
    first = numa_lab.playbook("launch.yml", *launch_args("pin-a"))
    assert first["rc"] == 0, failed_messages(first)
    try:
        [(host, assignment)] = claimed(numa_lab).values()
        [cell] = assignment["numa"]["cells"]
        assert cell["pinning"] == {"0": 1} and cell["page_size_kb"] == 2048 and cell["memory_mb"] == 128
        # The running domain has exactly that: vCPU 0 on host CPU 1, memory strictly on the cell,
        # backed by 2 MiB pages.
        assert vcpu_pins(numa_lab, host, "pin-a-1") == {0: {1}}
        numatune = dict(re.findall(r"^(\w+)\s*:\s*(\S+)", numa_lab.virsh(host, "numatune", "pin-a-1"), re.M))
        assert (numatune["numa_mode"], cpu_ids(numatune["numa_nodeset"])) == ("strict", {cell["host_cell"]})
        live = ET.fromstring(numa_lab.virsh(host, "dumpxml", "pin-a-1"))
        assert [page.get("size") for page in live.findall("memoryBacking/hugepages/page")] == ["2048"]
        # The sync before it stored both hypervisors' topologies (one machine, the same settings)
        # as one text, and what libvirt counted free of their pages apart.
        facts = rows(f"sqlite:///{numa_lab.ledger_path}", "hypervisor_facts")
        assert len(facts) == 2 and facts[0]["numa_topology"] == facts[1]["numa_topology"]
        assert '"free"' not in facts[0]["numa_topology"]
        for row in facts:
            counted = json.loads(row["free_pages"])
            assert any("2048" in sizes for sizes in counted.values()), counted
            assert all(isinstance(count, int) and count >= 0 for sizes in counted.values() for count in sizes.values())

        # The same again: that host's one dedicated CPU and its pages are taken, so it goes to the other.
        second = numa_lab.playbook("launch.yml", *launch_args("pin-b"))
        assert second["rc"] == 0, failed_messages(second)
        placed = claimed(numa_lab)
        other = placed["pin-b-1"][0]
        assert other != host and vcpu_pins(numa_lab, other, "pin-b-1") == {0: {1}}
        # A third finds no host, and says why.
        third = numa_lab.playbook("launch.yml", *launch_args("pin-c"))
        assert third["rc"] != 0
        message = " ".join(failed_messages(third))
        # (Each host's 64 pages are its one guest's: the fitting finds the pages short first.)
        assert "no NUMA cell with 64 free 2048 KiB pages" in message, message
        # Deleting the first gives its CPU and pages back: the third launch now lands where it ran.
        delete(numa_lab, "pin-a")
        again = numa_lab.playbook("launch.yml", *launch_args("pin-c"))
        assert again["rc"] == 0, failed_messages(again)
        assert claimed(numa_lab)["pin-c-1"][0] == host
    finally:
        delete(numa_lab, "pin-a", "pin-b", "pin-c")


def test_a_migration_fits_the_guest_anew_on_its_destination(numa_lab):
    launched = numa_lab.playbook("launch.yml", *launch_args("pin-m"))
    assert launched["rc"] == 0, failed_messages(launched)
    try:
        source, _assignment = claimed(numa_lab)["pin-m-1"]
        destination = next(host for host in numa_lab.hosts if host != source)
        moved = numa_lab.playbook("migrate.yml", "-e", "instance=pin-m-1", "-e", f"to_host={destination}")
        assert moved["rc"] == 0, failed_messages(moved)
        # Its claim is the destination's now, with the destination's own CPU and pages, and the
        # domain there runs with them; nothing of it is left on the source.
        host, assignment = claimed(numa_lab)["pin-m-1"]
        assert host == destination and task_result(moved, "Migrate the instance")["to_host"] == destination
        [cell] = assignment["numa"]["cells"]
        assert vcpu_pins(numa_lab, destination, "pin-m-1") == {0: {cell["pinning"]["0"]}}
        live = ET.fromstring(numa_lab.virsh(destination, "dumpxml", "pin-m-1"))
        assert [page.get("size") for page in live.findall("memoryBacking/hugepages/page")] == ["2048"]
        assert "pin-m-1" not in numa_lab.virsh(source, "list", "--all", "--name").split()
    finally:
        delete(numa_lab, "pin-m")


def test_eight_launches_racing_for_dedicated_cpus_never_pin_one_twice(numa_lab):
    names = [f"race{number}" for number in range(8)]
    numa_lab.keep_synced((), None)
    procs = [numa_lab.start_playbook("launch.yml", *launch_args(name)) for name in names]
    outputs = [numa_lab.finish(proc) for proc in procs]
    try:
        # Two hosts with one dedicated CPU each: exactly two launches win, the others say why.
        assert sorted(output["rc"] == 0 for output in outputs) == [False] * 6 + [True] * 2, [
            failed_messages(output) for output in outputs]
        placed = claimed(numa_lab)
        pins = [(host, cpu) for host, assignment in placed.values()
                for cell in assignment["numa"]["cells"] for cpu in cell["pinning"].values()]
        assert len(pins) == len(set(pins)) == 2
        # The domains agree with the ledger.
        for name, (host, assignment) in placed.items():
            assert vcpu_pins(numa_lab, host, name) == {
                int(vcpu): {cpu} for cell in assignment["numa"]["cells"] for vcpu, cpu in cell["pinning"].items()}
    finally:
        delete(numa_lab, *names)


def test_an_ordinary_guest_floats_over_the_shared_cpu_beside_a_pinned_one(numa_lab):
    """Issue 38: with cpu_dedicated_set 1 and cpu_shared_set 0, a guest that asks no pinning has
    its vCPUs and its emulator threads on CPU 0 only (<vcpu cpuset='0'>, as Nova's libvirt driver
    keeps ordinary guests off the dedicated CPUs), and the pinned guest beside it keeps CPU 1 to
    itself."""
    pinned_launch = numa_lab.playbook("launch.yml", *launch_args("pin-s"))
    assert pinned_launch["rc"] == 0, failed_messages(pinned_launch)
    try:
        host, assignment = claimed(numa_lab)["pin-s-1"]
        # Onto the pinned guest's host (forcing a host is the operator's: berth_force_hosts).
        plain_launch = numa_lab.playbook("launch.yml", *launch_args("float", PLAIN_FLAVOR, berth_force_hosts=[host]))
        assert plain_launch["rc"] == 0, failed_messages(plain_launch)
        instances = {row["name"]: row["host"] for row in rows(f"sqlite:///{numa_lab.ledger_path}", "instances")}
        assert instances["float-1"] == host
        assert "float-1" not in claimed(numa_lab)  # it holds no CPU of its own
        live = ET.fromstring(numa_lab.virsh(host, "dumpxml", "float-1"))
        assert live.find("vcpu").get("cpuset") == "0"
        assert vcpu_pins(numa_lab, host, "float-1") == {0: {0}}
        assert emulator_pin(numa_lab, host, "float-1") == {0}
        # The pinned guest still has its own CPU, and nothing else runs there.
        [cell] = assignment["numa"]["cells"]
        assert vcpu_pins(numa_lab, host, "pin-s-1") == {0: {cell["pinning"]["0"]}} == {0: {1}}
        assert emulator_pin(numa_lab, host, "pin-s-1") == set(assignment["numa"]["emulator_cpus"]) == {1}
    finally:
        delete(numa_lab, "pin-s", "float")
