"""A guest's addresses are data: only IP addresses, a guest's own only inside its networks, the
hypervisor's leases first (issue 22, item 5)."""

from __future__ import annotations

import ipaddress

import libvirt
import pytest

from ansible_collections.berth.fleet.plugins.module_utils._guest_addresses import parse_networks, trust_order, vetted
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor

MAC = "52:54:00:00:00:01"
LAB_NET = [ipaddress.ip_network("10.200.0.0/24")]


def answer(address, mac=MAC, kind="ipv4", prefix=24):
    return {"interface": "eth0", "mac": mac, "type": kind, "address": address, "prefix": prefix}


@pytest.mark.parametrize("given, expected", [
    (["lease", "agent", "arp"], ["lease", "agent", "arp"]),
    (["agent", "arp", "lease"], ["lease", "agent", "arp"]),
    (["arp", "lease"], ["lease", "arp"]),
    (["agent"], ["agent"]),
], ids=["default", "lease-last-asked-first", "arp-lease", "agent-only"])
def test_the_hypervisors_leases_are_asked_before_what_the_guest_reports(given, expected):
    assert trust_order(given) == expected


@pytest.mark.parametrize("value", [
    "-oProxyCommand=touch /tmp/owned", "10.200.0.5 -oProxyCommand=x", "10.200.0.5;id", "host.example",
    "", None, 167772165, "10.200.0.5/24", "fe80::1%-oProxyCommand=x", "fe80::1%eth0", "10.200.0.5\n",
], ids=["option", "address-then-option", "shell", "name", "empty", "none", "integer", "cidr",
        "zone-option", "zone", "newline"])
@pytest.mark.parametrize("source", ["lease", "agent", "arp"])
def test_a_value_that_is_not_an_ip_address_is_refused_from_every_source(value, source):
    kept, refused = vetted([answer(value)], source, {MAC: LAB_NET})
    assert kept == []
    assert refused and "is not an IP address" in refused[0]


def test_a_refusal_quotes_a_long_value_only_in_part():
    _kept, refused = vetted([answer("-o" + "x" * 500)], "agent", {MAC: LAB_NET})
    assert len(refused[0]) < 80


@pytest.mark.parametrize("source", ["agent", "arp"])
@pytest.mark.parametrize("address, mac, networks, kept", [
    ("10.200.0.5", MAC, {MAC: LAB_NET}, True),
    ("10.9.9.9", MAC, {MAC: LAB_NET}, False),
    ("10.200.0.5", "52:54:00:ff:ff:ff", {MAC: LAB_NET}, False),
    ("10.200.0.5", MAC, {MAC: []}, False),
    ("10.200.0.5", MAC, {}, False),
], ids=["inside", "outside", "another-interface", "no-network-known", "no-interface"])
def test_a_guest_reported_address_counts_only_inside_its_interfaces_networks(source, address, mac, networks, kept):
    found, refused = vetted([answer(address, mac=mac)], source, networks)
    assert bool(found) is kept and bool(refused) is not kept
    if not kept:
        assert "outside the networks of interface" in refused[0]


def test_a_lease_needs_no_network_it_is_the_hypervisors_own():
    found, refused = vetted([answer("192.0.2.7")], "lease", {})
    assert [item["address"] for item in found] == ["192.0.2.7"] and refused == []


def test_a_kept_address_is_canonical_with_its_type_and_prefix_from_the_address():
    found, _refused = vetted([answer("2001:DB8::0:1", kind="ipv4", prefix=999),
                              answer("10.200.0.9", kind="ipv6", prefix="24")], "lease", {})
    assert [(item["address"], item["type"], item["prefix"]) for item in found] == [
        ("2001:db8::1", "ipv6", None), ("10.200.0.9", "ipv4", None)]


def test_good_and_bad_answers_together_keep_the_good_ones():
    found, refused = vetted([answer("-oProxyCommand=x"), answer("10.200.0.8")], "agent", {MAC: LAB_NET})
    assert [item["address"] for item in found] == ["10.200.0.8"] and len(refused) == 1


def test_networks_from_libvirt_ip_elements():
    parsed = parse_networks([("10.200.0.1", "24", None), ("10.201.0.1", None, "255.255.0.0"),
                             ("fd00::1", "64", None), ("10.202.0.1", None, None), (None, "24", None),
                             ("bogus", "24", None)])
    assert [str(network) for network in parsed] == ["10.200.0.0/24", "10.201.0.0/16", "fd00::/64"]


# ---- through Hypervisor.interface_addresses, with a fake libvirt connection ----------------------

DOMAIN_XML = f"""<domain><name>web-1</name><devices>
  <interface type='network'><mac address='{MAC}'/><source network='lab'/></interface>
  <channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
</devices></domain>"""
NETWORK_XML = "<network><name>lab</name><bridge name='virbr-lab'/><ip address='10.200.0.1' prefix='24'/></network>"


class FakeNetwork:
    def XMLDesc(self, _flags):
        return NETWORK_XML


class FakeDomain:
    def __init__(self, answers):
        self.answers = answers
        self.asked = []

    def state(self, _flags):
        return [1, 1]

    def XMLDesc(self, _flags):
        return DOMAIN_XML

    def interfaceAddresses(self, kind, _flags):
        source = {libvirt.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE: "lease",
                  libvirt.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT: "agent",
                  libvirt.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_ARP: "arp"}[kind]
        self.asked.append(source)
        found = [{"type": libvirt.VIR_IP_ADDR_TYPE_IPV4, "addr": address, "prefix": 24}
                 for address in self.answers.get(source, [])]
        return {"eth0": {"hwaddr": MAC, "addrs": found}}


class FakeConnection:
    def __init__(self, domain):
        self.domain = domain

    def lookupByUUIDString(self, _uuid):
        return self.domain

    def listAllNetworks(self, _flags):
        return [FakeNetwork()]


def addresses_of(answers, sources=("agent", "arp", "lease")):
    domain = FakeDomain(answers)
    hypervisor = Hypervisor("hv1", "test:///default", 5, bounded_by_caller=True)
    hypervisor.conn = FakeConnection(domain)
    return hypervisor.interface_addresses("uuid", sources), domain.asked


def test_the_lease_wins_over_the_agent_whatever_order_the_sources_are_given_in():
    found, asked = addresses_of({"lease": ["10.200.0.5"], "agent": ["10.200.0.66"]})
    assert asked == ["lease"]
    assert found["source"] == "lease" and [item["address"] for item in found["addresses"]] == ["10.200.0.5"]


def test_an_agent_answer_that_is_not_an_address_is_refused_and_the_next_source_asked():
    found, asked = addresses_of({"agent": ["-oProxyCommand=touch /tmp/owned"], "arp": ["10.200.0.7"]})
    assert asked == ["lease", "agent", "arp"]
    assert found["source"] == "arp" and [item["address"] for item in found["addresses"]] == ["10.200.0.7"]
    assert "is not an IP address" in found["skipped"]["agent"]


def test_an_agent_address_outside_the_instances_network_is_refused():
    found, _asked = addresses_of({"agent": ["192.0.2.1"]}, sources=("agent",))
    assert found["source"] is None and found["addresses"] == []
    assert "192.0.2.1 is outside the networks of interface" in found["skipped"]["agent"]
    assert "10.200.0.0/24" in found["skipped"]["agent"]
