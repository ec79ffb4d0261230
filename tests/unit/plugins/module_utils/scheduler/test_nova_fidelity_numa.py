"""Issue 38's classes: NUMA cells, devices and shared CPUs where Berth decided otherwise than Nova.

One test (or a few) per class, each with Nova's answer as the expectation, worked from Nova's code
(openstack/nova, the function named in the test) and, where one exists, taken from its own unit
test (nova/tests/unit/virt/test_hardware.py). Where Berth keeps its own answer, the test says
Nova's, asserts Berth's, and docs/docsite/rst/numa.rst ("Where Berth differs") says why; the
differential test (test_nova_differential.py) holds the rest on random hosts.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler import assignment
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import SchedulerInputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.numa import GuestCell, numa_cells
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import DEFAULT_TEMPLATE, DomainTemplate

from ._builders import make_host, verdict
from .test_numa_fit import SMALL, pinned, topology

NIC = {"name": "nic", "vendor_id": "8086", "product_id": "154c"}


def spec(vcpus: int = 1, memory_mb: int = 512, aliases: Any = (), image: Any = None, **extra_specs: str) -> RequestSpec:
    flavor = Flavor(name="f", vcpus=vcpus, memory_mb=memory_mb, root_gb=1,
                    extra_specs={key.replace("__", ":"): value for key, value in extra_specs.items()})
    return RequestSpec(flavor=flavor, image_properties=image or {}, pci_alias=list(aliases),
                       enabled_filters=["NUMATopologyFilter", "PciPassthroughFilter"])


def vf(address: str, numa_node: Any, product: str = "154c", parent: str = "0000:3b:00.0") -> dict[str, Any]:
    return {"name": address, "address": address, "vendor_id": "8086", "product_id": product, "numa_node": numa_node,
            "dev_type": "type-VF", "mdev_types": [], "parent_address": parent}


def fitted(host: Any, request: RequestSpec) -> Any:
    return assignment.fit(host, assignment.of_spec(request))


def host_cells_of(fit: Any) -> list[int]:
    return [cell["host_cell"] for cell in fit["numa"]["cells"]]


# ---- 1. host cells ordered by their free PCI devices ------------------------------------------

def test_1_a_request_with_devices_tries_the_cells_with_the_most_free_devices_first():
    """numa_fit_instance_to_host sorts the host cells, last, by the free devices of pci_stats'
    pools on each (most first when the request asks for devices): cell 1, with the only VF on
    a cell, comes first, and the VF is the local one. Berth took cell 0 (the cells were equal)
    and the VF without a NUMA node, which the legacy policy allows."""
    host = make_host(numa_topology=topology(), pci_devices=[vf("0000:3b:02.0", None), vf("0000:3b:02.1", 1)])
    fit, _why = fitted(host, spec(hw__cpu_policy="dedicated", pci_passthrough__alias="nic:1", aliases=[NIC]))
    assert host_cells_of(fit) == [1]
    assert [device["address"] for device in fit["pci"]] == ["0000:3b:02.1"]


def test_1_a_request_without_devices_keeps_off_the_cells_with_devices():
    """The same sort, fewest first without a device request (to keep the devices' cells free):
    the NUMA-only guest goes to cell 1, as the cell with the device is last."""
    host = make_host(numa_topology=topology(), pci_devices=[vf("0000:3b:02.0", 0)])
    fit, _why = fitted(host, spec(hw__cpu_policy="dedicated", aliases=[NIC]))
    assert host_cells_of(fit) == [1]
    # Without aliases no device is assignable (Nova: nothing in [pci] device_spec): no reordering.
    fit, _why = fitted(host, spec(hw__cpu_policy="dedicated"))
    assert host_cells_of(fit) == [0]


def sorting_host() -> Any:
    """Nova's HostCellsSortingTestCase: four cells of four CPUs and 4 GiB; cell 0 floats the most
    shared vCPUs (3), cell 1 has the devices (two), cell 2 the most free dedicated CPUs (none
    pinned), cell 3 the most free memory (1 GiB used, 2 GiB on the others)."""
    cells = topology(cells=4, cpus=4, pages=((SMALL, 1048576),))
    usage = {0: (3, 2048, [0, 1]), 1: (2, 2048, [4, 5]), 2: (2, 2048, []), 3: (2, 1024, [12, 13])}
    held = []
    for cell, (floating, memory_mb, pins) in usage.items():
        held.append({"numa": {"cpu_policy": "shared", "emulator_cpus": [], "emulator_isolated": False, "cells": [
            {"id": 0, "host_cell": cell, "vcpus": list(range(floating)), "memory_mb": memory_mb, "page_size_kb": None,
             "pinning": {}, "cpuset": []}]}})
        if pins:
            held.append(pinned(cell, dict(enumerate(pins)), memory_mb=0))
    devices = [vf("0000:3b:02.0", 1), vf("0000:3b:02.1", 1)]
    return make_host(numa_topology=cells, pci_devices=devices, assignments=held)


@pytest.mark.parametrize("policy, devices, nova_order", [
    ("dedicated", False, [2, 3, 0]),  # test_sort_pci_stats_no_pci_req_no_shared_cpu_policy
    ("dedicated", True, [1, 2, 3]),   # test_sort_pci_stats_pci_req_no_shared_cpu_policy
    ("shared", False, [3, 2, 0]),     # test_sort_pci_stats_no_pci_req_shared_cpu_policy
    ("shared", True, [1, 3, 2]),      # test_sort_pci_stats_pci_req_shared_cpu_policy
], ids=["dedicated", "dedicated-pci", "shared", "shared-pci"])
def test_1_nova_s_own_sorting_cases(policy, devices, nova_order):
    """Three one-vCPU guest cells of 2 GiB; Nova's expectations with its default spreading
    (packing_host_numa_cells_allocation_strategy false)."""
    extra = {"hw__cpu_policy": policy, "hw__numa_nodes": "3"}
    if devices:
        extra["pci_passthrough__alias"] = "nic:1"
    fit, why = fitted(sorting_host(), spec(vcpus=3, memory_mb=6144, aliases=[NIC], **extra))
    assert why is None
    assert host_cells_of(fit) == nova_order


# ---- 2. guests without pinning kept off the dedicated CPUs --------------------------------------

def rendered(assignment_: Any = None, shared_cpus: Any = None, domain_type: str = "qemu") -> ET.Element:
    request = Request(flavor=Flavor(name="f", vcpus=2, memory_mb=1024, root_gb=1))
    made = {"disk": {"path": "/var/lib/libvirt/images/root.qcow2"}, "seed": None, "nvram": None}
    return ET.fromstring(DomainTemplate(DEFAULT_TEMPLATE).render(
        request, "vm-1", "6c1f2b1e-3a4d-4e5f-8a9b-0c1d2e3f4a5b", made, domain_type, "/var/log/libvirt/qemu",
        assignment=assignment_, shared_cpus=shared_cpus))


def test_2_a_guest_without_cells_floats_over_the_host_s_cpu_shared_set():
    """_get_guest_numa_config: a guest without an instance NUMA topology gets
    _get_vcpu_available() - cpu_shared_set where it is set - as its <vcpu cpuset>; libvirt then
    keeps its emulator threads there too. Where it is not set (legacy mode), no cpuset."""
    assert rendered(shared_cpus=[0, 1, 4, 5]).find("vcpu").attrib == {"cpuset": "0-1,4-5"}
    assert rendered().find("vcpu").attrib == {}
    # A guest with devices and no cells: the same.
    devices = {"pci": [{"address": "0000:3b:02.0"}], "mdevs": []}
    assert rendered(devices, shared_cpus=[0]).find("vcpu").get("cpuset") == "0"


def test_2_a_guest_with_cells_is_pinned_or_floats_per_cell_and_gets_no_cpuset():
    """With an instance NUMA topology Nova gives no cpu_set: each vCPU is pinned or floats over
    its host cell's shared CPUs (<vcpupin>)."""
    cells = {"numa": {"cpu_policy": "shared", "cells": [
        {"id": 0, "host_cell": 0, "vcpus": [0, 1], "memory_mb": 1024, "page_size_kb": None, "pinning": {},
         "cpuset": [0, 1]}]}}
    domain = rendered(cells, shared_cpus=[0, 1, 4, 5])
    assert domain.find("vcpu").attrib == {}
    assert [pin.get("cpuset") for pin in domain.findall("cputune/vcpupin")] == ["0-1", "0-1"]


@pytest.mark.parametrize("value", [[-1], ["0"], "0-3", [True], [0, 0]], ids=str)
def test_2_a_shared_set_from_the_ledger_that_is_no_cpu_list_is_refused_naming_it(value):
    with pytest.raises(InputError) as caught:
        rendered(shared_cpus=value)
    assert caught.value.field.startswith("cpu_shared_set")


# ---- 3. the socket policy and alias configuration errors -----------------------------------------

SOCKET_TOPOLOGY = topology(cells=3)
for _cell in SOCKET_TOPOLOGY["cells"]:
    for _cpu in _cell["cpu_topology"]:
        _cpu["socket_id"] = 0 if _cell["id"] < 2 else 1  # cells 0 and 1 on socket 0, cell 2 on socket 1


@pytest.mark.parametrize("device_node, nova_fits", [(0, True), (1, True), (2, False), (None, False)],
                         ids=["on-the-cell", "same-socket", "other-socket", "no-node"])
def test_3_the_socket_policy_takes_devices_on_the_guest_cells_sockets(device_node, nova_fits):
    """_filter_pools_for_numa_cells, then _filter_pools_for_socket_affinity: the devices on the
    guest's cells, else on any cell of their sockets; never one without a NUMA node. The
    guest (memory for cell 0 only, 3 GiB) lands on cell 0."""
    socket_nic = {**NIC, "numa_policy": "socket"}
    host = make_host(numa_topology=SOCKET_TOPOLOGY, pci_devices=[vf("0000:3b:02.0", device_node)],
                     assignments=[pinned(1, {0: 4}, memory_mb=2048), pinned(2, {0: 8}, memory_mb=2048)])
    fit, why = fitted(host, spec(memory_mb=3072, hw__cpu_policy="dedicated", pci_passthrough__alias="nic:1",
                                 aliases=[socket_nic]))
    assert (fit is not None) == nova_fits, why
    if fit is not None:
        assert host_cells_of(fit) == [0]
    else:
        assert "policy socket" in why


def test_3_a_cell_on_two_sockets_leaves_the_socket_policy_nothing():
    """_get_host_numa_topology leaves a cell's socket None where its CPUs are on several, and
    _filter_pools_for_socket_affinity then takes no pool at all."""
    mixed = topology(cells=2)
    mixed["cells"][1]["cpu_topology"][0]["socket_id"] = 7
    host = make_host(numa_topology=mixed, pci_devices=[vf("0000:3b:02.0", 1)],
                     assignments=[pinned(1, {0: 4, 1: 5, 2: 6, 3: 7})])
    fit, why = fitted(host, spec(hw__cpu_policy="dedicated", pci_passthrough__alias="nic:1",
                                 hw__pci_numa_affinity_policy="socket", aliases=[NIC]))
    assert fit is None and "do not each say their socket" in why


def test_3_a_socket_alias_is_no_error_for_requests_that_do_not_use_it():
    aliases = [{**NIC, "numa_policy": "socket"}, {"name": "gpu", "vendor_id": "10de", "product_id": "1eb8"}]
    assert spec(aliases=aliases).pci is None
    assert spec(aliases=aliases, pci_passthrough__alias="gpu:1").pci.devices[0].numa_policy == "legacy"


def test_3_alias_entries_of_one_name_must_each_give_their_type():
    """get_alias_from_config compares the entry's dev_type with the first one's: an entry (or
    a first entry) without one raises KeyError, which it turns into PciInvalidAlias."""
    aliases = [{**NIC, "device_type": "type-VF"}, {**NIC, "product_id": "10ed"}]
    with pytest.raises(SchedulerInputError, match="must each give device_type") as caught:
        spec(aliases=aliases, pci_passthrough__alias="nic:1")
    assert caught.value.field == "pci_alias[1].device_type"
    with pytest.raises(SchedulerInputError, match="must each give device_type"):
        spec(aliases=[NIC, {**NIC, "product_id": "10ed"}], pci_passthrough__alias="nic:1")


def test_3_an_alias_error_refuses_only_the_requests_that_ask_for_an_alias():
    """get_pci_requests_from_flavor reads the aliases (get_alias_from_config) only for a flavor
    with pci_passthrough:alias: any other request goes on (and counts no device)."""
    broken = [NIC, {"name": "gpu", "vendor_id": "10de"}]
    assert spec(aliases=broken).pci_alias == []
    assert spec(aliases=broken, hw__cpu_policy="dedicated").numa is not None
    with pytest.raises(SchedulerInputError) as caught:
        spec(aliases=broken, pci_passthrough__alias="nic:1")
    assert caught.value.field == "pci_alias[1].product_id"


# ---- 4. legacy policy and PFs: declared ---------------------------------------------------------

def test_4_legacy_does_not_count_a_pf_it_will_not_give():
    """An untyped alias matching a PF (on the guest's cell) and a VF (without a NUMA node),
    legacy policy. Nova's _filter_pools applies the policy first: the PF alone makes enough on
    the cell, so the pools without a node are never looked at, and dropping the PF after
    (_filter_pools_for_unrequested_pfs) leaves nothing: no fit. Berth drops the PF first and
    falls back to the VF without a node, as legacy allows (numa.rst, "Where Berth differs")."""
    pf_on_cell = {"name": "pf", "address": "0000:3a:00.0", "vendor_id": "8086", "product_id": "1572",
                  "numa_node": 0, "dev_type": "type-PF", "mdev_types": [], "virtual_functions": []}
    other_vf = vf("0000:3b:02.0", None, product="1572")
    host = make_host(numa_topology=topology(cells=1), pci_devices=[pf_on_cell, other_vf])
    nic = {"name": "nic", "vendor_id": "8086", "product_id": "1572"}
    fit, why = fitted(host, spec(hw__cpu_policy="dedicated", pci_passthrough__alias="nic:1", aliases=[nic]))
    nova_fits = False
    assert (fit is not None) != nova_fits, why
    assert [device["address"] for device in fit["pci"]] == ["0000:3b:02.0"]


# ---- 5. hw:numa_cpus.N without hw:numa_nodes; cells without vCPUs ---------------------------------

def test_5_cell_specs_without_numa_nodes_describe_the_one_cell_or_nothing():
    """numa_get_constraints: with pinning or a page size, nodes = 1 and hw:numa_cpus.0 /
    hw:numa_mem.0 are that cell's; without either they ask nothing (no NUMA topology)."""
    cells = {"hw__numa_cpus.0": "0-1", "hw__numa_mem.0": "512"}
    assert spec(vcpus=2, hw__cpu_policy="dedicated", **cells).numa.cells == (
        GuestCell(id=0, vcpus=(0, 1), dedicated_vcpus=(0, 1), memory_mb=512),)
    assert spec(vcpus=2, **cells).numa is None
    # Two cells described without hw:numa_nodes: len(cpu_list) != nodes (1): incomplete.
    with pytest.raises(SchedulerInputError) as caught:
        spec(vcpus=2, hw__mem_page_size="small", **{"hw__numa_cpus.0": "0", "hw__numa_cpus.1": "1",
                                                    "hw__numa_mem.0": "256", "hw__numa_mem.1": "256"})
    assert caught.value.field == "flavor.extra_specs.hw:numa_cpus.1"


def test_5_more_guest_cells_than_vcpus():
    """_get_numa_topology_auto refuses a split that is not even (ImageNUMATopologyAsymmetric);
    _get_numa_topology_manual takes a cell of memory only (hw_numa_cpus.1 of no CPU)."""
    with pytest.raises(SchedulerInputError, match="does not divide") as caught:
        spec(vcpus=1, image={"hw_numa_nodes": "2"}, hw__mem_page_size="small")
    assert caught.value.field == "image_properties.hw_numa_nodes"
    request = spec(vcpus=1, image={"hw_numa_nodes": "2"}, **{
        "hw__numa_cpus.0": "0", "hw__numa_cpus.1": "", "hw__numa_mem.0": "256", "hw__numa_mem.1": "256"})
    assert [(cell.vcpus, cell.memory_mb) for cell in request.numa.cells] == [((0,), 256), ((), 256)]
    fit, why = fitted(make_host(numa_topology=topology()), request)
    assert why is None and host_cells_of(fit) == [0, 1]
    # libvirt takes a cell without vCPUs as one without cpus (it refuses cpus=''), Nova writes it so.
    domain = rendered_cells(fit)
    assert [cell.attrib for cell in domain.findall("cpu/numa/cell")] == [
        {"id": "0", "cpus": "0", "memory": "256", "unit": "MiB"}, {"id": "1", "memory": "256", "unit": "MiB"}]


def rendered_cells(fit: Any) -> ET.Element:
    request = Request(flavor=Flavor(name="f", vcpus=1, memory_mb=512, root_gb=1))
    made = {"disk": {"path": "/var/lib/libvirt/images/root.qcow2"}, "seed": None, "nvram": None}
    return ET.fromstring(DomainTemplate(DEFAULT_TEMPLATE).render(
        request, "vm-1", "6c1f2b1e-3a4d-4e5f-8a9b-0c1d2e3f4a5b", made, "qemu", "/var/log/libvirt/qemu",
        assignment=fit))


# ---- 6. isolate in Nova's legacy mode ------------------------------------------------------------

def legacy_cell(siblings: list[tuple[int, ...]]) -> dict[str, Any]:
    cpus = sorted(cpu for core in siblings for cpu in core)
    return {"cells": [{"id": 0, "memory_mb": 4096, "cpus": cpus,
                       "pages": [{"size_kb": SMALL, "total": 1048576}],
                       "cpu_topology": [{"id": cpu, "socket_id": 0, "die_id": 0, "core_id": index, "siblings": list(core)}
                                        for index, core in enumerate(siblings) for cpu in core]}],
            "cpu_dedicated_set": None, "cpu_shared_set": None}


@pytest.mark.parametrize("held_cpus, nova_pinning, nova_emulator", [
    ((), {"0": 0, "1": 2}, [4]),   # test_isolate_w_isolate_thread_alloc
    ((0,), {"0": 2, "1": 4}, [1]),  # test_isolate_w_isolate_thread_alloc_usage
], ids=["idle", "cpu-0-pinned"])
def test_6_isolate_on_an_smt_host_in_legacy_mode_pins_one_thread_per_free_core(held_cpus, nova_pinning,
                                                                               nova_emulator):
    """_pack_instance_onto_cores, isolate, with cpuset == pcpuset (Nova's legacy mode): one thread
    of each wholly free core, the emulator's CPU the first free one off those cores."""
    host = make_host(numa_topology=legacy_cell([(0, 1), (2, 3), (4, 5)]),
                     assignments=[pinned(0, {0: cpu}) for cpu in held_cpus])
    fit, why = fitted(host, spec(vcpus=2, hw__cpu_policy="dedicated", hw__cpu_thread_policy="isolate",
                                 hw__emulator_threads_policy="isolate"))
    assert why is None
    assert fit["numa"]["cells"][0]["pinning"] == nova_pinning
    assert fit["numa"]["emulator_cpus"] == nova_emulator and fit["numa"]["cpu_thread_policy"] == "isolate"


def test_6_the_isolated_cores_siblings_are_held():
    """numa_usage_from_instance_numa: pin_cpus_with_siblings for an isolate instance (Nova's
    test_host_usage_from_instances_isolate): the siblings of its CPUs are not free after it."""
    host = make_host(numa_topology=legacy_cell([(0, 1), (2, 3)]))
    fit, _why = fitted(host, spec(hw__cpu_policy="dedicated", hw__cpu_thread_policy="isolate"))
    assert fit["numa"]["cells"][0]["pinning"] == {"0": 0}
    assert numa_cells(host.numa_topology, [fit])[0].free_dedicated_cpus == [2, 3]
    # With cpu_dedicated_set, Nova's placement keeps isolate off hosts with SMT: as before.
    host = make_host(numa_topology={**legacy_cell([(0, 1), (2, 3)]), "cpu_dedicated_set": [0, 1, 2, 3]})
    assert verdict("NUMATopologyFilter", host, spec(hw__cpu_policy="dedicated", hw__cpu_thread_policy="isolate"))


# ---- 7. two Nova quirks: declared ------------------------------------------------------------------

def test_7_large_pages_are_chosen_per_host_cell():
    """Cell 0 (most free memory, tried first) offers 1 GiB pages but one CPU; cell 1 only 2 MiB
    pages. Nova's _numa_fit_instance_cell stores 1 GiB, chosen on cell 0 before its CPUs fell
    short, on the instance cell; tried on cell 1 it asks exactly 1 GiB, which cell 1 does not
    have (MemoryPageSizeNotSupported): no fit. Berth chooses on each cell what it asked
    (large): 2 MiB on cell 1 (numa.rst, "Where Berth differs")."""
    host_topology = topology(cells=2, cpus=2, memory_mb=4096, pages=((SMALL, 524288), (2048, 1024)))
    host_topology["cells"][0].update(memory_mb=8192, cpus=[0], cpu_topology=host_topology["cells"][0]["cpu_topology"][:1],
                                     pages=[{"size_kb": SMALL, "total": 1048576}, {"size_kb": 1048576, "total": 4}])
    fit, why = fitted(make_host(numa_topology=host_topology), spec(vcpus=2, memory_mb=1024, hw__mem_page_size="large"))
    nova_fits = False
    assert (fit is not None) != nova_fits, why
    assert host_cells_of(fit) == [1] and fit["numa"]["cells"][0]["page_size_kb"] == 2048


def test_7_a_guest_cell_without_dedicated_vcpus_needs_no_sibling_cores():
    """mixed, require: guest cell 0 has the shared vCPU only. Nova's _numa_fit_instance_cell
    packs it anyway, and _pack_instance_onto_cores (require) finds no core with two free
    threads on either host cell (one thread of each is pinned): no fit. Berth packs the cell's
    dedicated vCPUs, of which it has none (numa.rst, "Where Berth differs")."""
    host_topology = topology(cells=2, cpus=4, threads=2)
    one_thread_each = [pinned(0, {0: 0, 1: 2}), pinned(1, {0: 4})]
    request = spec(vcpus=2, memory_mb=1024, hw__cpu_policy="mixed", hw__cpu_dedicated_mask="1",
                   hw__cpu_thread_policy="require", hw__numa_nodes="2")
    fit, why = fitted(make_host(numa_topology=host_topology, assignments=one_thread_each), request)
    nova_fits = False
    assert (fit is not None) != nova_fits, why
    assert [cell["pinning"] for cell in fit["numa"]["cells"]] == [{}, {"1": 6}]
    # And with the emulator isolated on it, Nova's packing has no pinning to go after
    # (_get_reserved returns None) and refuses on every host; Berth gives it a CPU.
    fit, why = fitted(make_host(numa_topology=topology()), spec(
        vcpus=2, memory_mb=1024, hw__cpu_policy="mixed", hw__cpu_dedicated_mask="1", hw__numa_nodes="2",
        hw__emulator_threads_policy="isolate"))
    assert why is None and fit["numa"]["emulator_cpus"] == [0] and fit["numa"]["emulator_isolated"]


# ---- 8. which CPU among equals --------------------------------------------------------------------

@pytest.mark.parametrize("siblings, vcpus, nova_pinning, nova_emulator", [
    # _get_reserved after _get_pinning at two threads a core: the core left half free first.
    ([(0, 4), (1, 5), (2, 6), (3, 7)], 3, {"0": 0, "1": 4, "2": 1}, [5]),
    # test_single_node_isolate: no SMT, the next free CPU.
    ([(0,), (1,)], 1, {"0": 0}, [1]),
], ids=["smt", "no-smt"])
def test_8_the_isolated_emulator_thread_takes_the_next_free_cpu_in_core_order(siblings, vcpus, nova_pinning,
                                                                              nova_emulator):
    host = make_host(numa_topology=legacy_cell(siblings))
    fit, why = fitted(host, spec(vcpus=vcpus, hw__cpu_policy="dedicated", hw__emulator_threads_policy="isolate"))
    assert why is None
    assert fit["numa"]["cells"][0]["pinning"] == nova_pinning and fit["numa"]["emulator_cpus"] == nova_emulator


# ---- 9. the small ones ------------------------------------------------------------------------------

@pytest.mark.parametrize("domain_type, timers", [
    ("kvm", [{"name": "pit", "tickpolicy": "delay"}, {"name": "rtc", "tickpolicy": "catchup"},
             {"name": "hpet", "present": "no"}]),
    ("qemu", []),
])
def test_9_the_guest_has_the_apic_and_nova_s_clock(domain_type, timers):
    """_set_features adds ACPI and the APIC for qemu and kvm; _set_clock a UTC clock, and under
    kvm _set_kvm_timers the PIT (delay), the RTC (catchup) and no HPET (x86, hw_time_hpet unset)."""
    domain = rendered(domain_type=domain_type)
    assert [feature.tag for feature in domain.find("features")] == ["acpi", "apic"]
    assert domain.find("clock").attrib == {"offset": "utc"}
    assert [timer.attrib for timer in domain.findall("clock/timer")] == timers
