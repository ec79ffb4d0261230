"""Finding a local libvirt daemon's PID from its unix socket, for looking at its filesystem; reading
a host's PCI devices through libvirt's test driver."""

from __future__ import annotations

import os
import socket

import pytest

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor, daemon_pid
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy


@pytest.fixture
def listening_socket(tmp_path):
    path = tmp_path / "libvirt-sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    yield str(path)
    server.close()


def test_the_pid_comes_from_the_socket_peer(listening_socket):
    # This process listens, so the peer credentials name it.
    assert daemon_pid(f"qemu+unix:///system?socket={listening_socket}") == os.getpid()


@pytest.mark.parametrize("uri", [
    "qemu+ssh://root@hv1.example/system",
    "qemu+tcp://hv1.example/system",
    "qemu+libssh://hv1.example/system?known_hosts=/k",
    "test:///default",
    "qemu:///session",
])
def test_remote_and_non_socket_uris_have_no_local_daemon(uri):
    assert daemon_pid(uri) is None


def test_a_socket_nobody_listens_on_gives_none(tmp_path):
    assert daemon_pid(f"qemu+unix:///system?socket={tmp_path / 'gone'}") is None


# ---- node devices: read from libvirt's test driver, at most limits.NODE_DEVICES_READ per host ----

def _pci_node(functions: int, broken: bool = False) -> str:
    """A test-driver node with ``functions`` PCI devices (00:01.0, 00:01.1...); with ``broken``,
    the first says its bus is 300 (no PCI bus is)."""
    devices = "".join(
        f"<device><name>pci_0000_00_01_{number}</name><parent>computer</parent><capability type='pci'>"
        f"<domain>0</domain><bus>{300 if broken and number == 0 else 0}</bus><slot>1</slot>"
        f"<function>{number}</function><product id='0x1234'>p</product><vendor id='0x8086'>v</vendor>"
        "</capability></device>" for number in range(functions))
    return ("<node><cpu><mhz>2000</mhz><model>Haswell</model><active>2</active><max>2</max><nodes>1</nodes>"
            "<sockets>1</sockets><cores>1</cores><threads>2</threads></cpu><memory>1048576</memory>"
            f"{devices}</node>")


@pytest.mark.parametrize("functions, cap, broken, read, skipped", [
    (3, 4096, False, ["0000:00:01.0", "0000:00:01.1", "0000:00:01.2"], {"beyond_limit": 0, "unreadable": 0}),
    (5, 2, False, ["0000:00:01.0", "0000:00:01.1"], {"beyond_limit": 3, "unreadable": 0}),
    (3, 4096, True, ["0000:00:01.1", "0000:00:01.2"], {"beyond_limit": 0, "unreadable": 1}),
], ids=["all", "capped", "one-unreadable"])
def test_pci_devices_are_read_up_to_the_limit(tmp_path, monkeypatch, functions, cap, broken, read, skipped):
    path = tmp_path / "host.xml"
    path.write_text(_pci_node(functions, broken))
    monkeypatch.setattr(limits, "NODE_DEVICES_READ", cap)
    with Hypervisor("hv1", f"test://{path}", uri_policy=UriPolicy(allow_test_files=True)) as hv:
        found = hv._pci_devices()
    assert [device["address"] for device in found["pci_devices"]] == read
    assert found["pci_devices_skipped"] == skipped


def test_the_inventory_documents_the_node_device_limit_in_force():
    from ansible_collections.berth.fleet.plugins.inventory.hypervisors import DOCUMENTATION

    assert f"at most {limits.NODE_DEVICES_READ} devices are read per host" in " ".join(DOCUMENTATION.split())
