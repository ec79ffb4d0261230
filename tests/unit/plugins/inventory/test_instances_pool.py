"""berth.fleet.instances asks its hypervisors on a bounded pool of threads, as the tracker sync
reads them: a ledger naming many hosts starts no more threads than the bound, and every host is
still asked."""

from __future__ import annotations

import threading

import yaml

from ansible_collections.berth.fleet.plugins.inventory.instances import InventoryModule
from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.modules import tracker_sync
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.sync import SyncRequest

HOSTS = 5 * limits.HYPERVISORS_AT_ONCE


def test_many_hypervisors_are_asked_on_a_bounded_pool(monkeypatch):
    started: list[str] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        started.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    asking = threading.Condition()
    at_once, most, asked = [0], [0], []

    def ask(self, host, uri, uuids):
        with asking:
            at_once[0] += 1
            most[0] = max(most[0], at_once[0])
            asked.append(host)
            # Each waits for every other to be asked at once, or for a moment: a thread per host
            # would have them all at once (and start HOSTS threads).
            asking.notify_all()
            asking.wait_for(lambda: at_once[0] == HOSTS, timeout=0.05)
            at_once[0] -= 1
        return {uuid: None for uuid in uuids}, None

    monkeypatch.setattr(InventoryModule, "_ask_hypervisor", ask)
    rows = [{"host": f"hv{number}", "uri": f"qemu+ssh://hv{number}.example/system", "uuid": f"uuid-{number}"}
            for number in range(HOSTS)]
    fetched = {"instances": rows, "guests": {}, "unreachable": {}}
    InventoryModule()._ask_hypervisors(rows, fetched)
    assert sorted(asked) == sorted(row["host"] for row in rows)
    assert fetched["guests"] == {row["uuid"]: None for row in rows} and fetched["unreachable"] == {}
    pool_threads = [name for name in started if name.startswith("ThreadPoolExecutor")]
    assert 1 <= len(pool_threads) <= limits.HYPERVISORS_AT_ONCE, len(pool_threads)
    assert most[0] <= limits.HYPERVISORS_AT_ONCE


def test_the_bound_is_the_tracker_syncs_default_workers():
    documented = yaml.safe_load(tracker_sync.DOCUMENTATION)["options"]["workers"]["default"]
    assert documented == SyncRequest(targets=()).workers == limits.HYPERVISORS_AT_ONCE
