"""numa.fit: an instance's guest cells onto a host's cells with Nova's rules (hardware.py and its
unit tests, the admin guides "CPU topologies" and "Huge pages"), beside the assignments of the
instances already there. Hosts are built in host_capabilities.numa_topology's shape."""
from __future__ import annotations

import gc
from typing import Any

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.numa import (
    GuestCell,
    NUMARequest,
    fit,
    numa_cells,
)

SMALL, HUGE_2M, HUGE_1G = 4, 2048, 1048576


def topology(cells: int = 2, cpus: int = 4, threads: int = 1, memory_mb: int = 4096,
             pages: Any = ((SMALL, 1048576), (HUGE_2M, 1024)), dedicated: Any = None, shared: Any = None,
             reserved: Any = None) -> dict[str, Any]:
    """A host of ``cells`` cells of ``cpus`` CPUs each, ``threads`` per core (siblings numbered
    next to each other), with these pages per cell (size_kb, total)."""
    result = []
    for cell in range(cells):
        ids = list(range(cell * cpus, (cell + 1) * cpus))
        result.append({
            "id": cell, "memory_mb": memory_mb, "cpus": ids,
            "cpu_topology": [{"id": cpu, "socket_id": cell, "die_id": 0, "core_id": (cpu - ids[0]) // threads,
                              "siblings": [c for c in ids if (c - ids[0]) // threads == (cpu - ids[0]) // threads]}
                             for cpu in ids],
            "pages": [{"size_kb": size, "total": total, "free": None} for size, total in pages]})
    return {"cells": result, "cpu_dedicated_set": dedicated, "cpu_shared_set": shared,
            **({"reserved_pages": reserved} if reserved else {})}


def request(vcpus: int = 4, memory_mb: int = 1024, policy: str = "dedicated", thread: Any = None,
            page: Any = None, emulator: Any = None, dedicated_vcpus: Any = None,
            cells: Any = None) -> NUMARequest:
    dedicated = (set(range(vcpus)) if policy == "dedicated" else set(dedicated_vcpus or ()))
    guest = cells or [(tuple(range(vcpus)), memory_mb)]
    return NUMARequest(
        cells=tuple(GuestCell(id=n, vcpus=tuple(cpus), dedicated_vcpus=tuple(c for c in cpus if c in dedicated),
                              memory_mb=mem) for n, (cpus, mem) in enumerate(guest)),
        cpu_policy=policy, cpu_thread_policy=thread, mem_page_size=page, emulator_threads_policy=emulator)


def pinned(host_cell: int, pinning: dict[int, int], memory_mb: int = 512, page_size_kb: Any = None,
           **numa: Any) -> dict[str, Any]:
    """Another instance's assignment: these vCPUs pinned on that host cell."""
    return {"numa": {"cpu_policy": "dedicated", "cells": [
        {"id": 0, "host_cell": host_cell, "vcpus": sorted(pinning), "memory_mb": memory_mb,
         "page_size_kb": page_size_kb, "pinning": {str(v): p for v, p in pinning.items()}, "cpuset": []}],
        "emulator_cpus": sorted(pinning.values()), "emulator_isolated": False, **numa}}


def cell_of(assignment: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return assignment["numa"]["cells"][index]


def test_four_dedicated_vcpus_fit_in_one_cell_with_the_exact_shape():
    assignment, reason = fit(topology(), [], request())
    assert reason is None
    assert assignment == {"numa": {
        "cpu_policy": "dedicated",
        "cells": [{"id": 0, "host_cell": 0, "vcpus": [0, 1, 2, 3], "memory_mb": 1024, "page_size_kb": None,
                   "pinning": {"0": 0, "1": 1, "2": 2, "3": 3}, "cpuset": []}],
        "emulator_cpus": [0, 1, 2, 3], "emulator_isolated": False}}


def test_the_emptier_cell_is_taken_first_as_nova_spreads():
    assignment = fit(topology(), [pinned(0, {0: 0})], request(vcpus=2))[0]
    assert cell_of(assignment)["host_cell"] == 1
    assert cell_of(assignment)["pinning"] == {"0": 4, "1": 5}


def test_four_dedicated_vcpus_do_not_fit_across_busy_cells():
    busy = [pinned(0, {0: 0, 1: 1}), pinned(1, {0: 4})]
    assignment, reason = fit(topology(), busy, request())
    assert assignment is None
    assert reason == "no NUMA cell with 4 free dedicated CPUs: cell 0 has 2, cell 1 has 3"


def test_pinned_cpus_of_other_instances_are_never_given_again():
    busy = [pinned(1, {0: 4, 1: 6})]
    assignment = fit(topology(), busy, request(vcpus=2))[0]
    assert cell_of(assignment)["host_cell"] == 0
    assignment = fit(topology(cells=1), [pinned(0, {0: 0, 1: 2})], request(vcpus=2))[0]
    assert sorted(cell_of(assignment)["pinning"].values()) == [1, 3]


@pytest.mark.parametrize("threads, policy, expected", [
    (1, "isolate", {"0": 0, "1": 1}),
    # Nova's legacy mode (neither CPU set): one thread of each wholly free core (class 6 of
    # issue 38, test_nova_fidelity_numa.py).
    (2, "isolate", {"0": 0, "1": 2}),
    (1, "require", None),
    (2, "require", {"0": 0, "1": 1}),
    (2, "prefer", {"0": 0, "1": 1}),
    (2, None, {"0": 0, "1": 1}),
], ids=["isolate-no-smt", "isolate-smt", "require-no-smt", "require-smt", "prefer-smt", "default-smt"])
def test_thread_policies_on_hosts_with_and_without_smt_siblings(threads, policy, expected):
    assignment, reason = fit(topology(threads=threads), [], request(vcpus=2, thread=policy))
    if expected is None:
        assert assignment is None
        assert reason == ("no NUMA cell with SMT siblings (hw:cpu_thread_policy=require): "
                          "cell 0 has one thread per core, cell 1 has one thread per core")
    else:
        assert cell_of(assignment)["pinning"] == expected


def test_siblings_are_packed_onto_the_emptiest_cores_first():
    # Core (0, 1) is half taken: two vCPUs go to the whole core (2, 3), as Nova packs them.
    assignment = fit(topology(cells=1, threads=2), [pinned(0, {0: 0})], request(vcpus=2))[0]
    assert cell_of(assignment)["pinning"] == {"0": 2, "1": 3}
    # require with only single free threads left on each core is refused.
    busy = [pinned(0, {0: 0, 1: 2})]
    assignment, reason = fit(topology(cells=1, threads=2), busy, request(vcpus=2, thread="require"))
    assert assignment is None and "hw:cpu_thread_policy=require" in reason
    # prefer falls back to whatever threads are free.
    assignment = fit(topology(cells=1, threads=2), busy, request(vcpus=2, thread="prefer"))[0]
    assert cell_of(assignment)["pinning"] == {"0": 1, "1": 3}


def test_a_1gib_page_request_on_a_host_with_only_2mib_pages_is_refused_with_the_reason():
    assignment, reason = fit(topology(), [], request(memory_mb=1024, page=HUGE_1G))
    assert assignment is None
    assert reason == ("no NUMA cell with 1 free 1048576 KiB pages: cell 0 offers only 4, 2048 KiB pages, "
                      "cell 1 offers only 4, 2048 KiB pages")


@pytest.mark.parametrize("page, pages, expected", [
    ("large", ((SMALL, 1048576), (HUGE_2M, 1024), (HUGE_1G, 4)), HUGE_1G),
    ("large", ((SMALL, 1048576), (HUGE_2M, 1024), (HUGE_1G, 0)), HUGE_2M),  # the largest that has room
    ("any", ((SMALL, 1048576), (HUGE_2M, 1024), (HUGE_1G, 0)), HUGE_2M),
    ("any", ((SMALL, 1048576), (HUGE_2M, 0)), None),  # small pages are a size too for any
    ("small", ((SMALL, 1048576), (HUGE_2M, 1024)), None),
    (HUGE_2M, ((SMALL, 1048576), (HUGE_2M, 1024)), HUGE_2M),
], ids=["large-1g", "large-2m", "any-2m", "any-small", "small", "explicit-2m"])
def test_page_size_selection(page, pages, expected):
    assignment, reason = fit(topology(pages=pages), [], request(memory_mb=1024, page=page))
    assert reason is None
    assert cell_of(assignment)["page_size_kb"] == expected


def test_large_pages_on_a_host_without_huge_pages_are_refused():
    assignment, reason = fit(topology(cells=1, pages=((SMALL, 1048576),)), [], request(page="large"))
    assert assignment is None
    assert reason == "no NUMA cell with huge pages: cell 0 offers only 4 KiB pages"


def test_memory_that_is_not_a_whole_number_of_pages_is_refused():
    assignment, reason = fit(topology(cells=1, pages=((SMALL, 1048576), (HUGE_1G, 8))), [],
                             request(memory_mb=1536, page=HUGE_1G))
    assert assignment is None
    assert reason == "no NUMA cell with 1536 MiB in whole 1048576 KiB pages: cell 0 cannot divide it so"


def test_reserved_pages_and_other_instances_pages_are_not_free():
    # 1024 pages of 2 MiB per cell: 512 reserved on cell 0, 256 used there by another instance.
    host = topology(reserved={"0": {"2048": 512}})
    others = [pinned(0, {0: 0}, memory_mb=512, page_size_kb=HUGE_2M)]
    assert [cell.free_pages(HUGE_2M) for cell in numa_cells(host, others)] == [256, 1024]
    assignment, reason = fit(host, others, request(vcpus=1, memory_mb=1024, page=HUGE_2M))
    assert cell_of(assignment)["host_cell"] == 1
    full = others + [pinned(1, {0: 4}, memory_mb=1600, page_size_kb=HUGE_2M)]
    assignment, reason = fit(host, full, request(vcpus=1, memory_mb=1024, page=HUGE_2M))
    assert assignment is None
    assert reason == "no NUMA cell with 512 free 2048 KiB pages: cell 0 has 256, cell 1 has 224"


def test_emulator_threads_isolate_takes_one_more_dedicated_cpu():
    assignment, reason = fit(topology(cpus=4), [], request(vcpus=4, emulator="isolate"))
    assert assignment is None
    assert reason == ("no NUMA cell with 5 free dedicated CPUs (one for the emulator threads): "
                      "cell 0 has 4, cell 1 has 4")
    assignment = fit(topology(cpus=8), [], request(vcpus=4, emulator="isolate"))[0]
    numa = assignment["numa"]
    assert cell_of(assignment)["pinning"] == {"0": 0, "1": 1, "2": 2, "3": 3}
    assert (numa["emulator_cpus"], numa["emulator_isolated"]) == ([4], True)
    # The isolated emulator CPU is used: the next instance does not get it.
    cells = numa_cells(topology(cpus=8), [assignment])
    assert cells[0].free_dedicated_cpus == [5, 6, 7]


def test_emulator_threads_share_run_on_the_shared_set():
    host = topology(dedicated=[1, 2, 3, 5, 6, 7], shared=[0, 4])
    assignment = fit(host, [], request(vcpus=2, emulator="share"))[0]
    assert cell_of(assignment)["pinning"] == {"0": 1, "1": 2}
    assert assignment["numa"]["emulator_cpus"] == [0, 4]


def test_mixed_pins_the_masked_vcpus_and_floats_the_others_over_the_shared_set():
    host = topology(dedicated=[2, 3, 6, 7], shared=[0, 1, 4, 5])
    assignment = fit(host, [], request(vcpus=4, policy="mixed", dedicated_vcpus={2, 3}))[0]
    assert cell_of(assignment)["pinning"] == {"2": 2, "3": 3}
    assert cell_of(assignment)["cpuset"] == [0, 1]
    assert assignment["numa"]["cpu_policy"] == "mixed"


def test_dedicated_cpus_come_only_from_the_dedicated_set():
    host = topology(dedicated=[2, 3, 6, 7], shared=[0, 1, 4, 5])
    assignment, reason = fit(host, [], request(vcpus=3))
    assert assignment is None
    assert reason == "no NUMA cell with 3 free dedicated CPUs: cell 0 has 2, cell 1 has 2"


def test_shared_guests_with_huge_pages_float_over_the_cell_and_need_shared_cpus():
    assignment = fit(topology(), [], request(vcpus=2, policy="shared", page=HUGE_2M))[0]
    assert cell_of(assignment)["pinning"] == {} and cell_of(assignment)["cpuset"] == [0, 1, 2, 3]
    assert cell_of(assignment)["page_size_kb"] == HUGE_2M
    # As Nova: with only cpu_dedicated_set, no CPU is shared.
    assignment, reason = fit(topology(dedicated=list(range(8))), [], request(vcpus=2, policy="shared", page=HUGE_2M))
    assert assignment is None and reason == "no NUMA cell with 2 shared CPUs: cell 0 has 0, cell 1 has 0"


def test_a_two_cell_guest_goes_onto_two_host_cells():
    guest = request(vcpus=6, cells=[((0, 1, 2, 3), 1024), ((4, 5), 512)])
    assignment = fit(topology(), [], guest)[0]
    cells = assignment["numa"]["cells"]
    assert [(cell["id"], cell["host_cell"], cell["vcpus"], cell["memory_mb"]) for cell in cells] == [
        (0, 0, [0, 1, 2, 3], 1024), (1, 1, [4, 5], 512)]
    assert cells[1]["pinning"] == {"4": 4, "5": 5}
    # Cell 0 half busy: the 4-vCPU guest cell goes to host cell 1 and the other to cell 0.
    assignment = fit(topology(), [pinned(0, {0: 0, 1: 1})], guest)[0]
    assert [cell["host_cell"] for cell in assignment["numa"]["cells"]] == [1, 0]
    # Both busy: the guest cell that fits nowhere is named.
    assignment, reason = fit(topology(), [pinned(0, {0: 0}), pinned(1, {0: 4})], guest)
    assert assignment is None
    assert reason == "guest cell 0: no NUMA cell with 4 free dedicated CPUs: cell 0 has 3, cell 1 has 3"


def test_guest_cells_that_fit_only_the_same_host_cell_are_refused_so():
    guest = request(vcpus=4, cells=[((0, 1), 512), ((2, 3), 512)])
    assignment, reason = fit(topology(), [pinned(1, {0: 4, 1: 5, 2: 6})], guest)
    assert assignment is None
    assert reason == ("the guest's 2 NUMA cells fit no 2 distinct host cells: guest cell 0 fits host cell 0; "
                      "guest cell 1 fits host cell 0")


def test_more_guest_cells_than_host_cells_or_no_cells():
    assert fit(topology(cells=1), [], request(vcpus=2, cells=[((0,), 512), ((1,), 512)])) == (
        None, "the guest asks 2 NUMA cells, the host has 1")
    assert fit({"cells": [], "cpu_dedicated_set": None, "cpu_shared_set": None}, [], request()) == (
        None, "the host reports no NUMA cells")


def test_a_cell_memory_full_of_other_pinned_guests_is_full():
    host = topology(cells=1, pages=())
    assignment, reason = fit(host, [pinned(0, {0: 0}, memory_mb=3584)], request(vcpus=1, memory_mb=1024))
    assert assignment is None
    assert reason == "no NUMA cell with 1024 MiB of memory: cell 0 has 512 MiB"


def test_devices_decide_between_permutations_and_join_the_assignment():
    asked = []

    def devices(host_cells):
        asked.append(host_cells)
        if host_cells == (1,):
            return {"pci": [{"address": "0000:81:00.2", "alias": "nic", "dev_type": "type-VF", "numa_node": 1}]}, None
        return None, f"no PCI device for alias nic on NUMA cell {host_cells[0]}"

    assignment, reason = fit(topology(), [], request(vcpus=2), devices=devices)
    assert asked == [(0,), (1,)]
    assert cell_of(assignment)["host_cell"] == 1 and assignment["pci"][0]["numa_node"] == 1
    assignment, reason = fit(topology(), [], request(vcpus=2), devices=lambda cells: (None, "no device"))
    assert (assignment, reason) == (None, "no device")


def test_shared_vcpus_and_memory_per_cell_are_capped_by_the_ratios():
    others = [{"numa": {"cpu_policy": "shared", "emulator_cpus": [], "emulator_isolated": False, "cells": [
        {"id": 0, "host_cell": cell, "vcpus": [0, 1, 2, 3], "memory_mb": 1024, "page_size_kb": None,
         "pinning": {}, "cpuset": [0, 1, 2, 3]} for cell in (0, 1)]}}]
    guest = request(vcpus=2, policy="shared", page="small")
    assert fit(topology(), others, guest, cpu_allocation_ratio=1.5)[0] is not None
    assignment, reason = fit(topology(), others, guest, cpu_allocation_ratio=1.0)
    assert assignment is None
    assert reason == "no NUMA cell with room for 2 shared vCPUs: cell 0 has 4 of 4 x 1, cell 1 has 4 of 4 x 1"


def test_the_usage_counts_every_assignment_once():
    assignments = [pinned(0, {0: 0, 1: 1}, memory_mb=1024, page_size_kb=HUGE_2M),
                   pinned(0, {0: 2}, memory_mb=256, emulator_cpus=[3], emulator_isolated=True), None, {}]
    cell = numa_cells(topology(), assignments)[0]
    assert cell.free_dedicated_cpus == []
    assert cell.memory_used_mb == 1280
    assert cell.pages_used == {HUGE_2M: 512, SMALL: 65536}
    assert cell.to_dict()["free_pages"] == {SMALL: 1048576 - 65536, HUGE_2M: 512}


def test_facts_or_assignments_that_do_not_read_put_only_this_host_out():
    assert fit({"cells": [{"id": "x"}]}, [], request()) == (
        None, "numa_topology does not read as NUMA cells: ValueError(\"invalid literal for int() with base 10: 'x'\")")
    assert fit({"cells": [{"id": 0}, {"id": 0}]}, [], request())[1] == "numa_topology names a cell id twice"
    assignment, reason = fit(topology(), [{}, {"numa": {"cells": [{"host_cell": 0, "pinning": {"0": "four"}}]}}],
                             request())
    assert assignment is None and reason.startswith("assignments[1] does not read as an assignment")


def test_the_search_over_host_cells_is_bounded(monkeypatch):
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler import numa

    monkeypatch.setattr(numa, "PERMUTATIONS_TRIED_MAX", 500)
    calls = []

    def no_devices(host_cells):
        calls.append(host_cells)
        return None, "no device"

    guest = request(vcpus=6, cells=[((n,), 256) for n in range(6)])
    assignment, reason = fit(topology(cells=12, cpus=2), [], guest, devices=no_devices)
    assert assignment is None and reason == "no device"
    assert calls[:2] == [(0, 1, 2, 3, 4, 5), (0, 1, 2, 3, 4, 6)] and len(calls) < 500
    # Guest cells that each fit somewhere but never all together, on a host of many cells.
    many = topology(cells=12, cpus=1)
    guest = request(vcpus=7, cells=[((n,), 256) for n in range(7)])
    busy = [pinned(cell, {0: cell}) for cell in range(6, 12)]
    assignment, reason = fit(many, busy, guest)
    assert assignment is None
    assert reason == "gave up after 500 steps of putting 7 guest cells onto 12 host cells"


def one_cell(siblings: list[tuple[int, ...]], pinned_cpus: set[int]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One cell with these thread sibling sets, and one other instance pinned to ``pinned_cpus``."""
    cpus = sorted(cpu for core in siblings for cpu in core)
    cell = {"id": 0, "memory_mb": 8192, "cpus": cpus, "pages": [{"size_kb": SMALL, "total": 2097152, "free": None}],
            "cpu_topology": [{"id": cpu, "socket_id": 0, "die_id": 0, "core_id": index, "siblings": list(core)}
                             for index, core in enumerate(siblings) for cpu in core]}
    busy = [pinned(0, dict(enumerate(sorted(pinned_cpus))))] if pinned_cpus else []
    return {"cells": [cell], "cpu_dedicated_set": None, "cpu_shared_set": None}, busy


SPREAD = [(0, 4), (1, 5), (2, 6), (3, 7)]
PAIRS = [(0, 1), (2, 3), (4, 5), (6, 7)]


@pytest.mark.parametrize("siblings, pinned_cpus, vcpus, policy, expected", [
    (SPREAD, {0, 1, 2}, 4, "require", None),
    ([(0, 1), (2, 3)], set(), 4, "require", [0, 1, 2, 3]),
    (SPREAD, {0, 1}, 4, "require", [2, 6, 3, 7]),
    (PAIRS, set(), 5, None, [0, 1, 2, 3, 4]),
    ([(0, 1, 2, 3), (4, 5, 6, 7)], set(), 6, None, [0, 1, 2, 3, 4, 5]),
    (PAIRS, {0, 2, 5}, 3, None, [1, 3, 4]),
    (PAIRS, {0, 1, 2, 5}, 4, None, [3, 4, 6, 7]),
    (PAIRS, {0, 2, 5, 6}, 4, None, [1, 3, 4, 7]),
    ([(0,), (1,), (2,), (3,)], {1}, 3, "isolate", [0, 2, 3]),
], ids=["require-too-few-siblings", "require-fits", "require-fits-with-usage", "odd-fit", "optimize-threads",
        "odd-fit-with-usage", "mixed-siblings", "orphans-only", "isolate-no-smt-with-usage"])
def test_novas_packing_cases(siblings, pinned_cpus, vcpus, policy, expected):
    """Cases of Nova's test_hardware (CPUPinningCellTestCase, test_get_pinning_*), with the CPUs
    Berth picks where Nova only checks that the cell was pinned."""
    host, busy = one_cell(siblings, pinned_cpus)
    assignment, reason = fit(host, busy, request(vcpus=vcpus, thread=policy))
    if expected is None:
        assert assignment is None, assignment
    else:
        assert reason is None
        assert list(cell_of(assignment)["pinning"].values()) == expected


def cpu_topology(siblings_of: dict[int, list[Any]]) -> dict[str, Any]:
    """One cell whose CPUs report these sibling lists (each thread its own list)."""
    cell = {"id": 0, "memory_mb": 8192, "cpus": sorted(siblings_of),
            "pages": [{"size_kb": SMALL, "total": 2097152, "free": None}],
            "cpu_topology": [{"id": cpu, "socket_id": 0, "die_id": 0, "core_id": 0, "siblings": siblings}
                             for cpu, siblings in siblings_of.items()]}
    return {"cells": [cell], "cpu_dedicated_set": None, "cpu_shared_set": None}


@pytest.mark.parametrize("siblings_of, dedicated, shared, expected", [
    ({0: [0, 1], 1: [0, 1], 2: [2, 3], 3: [2, 3]}, None, None, [[0, 1], [2, 3]]),
    # Cut to the CPUs instances may use; a CPU of neither set names no core.
    ({0: [0, 1], 1: [0, 1], 2: [2, 3], 3: [2, 3]}, [1, 2, 3], None, [[1], [2, 3]]),
    ({0: [0, 1], 1: [0, 1], 2: [2, 3], 3: [2, 3]}, [2], [3], [[2, 3]]),
    # Threads whose lists disagree: each list a thread reports is a core of its own.
    ({0: [0, 1], 1: [1, 2], 2: [1, 2]}, None, None, [[0, 1], [1, 2]]),
    # A CPU without a list is its own core; none listed at all: every usable CPU is.
    ({0: [0, 1], 1: [], 2: None}, None, None, [[0, 1], [1], [2]]),
], ids=["pairs", "cut-to-dedicated", "cut-to-both-sets", "lists-disagree", "missing-lists"])
def test_thread_siblings_are_read_per_distinct_list_and_cut_to_the_usable_cpus(siblings_of, dedicated, shared,
                                                                               expected):
    host = {**cpu_topology(siblings_of), "cpu_dedicated_set": dedicated, "cpu_shared_set": shared}
    assert numa_cells(host, [])[0].siblings == expected


def test_a_fit_on_the_cells_libvirts_test_driver_presents():
    """libvirt's test driver: two cells of 8 CPUs without SMT, small pages only (4 KiB on cell 0,
    8 KiB on cell 1) and no huge pages; its topology read as the tracker sync reads it."""
    from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor

    with Hypervisor("hv1", "test:///default") as hypervisor:
        topology_read = {**hypervisor.facts("default-pool")["numa_topology"],
                         "cpu_dedicated_set": list(range(2, 8)) + list(range(10, 16)), "cpu_shared_set": [0, 1, 8, 9]}
    guest = request(vcpus=8, memory_mb=2048, cells=[(tuple(range(4)), 1024), (tuple(range(4, 8)), 1024)])
    assignment = fit(topology_read, [], guest)[0]
    assert [(cell["host_cell"], list(cell["pinning"].values()), cell["page_size_kb"])
            for cell in assignment["numa"]["cells"]] == [(0, [2, 3, 4, 5], None), (1, [10, 11, 12, 13], None)]
    assert fit(topology_read, [assignment], guest)[1] == (
        "guest cell 0: no NUMA cell with 4 free dedicated CPUs: cell 0 has 2, cell 1 has 2")
    assert fit(topology_read, [], request(vcpus=2, memory_mb=1024, page=HUGE_2M))[1] == (
        "no NUMA cell with 512 free 2048 KiB pages: cell 0 has 0, cell 1 has 0")
    assert fit(topology_read, [], request(vcpus=2, memory_mb=1024, thread="require"))[1] == (
        "no NUMA cell with SMT siblings (hw:cpu_thread_policy=require): cell 0 has one thread per core, "
        "cell 1 has one thread per core")


def test_large_pages_say_what_was_short_of_the_sizes_the_memory_divides_into():
    pages = ((SMALL, 1048576), (HUGE_2M, 100), (HUGE_1G, 4))
    assignment, reason = fit(topology(cells=1, pages=pages), [], request(memory_mb=512, page="large"))
    assert reason == "no NUMA cell with 256 free 2048 KiB pages: cell 0 has 100"


def test_a_mixed_guest_whose_first_cell_is_all_shared_still_gets_its_emulator_cpu():
    guest = request(vcpus=4, policy="mixed", dedicated_vcpus={2, 3}, emulator="isolate",
                    cells=[((0, 1), 512), ((2, 3), 512)])
    assignment = fit(topology(), [], guest)[0]
    cells = assignment["numa"]["cells"]
    assert (cells[0]["pinning"], cells[0]["cpuset"], cells[1]["pinning"]) == ({}, [0, 1, 2, 3], {"2": 4, "3": 5})
    assert (assignment["numa"]["emulator_cpus"], assignment["numa"]["emulator_isolated"]) == ([0], True)


def test_a_fit_leaves_nothing_for_the_cyclic_garbage_collector():
    """The scheduler fits every host of a fleet with the collector off (_fleet.without_gc):
    a reference cycle per fit would keep each host's cells until the run ends."""
    guest = request(vcpus=2, cells=[((0,), 512), ((1,), 512)])
    gc.collect()
    gc.disable()
    try:
        assert fit(topology(), [], guest)[0] is not None
        assert fit(topology(), [pinned(0, {0: 0, 1: 1, 2: 2, 3: 3})], guest)[0] is None
        assert fit(topology(), [], request(), devices=lambda cells: (None, "no device"))[0] is None
        assert gc.collect() == 0
    finally:
        gc.enable()
