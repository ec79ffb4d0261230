"""The one policy every image URL passes before the controller connects to it
(``ImageUrlPolicy.target``). Private to the collection.

A launch requester names ``image.url`` (an AWX survey's text field is enough), and the
controller fetches it. Left open, that is a request forgery from the controller: loopback
services, a cloud's metadata and credentials service at 169.254.169.254, the private networks
the controller reaches and the requester does not. So the controller connects only where the
operator's ``image_url_policy`` (``berth_image_url_policy``) allows: by default ``https`` and
``http`` to public addresses; beyond that, the networks and hosts the operator lists.

The check is made on the addresses a name resolves to, once, and the connection goes to one of
those addresses (plugin_utils/_image_download.py): nothing resolves the name again between the
check and the connection, so a DNS answer that changes in between (DNS rebinding) changes
nothing. Each redirect is a new URL, checked the same way before it is followed. Decimal, octal
and hexadecimal spellings of an IPv4 address resolve to the address they mean, and are checked
as that address; an IPv4-mapped IPv6 address (``::ffff:127.0.0.1``) is its IPv4 address, and so
is a NAT64 one (``64:ff9b::7f00:1``); IPv4-compatible addresses (``::127.0.0.1``, deprecated) are
not public.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Any, Mapping, Union
from urllib.parse import urlsplit

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError

Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]

SCHEMES = ("https", "http")
DEFAULT_PORTS = {"https": 443, "http": 80}
POLICY_KEYS = ("schemes", "hosts", "networks", "public")
# The addresses that are not public, each with what it is (IANA's special-purpose address
# registries); the first that holds an address names it in a refusal.
NOT_PUBLIC: tuple[tuple[Network, str], ...] = tuple((ipaddress.ip_network(network), what) for network, what in (
    ("0.0.0.0/8", "this-network address (0.0.0.0 reaches this machine)"),
    ("10.0.0.0/8", "private address"),
    ("100.64.0.0/10", "shared (carrier-grade NAT) address"),
    ("127.0.0.0/8", "loopback address"),
    ("169.254.0.0/16", "link-local address (where cloud metadata services answer)"),
    ("172.16.0.0/12", "private address"),
    ("192.0.0.0/24", "IETF protocol address"),
    ("192.0.2.0/24", "documentation address"),
    ("192.88.99.0/24", "6to4 relay address"),
    ("192.168.0.0/16", "private address"),
    ("198.18.0.0/15", "benchmarking address"),
    ("198.51.100.0/24", "documentation address"),
    ("203.0.113.0/24", "documentation address"),
    ("224.0.0.0/4", "multicast address"),
    ("240.0.0.0/4", "reserved address"),
    ("::/128", "unspecified address (it reaches this machine)"),
    ("::1/128", "loopback address"),
    ("::/96", "IPv4-compatible address (deprecated)"),
    ("64:ff9b:1::/48", "local-use NAT64 address"),
    ("100::/64", "discard-only address"),
    ("2001::/23", "IETF protocol address"),
    ("2001:db8::/32", "documentation address"),
    ("2002::/16", "6to4 address"),
    ("3fff::/20", "documentation address"),
    ("5f00::/16", "SRv6 address"),
    ("fc00::/7", "unique local (private) address"),
    ("fe80::/10", "link-local address"),
    ("fec0::/10", "site-local address (deprecated)"),
    ("ff00::/8", "multicast address"),
))
# IPv6's global unicast addresses; the rest of IPv6 is not assigned for public use.
GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
# Well-known NAT64 prefix: a gateway translates these to the IPv4 address in their last 32 bits.
NAT64 = ipaddress.ip_network("64:ff9b::/96")

_HOST_LABEL = re.compile(r"^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?$")


@dataclass(frozen=True)
class Target:
    """Where one GET goes: the URL's scheme, host (as the Host header, the TLS server name and the
    certificate's check take it), port and path, and the addresses it resolved to, each checked."""

    scheme: str
    host: str
    port: int
    path: str
    addresses: tuple[tuple[int, tuple[Any, ...]], ...]  # (address family, socket address)


@dataclass(frozen=True)
class ImageUrlPolicy:
    """Where the controller may download images from.

    ``schemes``: the URL schemes allowed. ``hosts``: host names (lower case, no final dot) allowed
    whatever they resolve to. ``networks``: networks allowed whether public or not. ``public``:
    whether any public address is allowed.
    """

    schemes: frozenset[str] = frozenset(SCHEMES)
    hosts: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()
    public: bool = True

    @classmethod
    def from_settings(cls, settings: Any, field_name: str = "image_url_policy") -> ImageUrlPolicy:
        """The policy of an operator's ``image_url_policy`` setting ({schemes, hosts, networks,
        public}, each key optional; None for the default), checked (InputError names the field)."""
        settings = {} if settings is None else settings
        if not isinstance(settings, Mapping):
            raise InputError(field_name, f"{field_name} must be a mapping with any of {', '.join(POLICY_KEYS)}")
        unknown = sorted(set(settings) - set(POLICY_KEYS))
        if unknown:
            raise InputError(f"{field_name}.{unknown[0]}",
                             f"{field_name}: unknown key {unknown[0]!r} (allowed: {', '.join(POLICY_KEYS)})")
        schemes = _strings(f"{field_name}.schemes", settings.get("schemes"), SCHEMES)
        for scheme in schemes:
            if scheme not in SCHEMES:
                raise InputError(f"{field_name}.schemes", f"{field_name}.schemes: {scheme!r} is not one of "
                                                          f"{', '.join(SCHEMES)}")
        hosts = [_host_name(host) for host in _strings(f"{field_name}.hosts", settings.get("hosts"), ())]
        for host in hosts:
            if not _valid_host(host):
                raise InputError(f"{field_name}.hosts", f"{field_name}.hosts: {host!r} is not a DNS name or an "
                                                        f"IP address")
        networks = []
        for text in _strings(f"{field_name}.networks", settings.get("networks"), ()):
            try:
                networks.append(ipaddress.ip_network(text, strict=False))
            except ValueError:
                raise InputError(f"{field_name}.networks", f"{field_name}.networks: {text!r} is not an IP network "
                                                           f"(10.0.0.0/8, fd00::/8) or address") from None
        public = settings.get("public")
        if public is not None and not isinstance(public, bool):
            raise InputError(f"{field_name}.public", f"{field_name}.public must be true or false, got {public!r}")
        return cls(schemes=frozenset(schemes), hosts=frozenset(hosts), networks=tuple(networks),
                   public=True if public is None else public)

    # ---- the check ---------------------------------------------------------------------------

    def refusal(self, address: Address) -> str | None:
        """Why this policy refuses to connect to ``address``, or None if it may."""
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped  # what the connection reaches, so the operator's IPv4 networks hold it
        if any(address in network for network in self.networks):
            return None
        what = not_public(address)
        if what is None:
            return None if self.public else "a public address, and the policy allows only the networks and hosts " \
                                            "it lists"
        return f"a {what}, not a public one"

    def target(self, url: str, redirected: bool = False) -> Target:
        """Where a GET of ``url`` goes: its host resolved once, and every address it resolved to
        checked (a name listed in ``hosts`` is allowed whatever it resolves to). An InputError
        naming image.url when the scheme or an address is refused, or the name does not resolve;
        ``redirected`` says the URL is a redirect's, in that error."""
        what = "image.url redirects to" if redirected else "image.url:"
        rule = "only the operator's berth_image_url_policy can allow it"
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise InputError("image.url", f"{what} a URL that does not parse: {exc}") from None
        scheme, host = parts.scheme.lower(), parts.hostname or ""
        if scheme not in self.schemes:
            raise InputError("image.url", f"{what} a {scheme or 'schemeless'} URL; berth_image_url_policy "
                                          f"allows {', '.join(sorted(self.schemes)) or 'no downloads'}")
        if not host:
            raise InputError("image.url", f"{what} a URL without a host")
        port = port or DEFAULT_PORTS[scheme]
        try:
            answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError) as exc:
            raise InputError("image.url", f"{what} host {host}, which does not resolve: {exc}") from None
        addresses = tuple((family, sockaddr) for family, _type, _proto, _name, sockaddr in answers
                          if family in (socket.AF_INET, socket.AF_INET6))
        if not addresses:
            raise InputError("image.url", f"{what} host {host}, which resolves to no IP address")
        if _host_name(host) not in self.hosts:
            literal = _is_address(host)
            for _family, sockaddr in addresses:
                reason = self.refusal(ipaddress.ip_address(sockaddr[0]))
                if reason is not None:
                    # The address a name resolved to is not repeated: it is the operator's network.
                    where = f"{host}, which is" if literal else f"{host}, which resolves to"
                    raise InputError("image.url", f"{what} {where} {reason}; {rule}")
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return Target(scheme=scheme, host=host, port=port, path=path, addresses=addresses)


DEFAULT_POLICY = ImageUrlPolicy()


def not_public(address: Address) -> str | None:
    """What ``address`` is if it is not public (a "loopback address"...), else None. An
    IPv4-mapped or NAT64 IPv6 address is judged by its IPv4 address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return not_public(address.ipv4_mapped)
        if address in NAT64:
            return not_public(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    for network, what in NOT_PUBLIC:
        if address in network:
            return what
    if isinstance(address, ipaddress.IPv6Address) and address not in GLOBAL_UNICAST:
        return "IPv6 address outside global unicast (2000::/3)"
    return None


def _host_name(host: str) -> str:
    return host.lower().rstrip(".")


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _valid_host(host: str) -> bool:
    if _is_address(host):
        return True
    return 0 < len(host) <= 253 and all(_HOST_LABEL.match(label) for label in host.split("."))


def _strings(field_name: str, value: Any, default: tuple[str, ...]) -> list[str]:
    if value is None:
        return list(default)
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) and item for item in value):
        raise InputError(field_name, f"{field_name} must be a list of non-empty strings")
    return list(value)
