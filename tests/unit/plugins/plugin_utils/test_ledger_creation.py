"""A SQLite ledger is created only by what writes it: the tracker sync (and a new server
group, or a launch on live inventory facts, which syncs them first); every reader, and a plain launch, on a path that does not exist is refused with
"no ledger at PATH", and makes no file or directory."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ansible_collections.berth.fleet.plugins.action.capacity import ActionModule as Capacity
from ansible_collections.berth.fleet.plugins.action.schedule import ActionModule as Schedule
from ansible_collections.berth.fleet.plugins.module_utils.errors import LedgerError
from ansible_collections.berth.fleet.plugins.module_utils.host_facts import host_state
from ansible_collections.berth.fleet.plugins.module_utils.host_fetch import fetch_one
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.sync import Sync, SyncRequest, Target

READERS = [
    pytest.param(lambda ledger: ledger.hypervisors(), id="hypervisors"),
    pytest.param(lambda ledger: ledger.instances(), id="instances"),
    pytest.param(lambda ledger: ledger.server_groups(), id="server_groups"),
    pytest.param(lambda ledger: ledger.decisions(), id="decisions"),
    pytest.param(lambda ledger: ledger.claims(), id="claims"),
    pytest.param(lambda ledger: ledger.fleet_view(), id="fleet_view"),
    pytest.param(lambda ledger: ledger.inventory_instances(["ACTIVE"]), id="inventory_instances"),
    pytest.param(lambda ledger: ledger.host_table(), id="host_table"),
]


@pytest.fixture
def missing(tmp_path):
    """A ledger path under a directory that does not exist either (a typo in ledger_url)."""
    path = tmp_path / "typo" / "ledger.sqlite3"
    return {"path": path, "url": f"sqlite:///{path}", "directory": tmp_path / "typo"}


@pytest.mark.parametrize("read", READERS)
def test_a_reader_is_refused_and_makes_nothing(missing, read):
    ledger = Ledger(missing["url"]).open()
    with pytest.raises(LedgerError, match=f"^no ledger at {missing['path']} .*the tracker sync "
                                          r"\(playbooks/gather.yml\) creates it"):
        read(ledger)
    assert not missing["directory"].exists()


def _launch(args: dict, check_mode: bool = False) -> dict:
    """berth.fleet.schedule's action (the launch's first task) on ``args`` over its defaults."""
    options = {name: spec.get("default") for name, spec in Schedule.ARGUMENT_SPEC.items()}
    options.update(name="web", flavor="m1.tiny", **args)
    action = SimpleNamespace(_task=SimpleNamespace(check_mode=check_mode))
    return Schedule.run_berth(action, options, {})  # type: ignore[arg-type]


def test_a_launch_on_no_ledger_is_refused(missing):
    with pytest.raises(LedgerError, match=f"^no ledger at {missing['path']} "):
        _launch({"ledger_url": missing["url"]})
    assert not missing["directory"].exists()


def _inventory_vars() -> dict:
    """A play's variables with one hypervisor of a berth.fleet.hypervisors source whose facts
    were gathered (libvirt's built-in test hypervisor)."""
    outcome = fetch_one("hv1", "test:///default", "default-pool", 5.0)
    # The test hypervisor's own domains take all its memory: overcommit it for one more.
    state = host_state("hv1", outcome["facts"], {"ram_allocation_ratio": 16.0}, [], "nova", outcome["gathered_at"])
    return {"groups": {"hypervisors": ["hv1"]},
            "hostvars": {"hv1": {"berth_host_state": state, "berth_libvirt_uri": "test:///default"}}}


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check"])
def test_a_launch_on_live_inventory_facts_starts_the_ledger(missing, check_mode):
    """It syncs the facts into the ledger first (in a real run), as the tracker sync would."""
    options = {name: spec.get("default") for name, spec in Schedule.ARGUMENT_SPEC.items()}
    options.update(name="web", flavor="m1.tiny", source="inventory", ledger_url=missing["url"])
    action = SimpleNamespace(_task=SimpleNamespace(check_mode=check_mode))
    result = Schedule.run_berth(action, options, _inventory_vars())  # type: ignore[arg-type]
    assert [placement["host"] for placement in result["placements"]] == ["hv1"], (result.get("msg"), result.get("summary"))
    assert missing["path"].is_file()
    ledger = Ledger(missing["url"]).open()
    assert [row["host"] for row in ledger.hypervisors()] == ([] if check_mode else ["hv1"])
    ledger.close()


def test_capacity_on_no_ledger_is_refused(missing):
    """berth.fleet.capacity decides as a launch's schedule does: from the ledger's host table."""
    args = {name: spec.get("default") for name, spec in Capacity.ARGUMENT_SPEC.items()}
    args.update(flavor={"name": "m1.tiny", "vcpus": 1, "memory_mb": 512, "root_gb": 1},
                ledger_url=missing["url"])
    with pytest.raises(LedgerError, match=f"^no ledger at {missing['path']} "):
        Capacity._run(None, args, {})  # type: ignore[arg-type]
    assert not missing["directory"].exists()


def _sync(ledger: Ledger, dry_run: bool = False) -> dict:
    """The tracker sync (gather.yml's task) of libvirt's built-in test hypervisor."""
    target = Target.from_hostvars("hv1", {"berth_libvirt_uri": "test:///default", "berth_hypervisor": {
        "storage_pool": "default-pool", "settings": {}, "aggregates": [], "availability_zone": "nova",
        "keepalive_interval": 5, "keepalive_count": 3, "timeout": 5.0}})
    return Sync(SyncRequest(targets=(target,), dry_run=dry_run), ledger).run()


def test_the_tracker_sync_creates_a_new_ledger_and_says_so(missing):
    first = Ledger(missing["url"]).open()
    result = _sync(first)
    first.close()
    assert result["ledger_created"] == missing["url"]
    assert result["drift"][0] == f"created a new ledger: {missing['url']}"
    assert missing["path"].is_file()
    # Now it exists: readers read it, and the next sync creates nothing.
    again = Ledger(missing["url"]).open()
    assert [row["host"] for row in again.hypervisors()] == ["hv1"]
    second = _sync(again)
    assert second["ledger_created"] is None and second["drift"][0].startswith("synced 1 hypervisor(s)")
    again.close()


def test_the_tracker_sync_in_check_mode_still_creates_the_empty_ledger(missing):
    """A dry run needs the schema to work out its answer; it writes nothing else."""
    ledger = Ledger(missing["url"]).open()
    assert _sync(ledger, dry_run=True)["ledger_created"] == missing["url"]
    assert ledger.hypervisors() == []
    ledger.close()


def test_a_new_server_group_creates_the_ledger(missing):
    ledger = Ledger(missing["url"]).open()
    group, changed = ledger.create_server_group("web", "anti-affinity")
    assert changed and group["name"] == "web"
    assert [row["name"] for row in ledger.server_groups()] == ["web"]
    ledger.close()


def test_open_with_create_makes_it_at_once(missing):
    ledger = Ledger(missing["url"]).open(create=True)
    assert ledger.created and missing["path"].is_file()
    ledger.close()


def test_start_if_missing_makes_it_once(missing):
    ledger = Ledger(missing["url"]).open().start_if_missing()
    assert ledger.created and missing["path"].is_file()
    assert not Ledger(missing["url"]).open().start_if_missing().created
