"""The image URL policy (plugin_utils/_image_url_policy.py): which addresses the controller may
download images from, every spelling of an address included, and the operator's setting checked
naming its field. ``target`` resolves without connecting; numeric spellings need no DNS."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.plugin_utils import _argspec
from ansible_collections.berth.fleet.plugins.plugin_utils._image_url_policy import (
    DEFAULT_POLICY,
    SCHEMES,
    ImageUrlPolicy,
)

NOT_PUBLIC = [
    ("127.0.0.1", "loopback"), ("127.255.255.254", "loopback"), ("::1", "loopback"),
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:7f00:1", "loopback"), ("::127.0.0.1", "IPv4-compatible"),
    ("64:ff9b::7f00:1", "loopback"), ("0.0.0.0", "this-network"), ("0.1.2.3", "this-network"),
    ("::", "unspecified"),
    ("169.254.169.254", "link-local"), ("::ffff:169.254.169.254", "link-local"),
    ("64:ff9b::a9fe:a9fe", "link-local"), ("fe80::", "link-local"), ("fe80::1%eth0", "link-local"),
    ("10.0.0.1", "private"), ("10.255.255.255", "private"), ("172.16.0.1", "private"),
    ("172.31.255.255", "private"), ("192.168.0.1", "private"), ("192.168.255.255", "private"),
    ("::ffff:10.1.2.3", "private"),
    ("100.64.0.1", "shared"), ("100.127.255.255", "shared"),
    ("fc00::1", "unique local"), ("fd12:3456:789a::1", "unique local"),
    ("224.0.0.1", "multicast"), ("ff02::1", "multicast"), ("255.255.255.255", "reserved"),
    ("240.0.0.1", "reserved"), ("192.0.0.8", "IETF"), ("192.0.2.1", "documentation"),
    ("198.18.0.1", "benchmarking"), ("198.51.100.7", "documentation"), ("203.0.113.9", "documentation"),
    ("2001:db8::1", "documentation"), ("2001::1", "IETF"), ("2002:7f00:1::1", "6to4"),
    ("64:ff9b:1::1", "NAT64"), ("100::1", "discard"), ("fec0::1", "site-local"), ("4000::1", "global unicast"),
]
PUBLIC = ["8.8.8.8", "1.1.1.1", "172.15.255.255", "172.32.0.1", "100.63.255.255", "100.128.0.1", "192.169.0.1",
          "169.255.0.1", "11.0.0.1", "2001:4860:4860::8888", "2606:4700::1111", "::ffff:8.8.8.8",
          "64:ff9b::808:808"]


@pytest.mark.parametrize("address, what", NOT_PUBLIC, ids=[address for address, _what in NOT_PUBLIC])
def test_every_address_that_is_not_public_is_refused_by_default(address, what):
    reason = DEFAULT_POLICY.refusal(ipaddress.ip_address(address))
    assert reason is not None and what in reason and "not a public one" in reason


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_allowed_by_default(address):
    assert DEFAULT_POLICY.refusal(ipaddress.ip_address(address)) is None


# Spellings of loopback and of "this host" that the C library's resolver accepts (inet_aton):
# decimal, octal, hexadecimal, shortened; and IPv6 forms of them.
SPELLINGS = ["127.0.0.1", "2130706433", "0177.0.0.1", "0x7f.0.0.1", "0x7f000001", "017700000001", "127.1",
             "0", "0.0.0.0", "[::1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::127.0.0.1]", "[::]",
             "[0:0:0:0:0:ffff:127.0.0.1]", "localhost", "169.254.169.254", "2852039166", "[fe80::1]"]


@pytest.mark.parametrize("host", SPELLINGS)
def test_every_spelling_of_a_local_address_is_refused_after_resolution(host):
    with pytest.raises(InputError) as caught:
        DEFAULT_POLICY.target(f"http://{host}/latest/meta-data")
    assert caught.value.field == "image.url" and "berth_image_url_policy" in str(caught.value)


def test_a_public_address_gives_where_to_connect():
    target = DEFAULT_POLICY.target("https://8.8.8.8/images/cloud.qcow2?v=2#part")
    assert (target.scheme, target.host, target.port, target.path) == ("https", "8.8.8.8", 443,
                                                                      "/images/cloud.qcow2?v=2")
    assert target.addresses == ((socket.AF_INET, ("8.8.8.8", 443)),)
    assert DEFAULT_POLICY.target("http://[2001:4860:4860::8888]:8080").addresses[0][1][:2] == \
        ("2001:4860:4860::8888", 8080)


@pytest.fixture
def answers(monkeypatch):
    """socket.getaddrinfo answering every name with the addresses the test puts in the list."""
    found: list[str] = []

    def getaddrinfo(host, port, *rest, **kwargs):
        return [(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "",
                 (address, port) if ":" not in address else (address, port, 0, 0)) for address in found]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return found


def test_a_name_resolving_to_loopback_is_refused_without_telling_the_address(answers):
    answers.append("127.0.0.53")
    with pytest.raises(InputError) as caught:
        DEFAULT_POLICY.target("https://mirror.example.com/cloud.qcow2")
    assert str(caught.value).startswith("image.url: mirror.example.com, which resolves to a loopback address")
    assert "127.0.0.53" not in str(caught.value)


def test_a_name_is_refused_if_any_of_its_addresses_is(answers):
    answers.extend(["8.8.8.8", "2001:4860::1", "::ffff:169.254.169.254"])
    with pytest.raises(InputError, match="link-local"):
        DEFAULT_POLICY.target("https://mirror.example.com/cloud.qcow2")
    answers.pop()
    assert len(DEFAULT_POLICY.target("https://mirror.example.com/cloud.qcow2").addresses) == 2


def test_a_redirect_s_refusal_says_so(answers):
    answers.append("10.0.0.1")
    with pytest.raises(InputError, match=r"^image.url redirects to intranet.example, which resolves to a private"):
        DEFAULT_POLICY.target("http://intranet.example/", redirected=True)


def test_a_name_that_does_not_resolve_is_an_error_naming_the_url(monkeypatch):
    def fail(*_args, **_kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", fail)
    with pytest.raises(InputError, match="does not resolve") as caught:
        DEFAULT_POLICY.target("http://nowhere.invalid/")
    assert caught.value.field == "image.url"


# ---- what the operator allows ----------------------------------------------------------------

def test_networks_allow_their_addresses_in_every_form_and_nothing_else():
    policy = ImageUrlPolicy.from_settings({"networks": ["127.0.0.1", "10.20.0.0/16", "fd00::/8"]})
    for allowed in ("127.0.0.1", "::ffff:127.0.0.1", "10.20.3.4", "fd00::5", "8.8.8.8"):
        assert policy.refusal(ipaddress.ip_address(allowed)) is None, allowed
    for refused in ("127.0.0.2", "::1", "10.21.0.1", "169.254.169.254", "fc00::1"):
        assert policy.refusal(ipaddress.ip_address(refused)) is not None, refused
    assert policy.target("http://2130706433:8080/x").port == 8080


def test_public_false_allows_only_what_is_listed():
    policy = ImageUrlPolicy.from_settings({"public": False, "networks": ["10.0.0.0/8"]})
    assert "allows only the networks and hosts" in policy.refusal(ipaddress.ip_address("8.8.8.8"))
    assert policy.refusal(ipaddress.ip_address("10.1.1.1")) is None


def test_hosts_are_allowed_whatever_they_resolve_to(answers):
    answers.append("192.168.7.7")
    policy = ImageUrlPolicy.from_settings({"hosts": ["Mirror.Internal."]})
    assert policy.target("http://mirror.internal./cloud.qcow2").addresses == ((socket.AF_INET, ("192.168.7.7", 80)),)
    with pytest.raises(InputError):
        policy.target("http://other.internal/cloud.qcow2")


def test_schemes_limit_the_urls():
    policy = ImageUrlPolicy.from_settings({"schemes": ["https"]})
    with pytest.raises(InputError, match="a http URL; berth_image_url_policy allows https"):
        policy.target("http://8.8.8.8/x")
    assert policy.target("HTTPS://8.8.8.8/x").scheme == "https"


@pytest.mark.parametrize("setting, field", [
    ("everything", "image_url_policy"),
    ({"allow": ["x"]}, "image_url_policy.allow"),
    ({"schemes": ["ftp"]}, "image_url_policy.schemes"),
    ({"schemes": "https"}, "image_url_policy.schemes"),
    ({"networks": ["10.0.0.0/33"]}, "image_url_policy.networks"),
    ({"networks": ["intranet"]}, "image_url_policy.networks"),
    ({"hosts": ["-oProxyCommand=x"]}, "image_url_policy.hosts"),
    ({"hosts": ["two words"]}, "image_url_policy.hosts"),
    ({"hosts": [""]}, "image_url_policy.hosts"),
    ({"public": "yes"}, "image_url_policy.public"),
], ids=["not-a-mapping", "unknown-key", "scheme", "scheme-not-a-list", "prefix", "network", "dash-host",
        "space-host", "empty-host", "public"])
def test_a_bad_setting_is_an_error_naming_its_field(setting, field):
    with pytest.raises(InputError) as caught:
        ImageUrlPolicy.from_settings(setting)
    assert caught.value.field == field and str(caught.value).startswith("image_url_policy")


def test_the_default_is_the_documented_one():
    """The modules' option (doc fragment berth.fleet.image_download), as Ansible's validator
    fills it in, and no setting at all give the same policy."""
    option = _argspec.fragment_documentation("berth.fleet.image_download")["options"]["image_url_policy"]
    documented = {key: entry.get("default") for key, entry in option["suboptions"].items()}
    assert ImageUrlPolicy.from_settings(documented) == ImageUrlPolicy.from_settings(None) == DEFAULT_POLICY
    assert list(SCHEMES) == option["suboptions"]["schemes"]["default"] == option["suboptions"]["schemes"]["choices"]
