"""The static settings of a guest's interfaces in ``networks``: each bad value refused naming its
field, good ones normalised, at most one default route per address family."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import network_specs


def nic(**settings):
    return {"type": "network", "name": "lan", **settings}


def test_static_settings_are_kept_normalised_and_a_plain_nic_is_unchanged():
    specs = network_specs([
        nic(addresses=["10.0.0.5/24", "2001:DB8::5/64"], gateway=["10.0.0.1", "2001:db8::1"],
            routes=[{"to": "10.9.0.0/16", "via": "10.0.0.254", "metric": 100}],
            nameservers={"addresses": ["10.0.0.53", "2001:db8::53"], "search": ["example.com", "lab"]}, dhcp=False),
        {"type": "user"},
    ])
    assert specs == [
        {"type": "network", "name": "lan", "addresses": ["10.0.0.5/24", "2001:db8::5/64"],
         "gateway": ["10.0.0.1", "2001:db8::1"], "routes": [{"to": "10.9.0.0/16", "via": "10.0.0.254", "metric": 100}],
         "nameservers": {"addresses": ["10.0.0.53", "2001:db8::53"], "search": ["example.com", "lab"]},
         "dhcp": False},
        {"type": "user", "name": ""},
    ]


def test_a_gateway_as_one_string_and_a_default_route_on_another_family():
    specs = network_specs([nic(addresses=["10.0.0.5/24", "fd00::5/64"], gateway="10.0.0.1",
                               routes=[{"to": "default", "via": "fd00::1"}])])
    assert specs[0]["gateway"] == ["10.0.0.1"] and specs[0]["routes"] == [{"to": "default", "via": "fd00::1"}]


def test_the_settings_are_checked_again_unchanged_as_a_ledger_row_holds_them():
    specs = network_specs([nic(addresses=["10.0.0.5/24"], gateway="10.0.0.1", dhcp=True), {"type": "user"}])
    assert network_specs(specs) == specs


def test_defaults_on_separate_interfaces_of_separate_families_pass():
    specs = network_specs([nic(addresses=["10.0.0.5/24"], gateway="10.0.0.1"),
                           nic(addresses=["fd00::5/64"], gateway="fd00::1")])
    assert [(spec["addresses"], spec["gateway"]) for spec in specs] == [
        (["10.0.0.5/24"], ["10.0.0.1"]), (["fd00::5/64"], ["fd00::1"])]


BAD = [
    # addresses
    ({"addresses": "10.0.0.5/24"}, "networks[0].addresses", "must be a list"),
    ({"addresses": ["10.0.0.5"]}, "networks[0].addresses[0]", "with its prefix length"),
    ({"addresses": ["10.0.0.300/24"]}, "networks[0].addresses[0]", "with its prefix length"),
    ({"addresses": ["10.0.0.5/33"]}, "networks[0].addresses[0]", "with its prefix length"),
    ({"addresses": ["web/24"]}, "networks[0].addresses[0]", "with its prefix length"),
    ({"addresses": [24]}, "networks[0].addresses[0]", "with its prefix length"),
    ({"addresses": ["10.0.0.5/24", "224.0.0.1/4"]}, "networks[0].addresses[1]", "multicast"),
    ({"addresses": ["127.0.0.2/8"]}, "networks[0].addresses[0]", "loopback"),
    ({"addresses": ["0.0.0.0/0"]}, "networks[0].addresses[0]", "unspecified"),
    ({"addresses": ["fe80::5/64"]}, "networks[0].addresses[0]", "link-local"),
    ({"addresses": ["10.0.0.0/24"]}, "networks[0].addresses[0]", "network or broadcast address"),
    ({"addresses": ["10.0.0.255/24"]}, "networks[0].addresses[0]", "network or broadcast address"),
    ({"addresses": ["10.0.0.5/24", "10.0.0.5/16"]}, "networks[0].addresses[1]", "given twice"),
    # gateway
    ({"addresses": ["10.0.0.5/24"], "gateway": "10.0.1.1"}, "networks[0].gateway",
     "not inside the interface's IPv4 subnets (10.0.0.0/24)"),
    ({"gateway": "10.0.0.1"}, "networks[0].gateway", "none: give the interface an IPv4 address"),
    ({"addresses": ["10.0.0.5/24"], "gateway": "router"}, "networks[0].gateway", "must be an IP address"),
    ({"addresses": ["10.0.0.5/24"], "gateway": "10.0.0.1/24"}, "networks[0].gateway", "no prefix length"),
    ({"addresses": ["10.0.0.5/24"], "gateway": "10.0.0.5"}, "networks[0].gateway", "the interface's own address"),
    ({"addresses": ["10.0.0.5/24"], "gateway": ["10.0.0.1", "10.0.0.2"]}, "networks[0].gateway[1]",
     "one gateway per address family"),
    ({"addresses": ["10.0.0.5/24"], "gateway": {"via": "10.0.0.1"}}, "networks[0].gateway", "must be a list"),
    # routes
    ({"addresses": ["10.0.0.5/24"], "routes": {"to": "default"}}, "networks[0].routes", "must be a list"),
    ({"addresses": ["10.0.0.5/24"], "routes": ["10.1.0.0/16"]}, "networks[0].routes[0]", "must be a dict"),
    ({"addresses": ["10.0.0.5/24"], "routes": [{"to": "10.1.0.0/16", "via": "10.0.0.1", "table": 5}]},
     "networks[0].routes[0]", "unknown keys ['table']"),
    ({"addresses": ["10.0.0.5/24"], "routes": [{"to": "10.1.0.0/16"}]}, "networks[0].routes[0].via",
     "must be an IP address"),
    ({"addresses": ["10.0.0.5/24"], "routes": [{"to": "10.1.0.0/16", "via": "10.9.0.1"}]},
     "networks[0].routes[0].via", "not inside"),
    ({"addresses": ["10.0.0.5/24"], "routes": [{"to": "10.1.0.5/16", "via": "10.0.0.1"}]},
     "networks[0].routes[0].to", "no host bits set"),
    ({"addresses": ["10.0.0.5/24"], "routes": [{"to": "10.1.0.0", "via": "10.0.0.1"}]},
     "networks[0].routes[0].to", "with its prefix length"),
    ({"addresses": ["10.0.0.5/24"], "routes": [{"to": "fd00:1::/64", "via": "10.0.0.1"}]},
     "networks[0].routes[0].via", "is IPv4"),
    ({"addresses": ["10.0.0.5/24"], "routes": [{"to": "10.1.0.0/16", "via": "10.0.0.1", "metric": -1}]},
     "networks[0].routes[0].metric", "integer from 0"),
    ({"addresses": ["10.0.0.5/24"], "routes": [{"to": "10.1.0.0/16", "via": "10.0.0.1", "metric": True}]},
     "networks[0].routes[0].metric", "integer from 0"),
    ({"addresses": ["10.0.0.5/24"], "gateway": "10.0.0.1", "routes": [{"to": "0.0.0.0/0", "via": "10.0.0.2"}]},
     "networks[0].routes[0]", "a second IPv4 default route (networks[0].gateway has one)"),
    # nameservers
    ({"nameservers": ["10.0.0.53"]}, "networks[0].nameservers", "must be a dict"),
    ({"nameservers": {"servers": ["10.0.0.53"]}}, "networks[0].nameservers", "unknown keys ['servers']"),
    ({"nameservers": {"addresses": ["dns.example.com"]}}, "networks[0].nameservers.addresses[0]",
     "must be an IP address"),
    ({"nameservers": {"addresses": "10.0.0.53"}}, "networks[0].nameservers.addresses", "must be a list"),
    ({"nameservers": {"search": ["-bad.example"]}}, "networks[0].nameservers.search[0]", "must be a DNS name"),
    ({"nameservers": {"search": ["a..b"]}}, "networks[0].nameservers.search[0]", "must be a DNS name"),
    ({"nameservers": {"search": ["ok.example", "x" * 64]}}, "networks[0].nameservers.search[1]", "must be a DNS name"),
    ({"nameservers": {"search": ["lab\nnameserver 6.6.6.6"]}}, "networks[0].nameservers.search[0]",
     "must be a DNS name"),
    # dhcp and the entry itself
    ({"dhcp": "yes"}, "networks[0].dhcp", "must be true or false"),
    ({"adresses": ["10.0.0.5/24"]}, "networks[0]", "unknown keys ['adresses']"),
]


@pytest.mark.parametrize("settings, field, message", BAD,
                         ids=[f"{index}-{case[1]}" for index, case in enumerate(BAD)])
def test_each_bad_value_is_refused_naming_its_field(settings, field, message):
    with pytest.raises(InputError) as caught:
        network_specs([nic(**settings)])
    assert caught.value.field == field
    assert str(caught.value).startswith(field)
    assert message in str(caught.value)


def test_the_field_counts_every_entry_as_given_none_included():
    with pytest.raises(InputError) as caught:
        network_specs([{"type": "none"}, {"type": "user", "addresses": ["10.0.0.5"]}])
    assert caught.value.field == "networks[1].addresses[0]"


def test_type_none_takes_no_settings():
    with pytest.raises(InputError) as caught:
        network_specs([{"type": "none", "addresses": ["10.0.0.5/24"]}])
    assert caught.value.field == "networks[0]"


@pytest.mark.parametrize("second, field", [
    (nic(addresses=["10.1.0.5/24"], gateway="10.1.0.1"), "networks[1].gateway"),
    (nic(addresses=["10.1.0.5/24"], routes=[{"to": "default", "via": "10.1.0.1"}]), "networks[1].routes[0]"),
], ids=["gateway", "default-route"])
def test_a_second_default_route_of_a_family_on_another_interface_is_refused(second, field):
    with pytest.raises(InputError) as caught:
        network_specs([nic(addresses=["10.0.0.5/24"], gateway="10.0.0.1"), second])
    assert caught.value.field == field
    assert "a second IPv4 default route (networks[0].gateway has one)" in str(caught.value)
