"""The scheduler's read of the ledger (host_states.read_table) gives, on SQLite and PostgreSQL,
host by host, the values and types the read gave before its columns were built by kind (every
column a list of the driver's values, read from one row per host): on random fleets, by its
aggregate (the way of fleets the vectorised engine decides on), by its rows (smaller fleets,
without NumPy, or where an aggregate's text does not parse), and for ledgers holding what
another writer may leave (a separator in a name, text in a number's column).

The fleets here are small; ``large`` makes the read take them as it takes a fleet of
AUTO_VECTORIZED_HOSTS hypervisors and more."""

from __future__ import annotations

import datetime as dt
import math
import random

import numpy as np
import pytest
from sqlalchemy import text

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import SchedulerInputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import host_states
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.columns import (
    ColumnBuilder,
    constant_column,
    split_integers,
    split_texts,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.database import driver_execute

FACTS = {"hypervisor_type", "supported_instances", "cpu_info", "numa_topology",
         "pci_devices", "metrics", "host_ip"}
NOW = dt.datetime(2030, 1, 1)


def previous_read(db, now, fields=()):
    """The read as it was before (host_states.read_table at 6cbd0a5): every row at once, each
    column a list of the driver's values, converted in place."""
    wanted = [name for name in host_states.OPTIONAL_FACTS if name in set(fields)]
    cursor = driver_execute(db, host_states.host_query(db, now, wanted), cached=False)
    keys, rows = [column[0] for column in cursor.description], cursor.fetchall()
    columns = dict(zip(keys, zip(*rows))) if rows else {key: () for key in keys}
    generations = list(columns.pop("generation"))
    missing_since = columns.pop("missing_since")
    columns["service_up"] = list(map(bool, columns["service_up"]))
    columns["disabled"] = list(map(bool, columns["disabled"]))
    columns["down_reason"] = [host_states._explained(reason, when)
                              for reason, when in zip(columns["down_reason"], missing_since)]
    for name in host_states.JSON_FACTS:
        if name in host_states.DIGESTED_FACTS and name in columns:
            columns[name] = host_states._by_digest(db, name, columns["uuid"], columns[name])
        elif name in columns:
            columns[name] = host_states._parsed(columns[name])
    for name, empty in (("numa_topology", {}), ("pci_devices", [])):
        if name in columns:
            columns[name] = [empty if value is None else value for value in columns[name]]
    return HostTable({name: list(values) for name, values in columns.items()}), generations


def same(first, second):
    """Equal and of the same type, all the way down (floats bit for bit)."""
    if type(first) is not type(second):
        return False
    if isinstance(first, float):
        return first.hex() == second.hex() or (math.isnan(first) and math.isnan(second))
    if isinstance(first, (list, tuple)):
        return len(first) == len(second) and all(map(same, first, second))
    if isinstance(first, dict):
        return first.keys() == second.keys() and all(same(first[key], second[key]) for key in first)
    return first == second


@pytest.fixture
def large(monkeypatch):
    monkeypatch.setattr(host_states, "AUTO_VECTORIZED_HOSTS", 1)


def assert_same_read(ledger, fields=()):
    with ledger._read() as db:
        table, generations = host_states.read_table(db, NOW, fields)
        before, generations_before = previous_read(db, NOW, fields)
    assert same(generations, generations_before)
    assert len(table) == len(before)
    for name in sorted(set(before._columns) | {"host"}):
        assert same(list(table.column(name)), list(before.column(name))), name
        stored = table.stored(name)
        if isinstance(stored, np.ndarray):
            kind = host_states.COLUMN_KINDS[name]
            assert stored.dtype == {"int": np.int64, "float": np.float64, "flag": np.bool_}[kind], name
    assert sorted(table._columns) == sorted(before._columns)
    for position in range(len(table)):
        assert same(host_state(table, position), host_state(before, position)), position
    return table, before


def host_state(table, position):
    """The host's HostState as a dict, or the error that names what is wrong with it."""
    try:
        return table[position].to_dict()
    except SchedulerInputError as error:
        return str(error)


def random_state(rng, number):
    """A host state as gather.yml records it, with settings and facts drawn from small pools (as
    a fleet's hosts share them) or of its own."""
    name = f"hv{number:03d}"
    total_ram_mb = rng.choice([2048, 4096, 16384, 2 ** 20])
    cells = [{"id": cell, "memory_mb": total_ram_mb // 2, "cpus": [cell * 2, cell * 2 + 1]}
             for cell in range(rng.choice([1, 2]))]
    return {
        "host": name, "nodename": rng.choice([name, name, f"{name}.example"]), "uuid": f"uuid-{number:04d}",
        "service_up": True, "disabled": False, "vcpus_total": rng.choice([2, 8, 64]), "vcpus_used": 0,
        "total_usable_ram_mb": total_ram_mb, "free_ram_mb": total_ram_mb - 512,
        "total_usable_disk_gb": rng.choice([10, 100, 4096]), "free_disk_mb": 0, "num_instances": 0,
        "num_io_ops": 0, "cpu_allocation_ratio": rng.choice([16.0, 16.0, 1.5, 0.1 + 0.2]),
        "ram_allocation_ratio": rng.choice([1.0, 1.0, 1.0000000000000002]),
        "disk_allocation_ratio": 1.0, "reserved_host_memory_mb": rng.choice([512, 512, 0, 2048]),
        "reserved_host_disk_mb": rng.choice([0, 0, 10]),
        "availability_zone": rng.choice([None, "az1", "az2", "", "zone with spaces, and 'quotes'"]),
        "aggregates": rng.choice([[], [], [{"name": "fast", "metadata": {"ssd": "true"}}],
                                  [{"name": "big", "metadata": {"cpu_allocation_ratio": "2"}},
                                   {"name": "eu", "metadata": {"availability_zone": "az2"}}]]),
        "hypervisor_version": rng.choice([None, 7002000, 8000000]), "hypervisor_type": rng.choice(["QEMU", None]),
        "libvirt_version": rng.choice([9000000, 10000000, None]),
        "supported_instances": rng.choice([[], [["x86_64", "kvm", "hvm"]]]),
        "cpu_info": rng.choice([{}, {"arch": "x86_64", "model": "EPYC", "features": ["aes", "avx"]}]),
        "numa_topology": rng.choice([{}, {"cells": cells}]),
        "pci_devices": rng.choice([[], [{"address": "0000:01:00.0", "vendor_id": "8086", "product_id": "1520"}]]),
        "metrics": {"cpu_user_ns": rng.getrandbits(40)} if rng.random() < 0.5 else {},
        "host_ip": rng.choice([None, f"10.0.0.{number % 250 + 1}"]),
        "domains": [{"name": f"{name}-d{index}", "uuid": f"{name}-d{index}", "state": "running",
                     "vcpus": rng.randint(1, 4), "memory_mb": rng.choice([256, 1024]), "disks": [], "berth": None}
                    for index in range(rng.randint(0, 3))],
    }


def random_fleet(ledger, seed, count=60):
    """``count`` hosts synced in a few batches (times of their own), some disabled with or
    without a reason, some that did not answer their last sync, some missing since, some with
    failed builds."""
    rng = random.Random(seed)
    states = [random_state(rng, number) for number in range(count)]
    for first in range(0, count, 20):
        ledger.sync_hypervisors(states[first:first + 20])
    for state in rng.sample(states, 5):
        ledger.set_disabled(state["host"], True, rng.choice([None, "maintenance", "disk\x1ffull"]))
    down = rng.sample(states, 4)
    ledger.tracker_sync([{**state, "service_up": False, "down_reason": rng.choice([None, "timed out"])}
                         for state in down])
    listed = [state["host"] for state in states if state not in down[:2]]
    ledger.mark_missing(listed, stale_after_s=0)
    with ledger._write() as db:
        for state in rng.sample(states, 6):
            db.execute(text("UPDATE hypervisors SET failed_builds = :count WHERE uuid = :uuid"),
                       {"count": rng.randint(1, 5), "uuid": state["uuid"]})
    return states


@pytest.mark.parametrize("seed", range(4))
def test_the_read_gives_what_the_rows_gave_on_random_fleets(ledger, large, seed, monkeypatch):
    states = random_fleet(ledger, seed)
    taken = []
    monkeypatch.setattr(host_states, "_row_columns", _counting(host_states._row_columns, taken))
    for fields in ((), FACTS, {"numa_topology", "pci_devices"}):
        table, before = assert_same_read(ledger, fields)
        assert table.column("host") == sorted(table.column("host")) or ledger.engine.dialect.name == "sqlite"
    assert taken == [], "the aggregate's text parses: the rows are not read"
    # Those that did not answer, went missing or are disabled read so, each with its own reason.
    assert sum(not up for up in table.column("service_up")) == 4
    assert sum(table.column("disabled")) == 5 and table.column("down_reason").count(None) == len(states) - 4
    assert isinstance(table.stored("free_ram_mb"), np.ndarray)
    assert isinstance(table.stored("sync_age_s"), np.ndarray)
    # And a request decides the same on both.
    for count in (1, 7):
        spec = RequestSpec(flavor=Flavor(name="f", vcpus=1, memory_mb=512, root_gb=1), count=count,
                           service_down_time=10 ** 9, engine="vectorized")
        assert schedule(table, spec).to_dict() == schedule(before, spec).to_dict()


@pytest.mark.parametrize("seed", range(2))
def test_without_numpy_the_rows_give_lists_of_the_same(ledger, large, seed, monkeypatch):
    random_fleet(ledger, seed, count=30)
    monkeypatch.setattr(host_states, "numpy_or_none", lambda: None)
    table, _before = assert_same_read(ledger, FACTS)
    assert all(isinstance(table.stored(name), list) for name in table._columns)


def test_a_fleet_too_small_for_the_vectorised_engine_is_read_without_numpy(ledger, monkeypatch):
    """Below AUTO_VECTORIZED_HOSTS the engine decides without NumPy, and the read, by rows,
    does not import it either."""
    random_fleet(ledger, 5, count=30)
    monkeypatch.setattr(host_states, "numpy_or_none", lambda: pytest.fail("NumPy imported for a small fleet"))
    table, _before = assert_same_read(ledger, FACTS)
    assert all(isinstance(table.stored(name), list) for name in table._columns)


def _counting(read, taken):
    def counted(*args, **kwargs):
        taken.append(args)
        return read(*args, **kwargs)
    return counted


def test_a_name_holding_the_separator_is_read_from_the_rows(ledger, large, monkeypatch):
    states = random_fleet(ledger, 7, count=20)
    with ledger._write() as db:
        db.execute(text("UPDATE hypervisors SET name = :name WHERE uuid = :uuid"),
                   {"name": "odd\x1fname", "uuid": states[3]["uuid"]})
    taken = []
    monkeypatch.setattr(host_states, "_row_columns", _counting(host_states._row_columns, taken))
    table, _before = assert_same_read(ledger)
    assert len(taken) == 1 and "odd\x1fname" in table.column("host")


@pytest.mark.parametrize("column, value", [
    ("vcpus_used", "'many'"), ("disk_mb_used", "2.5"), ("hypervisor_version", "'7.2'"),
    ("cpu_allocation_ratio", "'fast'"), ("reserved_host_disk_mb", "1.5"), ("generation", "'new'"),
    ("disabled", "'yes'"), ("availability_zone", "3"),
])
def test_a_value_of_another_type_than_its_column_reads_as_the_driver_gives_it(ledger, large, column, value):
    """Only SQLite lets another writer leave one; each host still reads as its row holds it."""
    if ledger.engine.dialect.name != "sqlite":
        pytest.skip("PostgreSQL's columns hold their type")
    states = random_fleet(ledger, 11, count=20)
    with ledger._write() as db:
        db.execute(text(f"UPDATE hypervisors SET {column} = {value} WHERE uuid = :uuid"), {"uuid": states[5]["uuid"]})
    assert_same_read(ledger)


def test_an_empty_ledger_reads_no_host(ledger, large):
    table, generations = ledger.host_table(FACTS)
    assert len(table) == 0 and generations == []


def test_a_subset_of_hosts_reads_those_alone(ledger, large):
    states = random_fleet(ledger, 3, count=20)
    wanted = [states[2]["uuid"], states[9]["uuid"], states[4]["uuid"]]
    with ledger._read() as db:
        table, _generations = host_states.read_table(db, NOW, uuids=wanted)
        everyone, _generations = host_states.read_table(db, NOW)
    assert sorted(table.column("uuid")) == sorted(wanted)
    for position, uuid in enumerate(table.column("uuid")):
        assert same(table[position].to_dict(), everyone[everyone.column("uuid").index(uuid)].to_dict())


# ---- the column builders ------------------------------------------------------------------

@pytest.mark.parametrize("joined, count, expected", [
    ("1,-2,3", 3, [1, -2, 3]), ("", 0, []), (None, 0, []), ("7", 1, [7]),
    ("1,2.5,3", 3, None), ("1,,3", 3, None), ("1,x", 2, None), ("1,2", 3, None), (None, 2, None),
    ("1e3", 1, None), ("9223372036854775807,-9223372036854775808", 2, [2 ** 63 - 1, -2 ** 63]),
])
def test_integers_joined_by_the_database_parse_only_when_every_one_is_an_integer(joined, count, expected):
    values = split_integers(np, joined, count)
    if expected is None:
        assert values is None
    else:
        assert values.dtype == np.int64 and values.tolist() == expected


def test_texts_joined_by_the_database_split_only_when_none_holds_the_separator():
    assert split_texts("a|b|", 3, "|") == ["a", "b", ""]
    assert split_texts("a|b|c", 2, "|") is None and split_texts(None, 1, "|") is None
    assert split_texts(None, 0, "|") == []


@pytest.mark.parametrize("kind, values, array", [
    ("int", [1, 2, 3], "int64"), ("int", [1, None, 3], None), ("int", [1, 2.0], None), ("int", [2 ** 63, 1], None),
    ("int", ["7", 2], None), ("float", [1.5, 2.0], "float64"), ("float", [1.5, "2"], None), ("float", [None], None),
    ("flag", [0, 1, None, True, "yes"], "bool"),
])
def test_a_column_is_an_array_only_when_every_value_is_a_number_of_its_kind(kind, values, array):
    for batch in (len(values), 1):  # the whole column at once, or a value per batch
        builder = ColumnBuilder({"column": kind}, np)
        for first in range(0, len(values), batch):
            builder.add("column", values[first:first + batch])
        built = builder.columns()["column"]
        if array is None:
            assert isinstance(built, list) and same(built, values)
        else:
            assert built.dtype == np.dtype(array)
            expected = [bool(value) for value in values] if kind == "flag" else values
            assert same(built.tolist(), expected)


@pytest.mark.parametrize("kind, value, exceptions", [
    ("int", 512, {}), ("int", 512, {2: 0}), ("int", None, {}), ("int", 7, {1: "x"}), ("float", 4.0, {}),
    ("float", 4.0, {0: 1.5}), ("flag", 0, {}), ("flag", 1, {3: 0}), ("shared", "", {1: "other"}),
    ("plain", None, {}),
])
def test_a_column_of_one_value_and_its_exceptions_is_built_as_from_every_value(kind, value, exceptions):
    values = [exceptions.get(position, value) for position in range(4)]
    builder = ColumnBuilder({"column": kind}, np)
    builder.add("column", values)
    expected = builder.columns()["column"]
    built = constant_column(np, kind, value, 4, exceptions)
    assert type(built) is type(expected) and same(list(built.tolist() if hasattr(built, "tolist") else built),
                                                  list(expected.tolist() if hasattr(expected, "tolist") else expected))
    if hasattr(built, "dtype"):
        assert built.dtype == expected.dtype
