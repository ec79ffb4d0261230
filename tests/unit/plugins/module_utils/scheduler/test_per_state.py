"""assignment.per_state: one call per distinct host state, each host its own answer."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ansible_collections.berth.fleet.plugins.module_utils.scheduler import numa, pci
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import fit_facts, of_spec, per_state
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters import pci_passthrough
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.numa_topology import NUMATopologyFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.pci_passthrough import (
    PciPassthroughFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec


def test_hosts_sharing_facts_and_assignments_share_one_call_and_the_others_get_their_own():
    small, large = {"cells": [{"id": 0}]}, {"cells": [{"id": 0}, {"id": 1}]}
    pinned = {"numa": {"cells": [{"host_cell": 0, "pinning": {"0": 2}}]}}
    same_text_other_object = {"cells": [{"id": 0}]}  # equal, but not the ledger's shared value
    hosts = [  # (assignments, topology, cpu_allocation_ratio)
        ([], small, 4.0), ([], small, 4.0), ([pinned], small, 4.0), ([pinned], small, 4.0),
        ([], large, 4.0), ([], small, 16.0), ([], same_text_other_object, 4.0), ([pinned, pinned], small, 4.0)]
    calls = []

    def answer(held, topology, ratio):
        calls.append((len(held), id(topology), ratio))
        return (len(held), len(topology["cells"]), ratio)

    answers = per_state(answer, [held for held, _topology, _ratio in hosts], [[topology for _held, topology, _ratio in hosts]],
                        [[ratio for _held, _topology, ratio in hosts]])
    assert answers == [(len(held), len(topology["cells"]), ratio) for held, topology, ratio in hosts]
    # Hosts 0-1 and 2-3 share a state; the ratio is compared by value, the rest by identity.
    assert len(calls) == 6


def test_hosts_pinning_different_cpus_share_their_topology_reading_and_device_fits(monkeypatch):
    """The engine's worst case: every host holds different pinned CPUs (no two share a state).
    NUMATopologyFilter still reads the shared topology into cells once and fits the devices once
    per host cell, PciPassthroughFilter once: the CPU-only assignments do not touch devices. The
    answers are the per-host filter's."""
    cells = [{"id": cell, "memory_mb": 4096, "cpus": list(range(cell * 4, cell * 4 + 4)),
              "cpu_topology": [{"id": cpu, "siblings": [cpu]} for cpu in range(cell * 4, cell * 4 + 4)],
              "pages": [{"size_kb": 4, "total": 4096 * 256}]} for cell in range(2)]
    topology = {"cells": cells, "cpu_dedicated_set": list(range(8)), "cpu_shared_set": None}
    devices = [{"name": f"vf{cell}", "address": f"0000:3b:02.{cell}", "vendor_id": "8086", "product_id": "154c",
                "numa_node": cell, "dev_type": "type-VF", "mdev_types": []} for cell in range(2)]

    def pinned(cpu):
        return {"numa": {"cpu_policy": "dedicated", "cells": [{"id": 0, "host_cell": cpu // 4, "vcpus": [0],
                                                               "memory_mb": 0, "page_size_kb": None,
                                                               "pinning": {"0": cpu}}]}}

    # Every host pins a CPU of its own; one in five a second one on the other cell, which leaves
    # no cell with 4 free.
    held = [[pinned(number % 8)] + ([pinned((number + 4) % 8)] if number % 5 == 0 else []) for number in range(40)]
    spec = RequestSpec.from_dict({
        "flavor": {"name": "pinned", "vcpus": 4, "memory_mb": 1024, "root_gb": 1,
                   "extra_specs": {"hw:cpu_policy": "dedicated", "pci_passthrough:alias": "nic:1"}},
        "pci_alias": [{"name": "nic", "vendor_id": "8086", "product_id": "154c", "device_type": "type-VF"}]})
    calls = {"read_cells": 0, "fit": 0}
    for module, name in ((numa, "read_cells"), (pci, "fit"), (pci_passthrough, "fit")):
        def counted(*args, _real=getattr(module, name), _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)
        monkeypatch.setattr(module, name, counted)
    # The columns as the vectorised path gives them: every host the same topology and devices.
    columns = SimpleNamespace(numa_topology=[topology] * 40, pci_devices=[devices] * 40, assignments=held,
                              cpu_allocation_ratio=np.full(40, 4.0), ram_allocation_ratio=np.full(40, 1.0))
    [(_reason, _resource, _requested, numa_rejected, _free)] = NUMATopologyFilter().vector_rejects(columns, spec)
    assert calls == {"read_cells": 1, "fit": 2}
    [(_missing, *_rest), (_in_use, _resource, _requested, pci_rejected, _free)] = \
        PciPassthroughFilter().vector_rejects(columns, spec)
    assert calls == {"read_cells": 1, "fit": 3}
    # The same answers as host by host: a host whose pinned CPU leaves its cell 3 free CPUs for 4
    # vCPUs has the other cell (and its VF) left, unless it pinned one there too.
    per_host = [fit_facts(assignments, topology, devices, of_spec(spec), 4.0, 1.0)[0] is None for assignments in held]
    assert numa_rejected.tolist() == per_host == [number % 5 == 0 for number in range(40)]
    assert not pci_rejected.any()
