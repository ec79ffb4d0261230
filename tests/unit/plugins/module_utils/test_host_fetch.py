"""Talking to hypervisors: what the fetch reads from a hypervisor's URI."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.host_fetch import uri_address


@pytest.mark.parametrize(
    "uri, address",
    [
        ("qemu+ssh://root@10.0.0.11/system", {"10.0.0.11"}),
        ("qemu+tcp://[fd00::11]:16509/system", {"fd00::11"}),
        ("qemu+ssh://localhost/system", {"127.0.0.1", "::1"}),
        ("qemu:///system", {None}),
        ("qemu+unix:///system?socket=/run/x.sock", {None}),
        ("qemu+ssh://no-such-host.invalid/system", {None}),
    ],
    ids=["ipv4", "ipv6", "resolved-name", "local", "unix-socket", "unresolvable"],
)
def test_a_hypervisor_address_comes_from_its_uri(uri, address):
    assert uri_address(uri) in address
