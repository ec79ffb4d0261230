"""The vectorised path decides, explains and ranks exactly as the plain path does."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from ansible_collections.berth.fleet.plugins.module_utils.scheduler import vector
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import (
    FILTERS,
    WEIGHERS,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec

from .scenarios import random_fleet, random_request

SCENARIOS = 2400
BLOCKS = 12


def as_read(values):
    """A column as the ledger's read holds it: a NumPy array where every value is an int, or
    every one a float, or every one a boolean; else the list."""
    for kind, dtype in ((int, np.int64), (float, np.float64), (bool, np.bool_)):
        # The exact type: a bool is an int to isinstance, and a column of them is not a column of ints.
        if values and all(type(value) is kind for value in values):  # pylint: disable=unidiomatic-typecheck
            return np.array(values, dtype=dtype)
    return values


def decide(fleet, request, engine, columns=False, arrays=False):
    """The decision on HostStates, or (``columns``) on a HostTable of columns, as the ledger
    gives a fleet (with ``arrays``, its numbers as arrays); an error the engine raises
    mid-decision (MetricsWeigher with metrics_required) is an answer too, which both paths
    must give alike."""
    if columns:
        table = {key: [host[key] for host in fleet] for key in fleet[0]}
        hosts = HostTable({key: as_read(values) for key, values in table.items()} if arrays else table)
    else:
        hosts = [HostState.from_dict(host) for host in fleet]
    try:
        decision = schedule(hosts, RequestSpec.from_dict({**request, "engine": engine}))
    except SchedulerInputError as error:
        return {"error": type(error).__name__, "field": error.field, "message": str(error)}
    data = decision.to_dict()
    assert data.pop("engine") == engine
    return data


def scenario(number):
    """Scenario ``number``: its fleet and request, the same on every run."""
    rng = random.Random(number)
    fleet = random_fleet(rng, rng.choice([1, 2, 3, 5, 8, 20, 40]))
    return fleet, random_request(rng, sorted({host["host"] for host in fleet}))


@pytest.mark.parametrize("block", range(BLOCKS))
def test_vectorized_and_plain_paths_agree_on_random_scenarios(block):
    per_block = SCENARIOS // BLOCKS
    outcomes = {"ok": 0, "failed": 0, "error": 0}
    filters, weighers = set(), set()
    for number in range(block * per_block, (block + 1) * per_block):
        fleet, request = scenario(number)
        plain = decide(fleet, request, "plain")
        vectorized = decide(fleet, request, "vectorized", columns=number % 3 != 0, arrays=number % 3 == 2)
        assert vectorized == plain, f"scenario {number} differs"
        outcomes["error" if "error" in plain else "ok" if plain["ok"] else "failed"] += 1
        filters.update(request["enabled_filters"])
        weighers.update(request["weighers"])
    # The generator must exercise every outcome, filter and weigher, or the comparison proves
    # little.
    assert outcomes["ok"] > per_block // 10 and outcomes["failed"] > per_block // 10
    assert outcomes["error"] > 0
    assert filters == set(FILTERS) and weighers == set(WEIGHERS)


def shared_as_the_ledger_reads(fleet):
    """``fleet`` twice over (each host and a twin in the same state), its facts and assignments
    shared as the ledger's read shares them: one parsed object per distinct JSON text."""
    parsed = {}

    def shared(value):
        return parsed.setdefault(json.dumps(value, sort_keys=True), value)

    twins = [{**host, "host": f"{host['host']}-twin", "nodename": f"{host['nodename']}-twin",
              "uuid": f"{host['uuid']}-twin"} for host in fleet]
    columns = {key: [] for key in fleet[0]}
    for host in fleet + twins:
        for key, value in host.items():
            if key in ("numa_topology", "pci_devices"):
                value = shared(value)
            elif key == "assignments":
                value = [shared(item) for item in value]
            columns[key].append(value)
    return HostTable(columns), [HostState.from_dict(host) for host in fleet + twins]


def test_exact_fits_once_per_shared_state_decide_as_per_host():
    """NUMATopologyFilter, PciPassthroughFilter and PCIWeigher fit once per distinct host state
    on the vectorised path (assignment.per_state): on fleets whose hosts share facts and
    assignments as the ledger gives them, the decision is the plain path's, host by host."""
    compared = 0
    for number in range(SCENARIOS):
        fleet, request = scenario(number)
        extra_specs = request["flavor"].get("extra_specs") or {}
        if "hw:cpu_policy" not in extra_specs and "pci_alias" not in request:
            continue
        table, states = shared_as_the_ledger_reads(fleet)
        decisions = []
        for engine, hosts in (("plain", states), ("vectorized", table)):
            try:
                decisions.append(schedule(hosts, RequestSpec.from_dict({**request, "engine": engine, "explain": "full"}))
                                 .to_dict())
            except SchedulerInputError as error:
                decisions.append(str(error))
        plain, vectorized = decisions
        if isinstance(plain, dict):
            assert vectorized.pop("engine") == "vectorized" and plain.pop("engine") == "plain"
        assert vectorized == plain, f"scenario {number} differs"
        compared += 1
    assert compared > 200


# Filters that by design turn no host down, so no scenario can show them rejecting one.
NEVER_REJECTS = {"AllHostsFilter"}


def test_the_generator_makes_every_filter_reject_and_every_weigher_count():
    """Being enabled proves little: a filter whose inputs the generator never sets (a new hint,
    a new host fact) passes every host on both paths. Over the scenarios above, on the plain
    path, each filter of the registry must turn some host down and each weigher must add a
    non-zero part to some placement's weight, so a filter or weigher added to the registry
    without its inputs in scenarios.py fails here."""
    rejecting, counting = set(), set()
    for number in range(SCENARIOS):
        fleet, request = scenario(number)
        plain = decide(fleet, {**request, "explain": "full"}, "plain")
        if "error" in plain:
            continue
        rejecting.update(rejection["filter"] for rejection in plain["rejections"])
        counting.update(detail["name"] for placement in plain["placements"]
                        for detail in placement["weights"] if detail["weighted"] != 0)
    assert sorted(set(FILTERS) - NEVER_REJECTS - rejecting) == []
    assert sorted(set(WEIGHERS) - counting) == []


def test_request_constant_columns_match_the_per_host_rules():
    """The per-request arrays (filters' own host numbers, weighers' multipliers), built once
    with hosts sharing aggregate lookups, equal the plain per-host values bit for bit, on
    metadata values that compare equal but read differently (True, 1, "1", -0.0, 0.0), and
    on values only a float or only an int reads ("2.5", "bad")."""
    rng = random.Random(7)
    values = [True, 1, "1", 1.0, -0.0, 0.0, "0.5", "bad", 2, "nan", "2.5", "3"]
    keys = ["ram_allocation_ratio", "cpu_allocation_ratio", "disk_allocation_ratio",
            "max_io_ops_per_host", "max_instances_per_host", "ram_weight_multiplier",
            "cpu_weight_multiplier", "io_ops_weight_multiplier",
            "build_failure_weight_multiplier", "image_props_weight_multiplier"]
    # Every value of every key in an aggregate of its own, so that hosts whose metadata
    # compares equal but reads differently (True and 1) are common.
    aggregates = [{"name": f"{key}={value!r}", "metadata": {key: value}}
                  for key in keys for value in values]
    aggregates.append({"name": "mixed", "metadata": {key: rng.choice(values) for key in keys}})
    fleet = random_fleet(rng, 300)
    for host in fleet:
        host["aggregates"] = rng.sample(aggregates, rng.randint(0, 2))
    hosts = [HostState.from_dict(host) for host in fleet]
    spec = RequestSpec.from_dict({"flavor": {"name": "f", "vcpus": 1, "memory_mb": 512,
                                             "root_gb": 1},
                                  "max_io_ops_per_host": 3,
                                  "weight_multipliers": {"ram_weight_multiplier": 2.5}})
    filters = [FILTERS[name]() for name in sorted(FILTERS)]
    weighers = [WEIGHERS[name]() for name in sorted(WEIGHERS)]
    backend = vector.VectorBackend(HostTable.of(hosts), spec, filters, weighers)

    def same(array, expected):
        expected = np.array(expected, dtype=np.float64)
        assert array.tobytes() == expected.tobytes() or (
            np.array_equal(array, expected, equal_nan=True)
            and np.array_equal(np.signbit(array), np.signbit(expected)))

    checked = 0
    for host_filter in filters:
        for name in host_filter.host_numbers:
            same(backend.columns.per_filter[host_filter.name][name],
                 [host_filter.number(name, host, spec) for host in hosts])
            checked += 1
    assert checked >= 10
    for weigher, multipliers in zip(weighers, backend.multipliers):
        same(multipliers, [weigher.multiplier(host, spec) for host in hosts])
