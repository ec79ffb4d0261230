"""Finding a local libvirt daemon's PID from its unix socket, for looking at its filesystem."""

from __future__ import annotations

import os
import socket

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import daemon_pid


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
