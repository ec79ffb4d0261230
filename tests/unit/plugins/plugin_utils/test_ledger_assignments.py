"""Claims take exact host resources (issue 24): the claim transaction fits the request's NUMA
cells, dedicated CPUs, huge pages and devices again under the hypervisor's lock and records the
assignment; concurrent claims never share a CPU or a device; moves fit anew; deletes give back.
On SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import threading

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import exact_request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ClaimConflict, Ledger

ALIASES = [{"name": "vf", "vendor_id": "8086", "product_id": "154c", "device_type": "type-VF",
            "numa_policy": "required"}]
PINNED = Flavor(name="pinned", vcpus=2, memory_mb=512, root_gb=1,
                extra_specs={"hw:cpu_policy": "dedicated", "hw:mem_page_size": "2MB"})
WITH_VF = Flavor(name="pinned.vf", vcpus=1, memory_mb=256, root_gb=1,
                 extra_specs={"hw:cpu_policy": "dedicated", "pci_passthrough:alias": "vf:1"})


def cell(cell_id: int, cpus: list[int]) -> dict:
    return {"id": cell_id, "memory_mb": 4096, "cpus": cpus,
            "cpu_topology": [{"id": cpu, "socket_id": cell_id, "die_id": 0, "core_id": cpu, "siblings": [cpu]}
                             for cpu in cpus],
            "pages": [{"size_kb": 4, "total": 524288, "free": None}, {"size_kb": 2048, "total": 512, "free": 512}]}


def numa_host(name: str, uuid: str, dedicated: list[int]) -> dict:
    """Two cells of four CPUs (0-3, 4-7), ``dedicated`` of them for pinning, 1 GiB of 2 MiB pages
    per cell, one VF on cell 1."""
    return {
        "host": name, "nodename": name, "uuid": uuid, "service_up": True, "disabled": False,
        "vcpus_total": 8, "vcpus_used": 0, "total_usable_ram_mb": 8192, "free_ram_mb": 7680,
        "total_usable_disk_gb": 100, "free_disk_mb": 100 * 1024, "num_instances": 0, "num_io_ops": 0,
        "cpu_allocation_ratio": 4.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
        "reserved_host_memory_mb": 512, "reserved_host_disk_mb": 0, "domains": [],
        "numa_topology": {"cells": [cell(0, [0, 1, 2, 3]), cell(1, [4, 5, 6, 7])],
                          "cpu_dedicated_set": dedicated, "cpu_shared_set": [0]},
        "pci_devices": [{"name": "pci_0000_81_02_0", "address": "0000:81:02.0", "vendor_id": "8086",
                         "product_id": "154c", "numa_node": 1, "dev_type": "type-VF", "mdev_types": [],
                         "parent_address": "0000:81:00.0"}],
    }


def placement(name: str, state: dict) -> dict:
    return {"name": name, "host": state["host"], "hypervisor_uuid": state["uuid"]}


def pinned_cpus(ledger: Ledger) -> list[int]:
    return sorted(cpu for claim in ledger.claims() if claim["assignment"]
                  for guest_cell in claim["assignment"]["numa"]["cells"] for cpu in guest_cell["pinning"].values())


def test_a_claim_records_the_cpus_and_pages_it_took_and_the_next_claim_takes_others(ledger):
    hv = numa_host("hv1", "hv-1", [1, 2, 3, 5, 6, 7])
    ledger.sync_hypervisors([hv])
    exact = exact_request(PINNED, {})
    [first] = ledger.claim([placement("db-1", hv)], PINNED, "test", exact=exact)
    [second] = ledger.claim([placement("db-2", hv)], PINNED, "test", exact=exact)
    cells = [row["assignment"]["numa"]["cells"] for row in (first, second)]
    assert all(len(guest) == 1 and guest[0]["page_size_kb"] == 2048 and guest[0]["memory_mb"] == 512
               for guest in cells)
    # Four distinct dedicated CPUs, none of them the shared CPU 0.
    assert len(set(pinned_cpus(ledger))) == 4 and 0 not in pinned_cpus(ledger)
    # The scheduler reads them back as the host's assignments.
    table, _generations = ledger.host_table(fields={"assignments", "numa_topology"})
    assert [len(state.assignments) for state in table] == [2]
    # Two dedicated CPUs are left, one per cell: a guest cell of two fits in neither, and the
    # refusal says which cell was short of what; nothing is written.
    with pytest.raises(ClaimConflict, match="no NUMA cell with 2 free dedicated CPUs: cell 0 has 1, cell 1 has 1"):
        ledger.claim([placement("db-3", hv)], PINNED, "test", exact=exact)
    assert [row["name"] for row in ledger.instances()] == ["db-1", "db-2"]
    # A delete gives its CPUs back.
    ledger.delete_instance(first["uuid"])
    [again] = ledger.claim([placement("db-3", hv)], PINNED, "test", exact=exact)
    assert sorted(again["assignment"]["numa"]["cells"][0]["pinning"].values()) == sorted(
        first["assignment"]["numa"]["cells"][0]["pinning"].values())


def test_one_request_of_two_pinned_instances_takes_distinct_cpus_in_one_transaction(ledger):
    hv = numa_host("hv1", "hv-1", [2, 3, 6, 7])
    ledger.sync_hypervisors([hv])
    rows = ledger.claim([placement("pair-1", hv), placement("pair-2", hv)], PINNED, "test",
                        exact=exact_request(PINNED, {}))
    assert sorted(pinned_cpus(ledger)) == [2, 3, 6, 7] and len(rows) == 2
    with pytest.raises(ClaimConflict):
        ledger.claim([placement("pair-3", hv)], PINNED, "test", exact=exact_request(PINNED, {}))


def test_a_device_goes_with_the_cell_it_is_on_and_to_one_instance_only(ledger):
    hv = numa_host("hv1", "hv-1", [1, 2, 3, 5, 6, 7])
    ledger.sync_hypervisors([hv])
    exact = exact_request(WITH_VF, {}, ALIASES)
    [row] = ledger.claim([placement("nfv-1", hv)], WITH_VF, "test", exact=exact)
    assignment = row["assignment"]
    # The VF is on cell 1 and its policy is required: the guest cell went there too.
    assert assignment["pci"][0]["address"] == "0000:81:02.0"
    assert assignment["numa"]["cells"][0]["host_cell"] == 1
    with pytest.raises(ClaimConflict, match="vf"):
        ledger.claim([placement("nfv-2", hv)], WITH_VF, "test", exact=exact)


def test_a_move_fits_anew_on_the_destination_and_a_full_one_is_refused(ledger):
    source, destination = numa_host("hv1", "hv-1", [1, 2, 3]), numa_host("hv2", "hv-2", [5, 6])
    ledger.sync_hypervisors([source, destination])
    exact = exact_request(PINNED, {})
    [row] = ledger.claim([placement("db-1", source)], PINNED, "test", exact=exact)
    ledger.mark_active(row["uuid"])
    claim = ledger.claim_move(row["uuid"], "hv-2", "test", exact=exact)
    assert sorted(claim["assignment"]["numa"]["cells"][0]["pinning"].values()) == [5, 6]
    ledger.release_claim(claim["id"])
    # hv2 has its two dedicated CPUs taken by another instance: the move's claim is refused.
    ledger.claim([placement("db-2", destination)], PINNED, "test", exact=exact)
    with pytest.raises(ClaimConflict, match="dedicated CPUs"):
        ledger.claim_move(row["uuid"], "hv-2", "test", exact=exact)
    # A resize on its own host is refused, naming the flavor, rather than holding both sizes' CPUs.
    with pytest.raises(InputError) as refused:
        ledger.resize_claim(row["uuid"], PINNED, "test", exact=exact)
    assert refused.value.field == "flavor"


def test_an_alternate_without_the_request_is_refused_for_an_instance_that_holds_cpus(ledger):
    first, alternate = numa_host("hv1", "hv-1", [1, 2]), numa_host("hv2", "hv-2", [5, 6])
    ledger.sync_hypervisors([first, alternate])
    [row] = ledger.claim([placement("db-1", first)], PINNED, "test", exact=exact_request(PINNED, {}))
    with pytest.raises(ClaimConflict, match="not given their request"):
        ledger.claim_alternate(row["uuid"], "hv2", "hv-2", "test")
    moved = ledger.claim_alternate(row["uuid"], "hv2", "hv-2", "test", exact=exact_request(PINNED, {}))
    assert sorted(moved["assignment"]["numa"]["cells"][0]["pinning"].values()) == [5, 6]
    assert [claim["host"] for claim in ledger.claims()] == ["hv2"]


def test_concurrent_claims_never_pin_one_cpu_twice(ledger, ledger_url):
    """Eight claimers, each with its own connection, race for four dedicated CPUs."""
    hv = numa_host("hv1", "hv-1", [1, 2, 5, 6])
    ledger.sync_hypervisors([hv])
    one = Flavor(name="one", vcpus=1, memory_mb=256, root_gb=1, extra_specs={"hw:cpu_policy": "dedicated"})
    exact = exact_request(one, {})
    start, outcomes = threading.Barrier(8), []

    def claimer(number: int) -> None:
        mine = Ledger(ledger_url).open()
        try:
            start.wait()
            for _attempt in range(20):  # as the schedule decides again after a lost race
                try:
                    mine.claim([placement(f"race-{number}", hv)], one, f"claimer-{number}", exact=exact)
                    outcomes.append("claimed")
                    return
                except ClaimConflict as conflict:
                    if "dedicated CPUs" in str(conflict):
                        outcomes.append("full")
                        return
        finally:
            mine.close()

    threads = [threading.Thread(target=claimer, args=(number,)) for number in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["claimed"] * 4 + ["full"] * 4
    assert sorted(pinned_cpus(ledger)) == [1, 2, 5, 6]
