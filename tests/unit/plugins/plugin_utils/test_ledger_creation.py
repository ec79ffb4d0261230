"""A SQLite ledger is created only by what writes it: the tracker sync (and a new server
group); every reader, and a launch's schedule, on a path that does not exist is refused with
"no ledger at PATH", and makes no file or directory."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.action.capacity import ActionModule as Capacity
from ansible_collections.berth.fleet.plugins.module_utils.errors import LedgerError
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger

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


def test_a_launch_schedules_on_no_ledger_and_is_refused(missing):
    """berth.fleet.capacity decides as a launch's schedule does: from the ledger's host table."""
    args = {name: spec.get("default") for name, spec in Capacity.ARGUMENT_SPEC.items()}
    args.update(flavor={"name": "m1.tiny", "vcpus": 1, "memory_mb": 512, "root_gb": 1},
                ledger_url=missing["url"])
    with pytest.raises(LedgerError, match=f"^no ledger at {missing['path']} "):
        Capacity._run(None, args, {})  # type: ignore[arg-type]
    assert not missing["directory"].exists()


def test_the_tracker_sync_creates_a_new_ledger_and_says_so(missing):
    first = Ledger(missing["url"]).open()
    report = first.tracker_sync([])
    first.close()
    assert report["ledger_created"] == missing["url"]
    assert missing["path"].is_file()
    # Now it exists: readers read it, and the next sync creates nothing.
    again = Ledger(missing["url"]).open()
    assert again.hypervisors() == []
    assert again.tracker_sync([])["ledger_created"] is None
    again.close()


def test_the_tracker_sync_in_check_mode_still_creates_the_empty_ledger(missing):
    """A dry run needs the schema to work out its answer; it writes nothing else."""
    ledger = Ledger(missing["url"]).open()
    assert ledger.tracker_sync([], dry_run=True)["ledger_created"] == missing["url"]
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
