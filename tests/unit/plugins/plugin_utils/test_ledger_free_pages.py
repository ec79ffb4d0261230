"""The ledger keeps a hypervisor's NUMA topology without its pages' free counts (which differ
from host to host and from sync to sync) and those counts in their own column
(hypervisor_facts.free_pages): hosts of the same hardware store the same topology text, and the
scheduler's read gives them one parsed topology. On SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import pytest
from sqlalchemy import Text, cast, select

from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import hypervisor_facts, hypervisors


def numa_host(name: str, uuid: str, free_2mb: tuple[int, int]) -> dict:
    """Two cells of two CPUs with 512 pages of 2 MiB each, ``free_2mb`` of them free per cell
    (libvirt counts none of the 4 KiB pages here: null, as on its test driver)."""
    cells = [{"id": cell_id, "memory_mb": 4096, "cpus": [2 * cell_id, 2 * cell_id + 1],
              "cpu_topology": [{"id": cpu, "socket_id": cell_id, "die_id": 0, "core_id": cpu, "siblings": [cpu]}
                               for cpu in (2 * cell_id, 2 * cell_id + 1)],
              "pages": [{"size_kb": 4, "total": 786432, "free": None},
                        {"size_kb": 2048, "total": 512, "free": free_2mb[cell_id]}]}
             for cell_id in (0, 1)]
    return {
        "host": name, "nodename": name, "uuid": uuid, "service_up": True, "disabled": False,
        "vcpus_total": 4, "vcpus_used": 0, "total_usable_ram_mb": 8192, "free_ram_mb": 7680,
        "total_usable_disk_gb": 100, "free_disk_mb": 100 * 1024, "num_instances": 0, "num_io_ops": 0,
        "cpu_allocation_ratio": 4.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
        "reserved_host_memory_mb": 512, "reserved_host_disk_mb": 0, "domains": [],
        "numa_topology": {"cells": cells, "cpu_dedicated_set": [1, 3], "cpu_shared_set": [0, 2],
                          "reserved_pages": {"0": {"2048": 64}}},
    }


def stored(ledger) -> dict[str, tuple[str, dict | None]]:
    """Per host, its numa_topology as the ledger's text and its free_pages."""
    with ledger.engine.connect() as db:
        return {name: (text, free) for name, text, free in db.execute(
            select(hypervisors.c.name, cast(hypervisor_facts.c.numa_topology, Text), hypervisor_facts.c.free_pages)
            .join(hypervisor_facts, hypervisor_facts.c.hypervisor_uuid == hypervisors.c.uuid))}


def test_hosts_of_the_same_hardware_store_one_topology_text_and_their_own_free_counts(ledger):
    ledger.sync_hypervisors([numa_host("hv1", "hv-1", (500, 512)), numa_host("hv2", "hv-2", (12, 0))])
    rows = stored(ledger)
    assert rows["hv1"][0] == rows["hv2"][0]
    assert '"free"' not in rows["hv1"][0]
    # Per cell, per page size, as text keys; the 4 KiB pages libvirt did not count are left out.
    assert rows["hv1"][1] == {"0": {"2048": 500}, "1": {"2048": 512}}
    assert rows["hv2"][1] == {"0": {"2048": 12}, "1": {"2048": 0}}
    # The scheduler's read parses the one text once: both hosts hold the same topology object,
    # the operator's settings in it, no free counts.
    table, _generations = ledger.host_table(fields={"numa_topology"})
    first, second = table[0].numa_topology, table[1].numa_topology
    assert first is second
    assert first["cells"][0]["pages"] == [{"size_kb": 4, "total": 786432}, {"size_kb": 2048, "total": 512}]
    assert (first["cpu_dedicated_set"], first["reserved_pages"]) == ([1, 3], {"0": {"2048": 64}})


def test_a_sync_where_only_free_counts_moved_writes_them_and_leaves_the_topology(ledger, writes_of):
    ledger.sync_hypervisors([numa_host("hv1", "hv-1", (500, 512)), numa_host("hv2", "hv-2", (12, 0))])
    before = stored(ledger)
    written = writes_of(ledger)
    [one, two] = ledger.sync_hypervisors([numa_host("hv1", "hv-1", (400, 512)), numa_host("hv2", "hv-2", (12, 0))])
    assert not one["changed"] and not two["changed"]
    facts = [sql for sql in written if "hypervisor_facts" in sql]
    assert len(facts) == 1 and facts[0].startswith("UPDATE hypervisor_facts SET free_pages="), written
    assert not any("numa_topology" in sql for sql in written), written
    after = stored(ledger)
    assert after["hv1"] == (before["hv1"][0], {"0": {"2048": 400}, "1": {"2048": 512}})
    assert after["hv2"] == before["hv2"]


@pytest.mark.parametrize("topology", [
    {},
    {"cells": []},
    {"cells": [{"id": 0, "memory_mb": 1024, "cpus": [0], "pages": [{"size_kb": 4, "total": 262144, "free": None}]}]},
], ids=["no-topology", "no-cells", "no-counts"])
def test_a_host_whose_libvirt_counted_no_free_pages_has_none_recorded(ledger, topology):
    ledger.sync_hypervisors([{**numa_host("hv1", "hv-1", (0, 0)), "numa_topology": topology}])
    text, free = stored(ledger)["hv1"]
    assert free is None and '"free"' not in text
