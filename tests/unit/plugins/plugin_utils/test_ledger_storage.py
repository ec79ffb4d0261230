"""A SQLite ledger Berth creates is private: the file 0600 in a directory of 0700 it made, its
write-ahead log files alike; an existing one readable by others is left as it is, with a warning."""

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def warnings_shown(monkeypatch):
    shown = []
    monkeypatch.setattr("ansible.utils.display.Display.warning", lambda _self, text, *args, **kwargs: shown.append(text))
    return shown


@pytest.fixture(params=[0o022, 0o002, 0o000], ids=["umask-022", "umask-002", "umask-000"])
def loose_umask(request):
    """Whatever the umask, the ledger's own modes hold."""
    previous = os.umask(request.param)
    yield
    os.umask(previous)


def test_a_new_ledger_and_its_new_directory_are_the_owner_s_alone(tmp_path, loose_umask, warnings_shown):
    path = tmp_path / "state" / "berth" / "ledger.sqlite3"
    ledger = Ledger(f"sqlite:///{path}").open()
    try:
        ledger.sync_hypervisors([])  # a write: SQLite makes its -wal and -shm files
        assert mode(path) == 0o600
        assert mode(path.parent) == 0o700
        for companion in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            if companion.exists():
                assert mode(companion) == 0o600, companion
    finally:
        ledger.close()
    assert warnings_shown == []


def test_an_existing_directory_is_left_as_the_operator_made_it(tmp_path, warnings_shown):
    directory = tmp_path / "shared"
    directory.mkdir(mode=0o755)
    os.chmod(directory, 0o755)
    Ledger(f"sqlite:///{directory}/ledger.sqlite3").open(create=True).close()
    assert mode(directory) == 0o755
    assert mode(directory / "ledger.sqlite3") == 0o600


@pytest.mark.parametrize("file_mode, warned", [
    (0o600, False), (0o640, True), (0o604, True), (0o620, False),
], ids=["private", "group-readable", "world-readable", "group-writable-only"])
def test_an_existing_ledger_readable_by_others_is_warned_about_and_left_alone(tmp_path, warnings_shown, file_mode,
                                                                              warned):
    path = tmp_path / "ledger.sqlite3"
    Ledger(f"sqlite:///{path}").open(create=True).close()
    os.chmod(path, file_mode)
    Ledger(f"sqlite:///{path}").open().close()
    assert mode(path) == file_mode
    assert bool(warnings_shown) is warned
    if warned:
        assert str(path) in warnings_shown[0] and f"chmod 600 {path}" in warnings_shown[0]
