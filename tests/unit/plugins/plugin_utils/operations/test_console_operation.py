"""berth.fleet.console's operation against a fake ledger and the fake hypervisor (fake_hypervisor.py)
through a real HostSession, its options as the real action validates them, and
Hypervisor.read_file_tail's bounded read against a fake libvirt connection
(tests/integration/test_console.py reads a real guest's log on the lab fleet)."""

from __future__ import annotations

from unittest import mock

import libvirt
import pytest
from fake_hypervisor import FakeHypervisor, connect_to
from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.berth.fleet.plugins.action.console import ActionModule
from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import READER_POOL_PREFIX, Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import DEFAULT_POLICY
from ansible_collections.berth.fleet.plugins.plugin_utils._provisioning import HostSession
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.console import (
    ConsoleOutput,
    check_directory,
    placed_instance,
)

LOGS = "/var/log/libvirt/qemu"
ROW = {"name": "web-1", "uuid": "6f1c0000-0000-4000-8000-000000000001", "host": "hv1", "state": "ACTIVE",
       "uri": "qemu+ssh://hv1.example/system", "failure_reason": None}


class FakeLedger:
    label = "the ledger at sqlite:///fake"

    def __init__(self, rows):
        self.rows, self.asked = rows, []

    def instances(self, names=None):
        self.asked.append(names)
        return [row for row in self.rows if row["name"] in names]


def run(content=None, lines=100, unreachable=None):
    """The operation over a real HostSession of the fake hv1, whose log holds ``content`` (None:
    no log) or which ``unreachable`` says why it cannot be reached."""
    hv = FakeHypervisor("hv1")
    if content is not None:
        hv.files[f"{LOGS}/web-1.serial.log"] = content
    hv.unreachable = unreachable
    session = HostSession("hv1", ROW["uri"], 30, DEFAULT_POLICY, connect_to(hv))
    return ConsoleOutput(ROW, LOGS + "/", lines, session).run(), hv


def test_the_last_lines_of_the_instance_s_log_in_the_operator_s_directory():
    result, hv = run(b"SeaBIOS\r\nLinux version 6.1\r\nBERTH-GUEST-BOOTED instance=6f1c\r\n", lines=2)
    # One read through one connection to the instance's host, closed after.
    assert hv.calls == ["read_file_tail"] and [c["uri"] for c in hv.connections] == [ROW["uri"]] and not hv.is_open
    assert result["output"] == ["Linux version 6.1", "BERTH-GUEST-BOOTED instance=6f1c"]
    assert result["changed"] is False and result["truncated"] is True
    assert result["log"] == f"{LOGS}/web-1.serial.log" and result["host"] == "hv1" and result["log_size_bytes"] == 62
    assert result["msg"] == f"web-1: the last 2 line(s) of {LOGS}/web-1.serial.log on hv1 (62 bytes, earlier output left out)"


def test_a_log_bigger_than_the_tail_is_read_from_its_end_only():
    old = b"o" * 199 + b"\n"
    content = old * 50000 + b"X" * 100 + b"\nthe end\n"  # 10 MB
    result, _session = run(content, lines=1000)
    assert result["read_bytes"] == limits.CONSOLE_TAIL_BYTES and result["log_size_bytes"] == len(content)
    assert result["output"][-2:] == ["X" * 100, "the end"] and result["truncated"]
    # 1000 lines asked for, the lines the last 64 KiB hold given: the first, cut, left out.
    assert len(result["output"]) == (limits.CONSOLE_TAIL_BYTES - 109) // 200 + 2
    assert all(line == "o" * 199 for line in result["output"][:-2])


def test_no_log_yet_says_where_it_looked():
    with pytest.raises(BerthError, match=f"web-1 has no serial log on hv1 yet: no {LOGS}/web-1.serial.log there"):
        run(None)


def test_a_hypervisor_that_cannot_be_reached_is_named_with_the_instance():
    with pytest.raises(BerthError, match="web-1's serial log could not be read on hv1, where the ledger places it: "
                                         "hv1: libvirt did not answer"):
        run(unreachable="libvirt did not answer openAuth within 30 s")


@pytest.mark.parametrize(("rows", "name", "error", "message"), [
    ([], "web-9", InputError, "no instance named web-9 in the ledger at sqlite:///fake"),
    ([{**ROW, "host": None, "state": "ERROR", "failure_reason": "no valid host"}], "web-1", BerthError,
     r"web-1 is ERROR on no hypervisor in the ledger at sqlite:///fake: it never started anywhere, so it has no "
     r"console output \(why it failed: no valid host\)"),
    ([{**ROW, "uri": None}], "web-1", BerthError, "the ledger at sqlite:///fake has no URI for hv1, where it places "
                                                  "web-1: run playbooks/gather.yml"),
], ids=["unknown", "on-no-hypervisor", "no-uri"])
def test_an_instance_that_has_no_log_to_read_is_refused_saying_why(rows, name, error, message):
    with pytest.raises(error, match=message):
        placed_instance(FakeLedger(rows), name)


@pytest.mark.parametrize("name", ["../etc/shadow", "web-1/../../x", "Web_1", "", "a" * 64])
def test_a_name_that_is_no_dns_label_never_reaches_the_ledger(name):
    ledger = FakeLedger([ROW])
    with pytest.raises(InputError) as caught:
        placed_instance(ledger, name)
    assert caught.value.field == "name" and ledger.asked == []


@pytest.mark.parametrize(("value", "directory"), [
    ("/var/log/libvirt/qemu", "/var/log/libvirt/qemu"), ("/var/log/libvirt/qemu/", "/var/log/libvirt/qemu"),
    ("/", "/"),
])
def test_serial_log_dir_is_an_absolute_normalised_path(value, directory):
    assert check_directory("serial_log_dir", value) == directory


@pytest.mark.parametrize("value", ["var/log", "", "/var/log/../../etc", "/var/./log", "//var/log", "/var//log",
                                   "/var/log\0x", "."])
def test_other_directories_are_refused_naming_the_field(value):
    with pytest.raises(InputError) as caught:
        check_directory("serial_log_dir", value)
    assert caught.value.field == "serial_log_dir"


# ---- the options, as the real action validates them (before the ledger is opened) ---------------

def action_run(args, check_mode=False):
    task = mock.MagicMock(args=args, async_val=0, check_mode=check_mode, diff=False)
    action = ActionModule(task=task, connection=mock.MagicMock(), play_context=mock.MagicMock(),
                          loader=DataLoader(), templar=Templar(loader=DataLoader()), shared_loader_obj=None)
    return action.run(task_vars={})


@pytest.mark.parametrize(("args", "message"), [
    ({"lines": 5}, "missing required arguments: name"),
    ({"name": "web-1", "lines": "many"}, "argument 'lines' is of type str and we were unable to convert to int"),
], ids=["no-name", "lines-not-a-number"])
def test_options_of_the_wrong_type_fail_as_ansible_fails_them(tmp_path, args, message):
    with pytest.raises(AnsibleActionFail, match=message):
        action_run({**args, "ledger_url": f"sqlite:///{tmp_path}/none.sqlite3"})


@pytest.mark.parametrize(("args", "field", "message"), [
    ({"name": "web-1", "lines": 0}, "lines", "lines must be a positive integer, got 0"),
    ({"name": "web-1", "lines": limits.CONSOLE_LINES.maximum + 1}, "lines", "lines: 1001 is over the limit of 1000 lines"),
    ({"name": "web-1", "serial_log_dir": "logs"}, "serial_log_dir", "serial_log_dir must be an absolute directory"),
    ({"name": "Web_1"}, "name", "name must be a DNS label"),
], ids=["zero-lines", "too-many-lines", "relative-dir", "bad-name"])
def test_bad_options_fail_naming_the_field_before_the_ledger_is_opened(tmp_path, args, field, message):
    result = action_run({**args, "ledger_url": f"sqlite:///{tmp_path}/none.sqlite3"})
    assert result["failed"] and message in result["msg"], result
    assert result.get("field") == field
    assert not (tmp_path / "none.sqlite3").exists()


def test_the_documented_default_and_bound_of_lines():
    spec = ActionModule.ARGUMENT_SPEC["lines"]
    assert spec == {"type": "int", "default": 100}
    assert limits.CONSOLE_LINES.maximum == 1000 and limits.CONSOLE_TAIL_BYTES == 64 * 1024


# ---- Hypervisor.read_file_tail against a fake libvirt connection -----------------------------------

class FakeLibvirtError(libvirt.libvirtError):
    def __init__(self, code, message="fake"):
        super().__init__(message)
        self.code = code

    def get_error_code(self):
        return self.code


class FakeStream:
    def __init__(self):
        self.data, self.finished = b"", False

    def recv(self, size):
        chunk, self.data = self.data[:size], self.data[size:]
        return chunk

    def finish(self):
        self.finished = True


class FakeVolume:
    def __init__(self, content):
        self.content, self.downloads = content, []

    def path(self):
        return f"{LOGS}/web-1.serial.log"

    def info(self):
        return [0, 10**15, len(self.content)]  # a capacity probed from the guest's bytes: absurd

    def infoFlags(self, flags):
        assert flags == libvirt.VIR_STORAGE_VOL_GET_PHYSICAL
        return [0, 10**15, len(self.content)]

    def download(self, stream, offset, length, flags):
        self.downloads.append((offset, length))
        stream.data = self.content[offset:offset + length]


class FakePool:
    def __init__(self, volumes, listed=True, name="serial-logs", active=True):
        self.volumes, self.listed, self.destroyed, self.refreshed = volumes, listed, False, 0
        self.pool_name, self.active = name, active

    def name(self):
        return self.pool_name

    def refresh(self, flags):
        self.refreshed += 1
        self.listed = True

    def storageVolLookupByName(self, name):
        if not self.active:
            raise FakeLibvirtError(libvirt.VIR_ERR_OPERATION_INVALID, "storage pool is not active")
        if not self.listed or name not in self.volumes:
            raise FakeLibvirtError(libvirt.VIR_ERR_NO_STORAGE_VOL)
        return self.volumes[name]

    def destroy(self):
        self.destroyed = True


class FakeConnection:
    """Its pools over the directory, one per lookup (the last one stays); ``transient``: the pool
    a create makes."""

    def __init__(self, *pools, transient=None):
        self.pools, self.transient, self.created, self.stream = list(pools), transient, [], FakeStream()

    def storagePoolLookupByTargetPath(self, path):
        pool = self.pools.pop(0) if len(self.pools) > 1 else (self.pools or [None])[0]
        if pool is None:
            raise FakeLibvirtError(libvirt.VIR_ERR_NO_STORAGE_POOL)
        return pool

    def storagePoolCreateXML(self, xml, flags):
        self.created.append(xml)
        return self.transient

    def newStream(self, flags):
        return self.stream


def hypervisor(conn):
    hv = Hypervisor("hv1", "qemu+ssh://hv1.example/system")  # remote: no link check possible
    hv.conn = conn
    return hv


def test_only_the_tail_is_downloaded_through_the_operator_s_pool_which_is_kept():
    volume = FakeVolume(b"x" * (10 * 1024 * 1024) + b"end\n")
    pool = FakePool({"web-1.serial.log": volume}, listed=False)  # made since the pool's last scan
    conn = FakeConnection(pool)
    data, size = hypervisor(conn).read_file_tail(LOGS, "web-1.serial.log", 65536)
    assert volume.downloads == [(len(volume.content) - 65536, 65536)] and len(data) == 65536
    assert data.endswith(b"end\n") and size == len(volume.content) and conn.stream.finished
    assert pool.refreshed == 1 and not pool.destroyed and conn.created == []


def test_without_a_pool_a_transient_one_is_started_for_the_read_and_destroyed():
    transient = FakePool({"web-1.serial.log": FakeVolume(b"hello\n")})
    conn = FakeConnection(transient=transient)
    assert hypervisor(conn).read_file_tail(LOGS, "web-1.serial.log", 65536) == (b"hello\n", 6)
    [xml] = conn.created
    assert xml.startswith(f"<pool type=\"dir\"><name>{READER_POOL_PREFIX}") and f"<path>{LOGS}</path>" in xml
    assert transient.destroyed


def test_no_such_file_is_none_and_the_transient_pool_is_destroyed_all_the_same():
    transient = FakePool({})
    assert hypervisor(FakeConnection(transient=transient)).read_file_tail(LOGS, "web-1.serial.log", 65536) is None
    assert transient.destroyed and transient.refreshed == 1


@pytest.mark.parametrize("file_name", ["../shadow", "a/b", "", ".", ".."])
def test_a_file_name_is_one_path_component(file_name):
    with pytest.raises(ValueError):
        hypervisor(FakeConnection()).read_file_tail(LOGS, file_name, 65536)


def test_another_read_s_transient_pool_destroyed_under_this_read_is_tried_once_more():
    borrowed = FakePool({}, name=f"{READER_POOL_PREFIX}other", active=False)  # destroyed meanwhile
    transient = FakePool({"web-1.serial.log": FakeVolume(b"hello\n")})
    conn = FakeConnection(borrowed, None, transient=transient)
    assert hypervisor(conn).read_file_tail(LOGS, "web-1.serial.log", 65536) == (b"hello\n", 6)
    assert len(conn.created) == 1 and transient.destroyed and not borrowed.destroyed


def test_the_operator_s_pool_that_fails_is_not_tried_again():
    pool = FakePool({}, active=False)
    conn = FakeConnection(pool)
    with pytest.raises(HypervisorError, match="storage pool is not active"):
        hypervisor(conn).read_file_tail(LOGS, "web-1.serial.log", 65536)
    assert conn.created == []
