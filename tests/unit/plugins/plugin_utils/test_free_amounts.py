"""The free RAM and disk of a host come out the same from the hypervisor's account, in Python
(host_facts.host_state), and from the ledger's row, in SQL (host_states.USAGE_COLUMNS): both
are built from scheduler.free_amounts, and this holds them to it on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select

from ansible_collections.berth.fleet.plugins.module_utils.host_facts import host_state
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.free_amounts import FREE_AMOUNTS
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.host_states import USAGE_COLUMNS
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import hypervisors


def facts(total_ram_mb, pool_capacity_mb, domains):
    return {
        "nodename": "node", "uuid": "", "uri_uuid": "derived", "vcpus_total": 8,
        "hypervisor_type": "QEMU", "hypervisor_version": 7002000, "libvirt_version": 9000000,
        "cpu_info": {}, "numa_topology": {"cells": []}, "supported_instances": [],
        "memory": {"total_mb": total_ram_mb, "free_mb": 1, "buffers_mb": 1, "cached_mb": 1},
        "memory_source": "libvirt", "metrics": {}, "storage_pool": "default",
        "pools": [{"name": "default", "active": True, "capacity_mb": pool_capacity_mb,
                   "allocation_mb": 0, "available_mb": 0}],
        "domains": [{"name": name, "uuid": name, "state": "running", "vcpus": 1, "memory_mb": memory_mb,
                     "disks": [{"path": f"/p/{name}", "capacity_mb": disk_mb, "pool": "default"}],
                     "berth": None}
                    for name, memory_mb, disk_mb in domains],
    }


# (name, node memory MiB, pool capacity MiB, settings, domains as (name, memory MiB, disk MiB))
HOSTS = [
    ("idle", 16384, 100 * 1024, {}, []),
    ("busy", 65536, 2048 * 1024 + 700, {"reserved_host_memory_mb": 2048, "reserved_host_disk_mb": 4096},
     [("a", 4096, 20480), ("b", 8192, 40960)]),
    # Overcommitted past its memory: the free amount goes negative on both sides.
    ("over", 4096, 10 * 1024, {"reserved_host_memory_mb": 512}, [("c", 4096, 10240), ("d", 1024, 0)]),
]


@pytest.mark.parametrize("name, total_ram_mb, pool_capacity_mb, settings, domains", HOSTS,
                         ids=[host[0] for host in HOSTS])
def test_python_and_sql_free_amounts_agree(ledger, name, total_ram_mb, pool_capacity_mb, settings,
                                           domains):
    state = host_state(name, facts(total_ram_mb, pool_capacity_mb, domains), settings)
    assert state["service_up"]
    row = {
        "uuid": f"00000000-0000-0000-0000-{len(name):012d}", "name": name, "nodename": name,
        "synced_at": dt.datetime(2026, 1, 1),
        "total_usable_ram_mb": state["total_usable_ram_mb"],
        "reserved_host_memory_mb": state["reserved_host_memory_mb"],
        "memory_mb_used": sum(memory_mb for _name, memory_mb, _disk_mb in domains),
        "total_usable_disk_gb": state["total_usable_disk_gb"],
        "reserved_host_disk_mb": state["reserved_host_disk_mb"],
        "disk_mb_used": sum(disk_mb for _name, _memory_mb, disk_mb in domains),
    }
    with ledger.engine.begin() as db:
        db.execute(hypervisors.insert().values(**row))
        fields = [amount.field for amount in FREE_AMOUNTS]
        stored = db.execute(select(*(USAGE_COLUMNS[field].label(field) for field in fields))
                            .where(hypervisors.c.uuid == row["uuid"])).one()._mapping
    assert {field: stored[field] for field in fields} == {field: state[field] for field in fields}
