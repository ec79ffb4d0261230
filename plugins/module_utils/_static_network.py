"""The static network settings of a guest's interfaces (addresses, gateway, routes, DNS), as one
entry of the launch option ``networks`` may carry them, checked with ``ipaddress`` before anything
is changed. Private to the collection.

They reach the guest as the NoCloud seed's ``network-config`` (plugins/plugin_utils/nocloud.py),
where cloud-init matches each interface by the MAC address Berth gives it.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Mapping, Sequence, Union

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError

# The keys of a ``networks`` entry that configure the guest's side of the interface.
STATIC_KEYS = ("addresses", "gateway", "routes", "nameservers", "dhcp")
ROUTE_KEYS = ("to", "via", "metric")
NAMESERVER_KEYS = ("addresses", "search")
DEFAULT_ROUTE = "default"
# A DNS name as a search domain: labels of letters, digits and '-', at most 253 characters.
_DNS_NAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
# A route metric as Linux takes it (a 32-bit priority).
ROUTE_METRIC_MAX = 2**32 - 1

Interface = Union[ipaddress.IPv4Interface, ipaddress.IPv6Interface]


def has_static_config(network: Mapping[str, Any]) -> bool:
    """Whether a checked ``networks`` entry configures the guest's side of its interface."""
    return any(key in network for key in STATIC_KEYS)


def static_config(field: str, network: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of one ``networks`` entry (``field`` is ``networks[<index>]``) that it gives,
    checked and normalised: addresses with their prefix, the gateway (one per address family,
    inside one of the interface's subnets), routes (``to`` a network or ``default``, ``via`` on
    one of the interface's subnets), name servers and search domains, and ``dhcp``."""
    config: dict[str, Any] = {}
    interfaces: list[Interface] = []
    if network.get("addresses") not in (None, []):
        texts = _list(f"{field}.addresses", network["addresses"])
        limits.NIC_ADDRESSES.check(len(texts), f"{field}.addresses")
        interfaces = [_interface(f"{field}.addresses[{index}]", text) for index, text in enumerate(texts)]
        for index, interface in enumerate(interfaces):
            if interface.ip in [other.ip for other in interfaces[:index]]:
                raise InputError(f"{field}.addresses[{index}]", f"{field}.addresses[{index}]: {interface.ip} is "
                                                                f"given twice")
        config["addresses"] = [str(interface) for interface in interfaces]
    if network.get("gateway") not in (None, "", []):
        gateways = network["gateway"]
        gateways = [gateways] if isinstance(gateways, str) else _list(f"{field}.gateway", gateways)
        config["gateway"] = []
        for index, text in enumerate(gateways):
            name = f"{field}.gateway" if len(gateways) == 1 else f"{field}.gateway[{index}]"
            gateway = _on_link(name, text, interfaces)
            if gateway.version in [ipaddress.ip_address(known).version for known in config["gateway"]]:
                raise InputError(name, f"{name}: one gateway per address family (IPv{gateway.version} has one)")
            config["gateway"].append(str(gateway))
    if network.get("routes") not in (None, []):
        routes = _list(f"{field}.routes", network["routes"])
        limits.NIC_ROUTES.check(len(routes), f"{field}.routes")
        config["routes"] = [_route(f"{field}.routes[{index}]", route, interfaces) for index, route in enumerate(routes)]
    if network.get("nameservers") not in (None, {}):
        config["nameservers"] = _nameservers(f"{field}.nameservers", network["nameservers"])
    if network.get("dhcp") is not None:
        if not isinstance(network["dhcp"], bool):
            raise InputError(f"{field}.dhcp", f"{field}.dhcp must be true or false, got {network['dhcp']!r}")
        config["dhcp"] = network["dhcp"]
    return config


def check_default_routes(fields: Sequence[str], configs: Sequence[Mapping[str, Any]]) -> None:
    """At most one default route per address family across all the guest's interfaces (a
    gateway is one): two would leave the guest's choice to the order its interfaces come up.
    ``fields`` names each config's entry (``networks[<index>]``)."""
    seen: dict[int, str] = {}
    for field, config in zip(fields, configs):
        found = [(f"{field}.gateway", ipaddress.ip_address(text).version) for text in config.get("gateway", [])]
        found += [(f"{field}.routes[{index}]", ipaddress.ip_address(route["via"]).version)
                  for index, route in enumerate(config.get("routes", [])) if route_is_default(route["to"])]
        for name, version in found:
            if version in seen:
                raise InputError(name, f"{name}: a second IPv{version} default route ({seen[version]} has one); "
                                       f"the guest takes at most one per address family")
            seen[version] = name


def route_is_default(to: str) -> bool:
    return to == DEFAULT_ROUTE or ipaddress.ip_network(to).prefixlen == 0


def _list(field: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise InputError(field, f"{field} must be a list, got {value!r}")
    return value


def _interface(field: str, text: Any) -> Interface:
    """An address with its prefix length (``10.0.0.5/24``, ``2001:db8::5/64``) that a host can have."""
    rule = f"{field} must be an IP address with its prefix length (10.0.0.5/24, 2001:db8::5/64), got {text!r}"
    if not isinstance(text, str) or "/" not in text:
        raise InputError(field, rule)
    try:
        interface = ipaddress.ip_interface(text)
    except ValueError:
        raise InputError(field, rule) from None
    address = interface.ip
    if address.is_multicast or address.is_unspecified or address.is_loopback or address.is_link_local:
        raise InputError(field, f"{field}: {address} is not an address to give an interface "
                                f"(multicast, unspecified, loopback or link-local)")
    subnet = interface.network
    reserved = (subnet.network_address, subnet.broadcast_address)
    if subnet.version == 4 and subnet.prefixlen <= 30 and address in reserved:
        raise InputError(field, f"{field}: {address} is the network or broadcast address of {subnet}")
    return interface


def _address(field: str, text: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        if not isinstance(text, str):
            raise ValueError(text)
        return ipaddress.ip_address(text)
    except ValueError:
        raise InputError(field, f"{field} must be an IP address (no prefix length), got {text!r}") from None


def _on_link(field: str, text: Any, interfaces: Sequence[Interface]) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """A next hop: an address inside one of the interface's subnets, not one of its own."""
    address = _address(field, text)
    subnets = [interface.network for interface in interfaces if interface.version == address.version]
    if not any(address in subnet for subnet in subnets):
        own = (", ".join(str(subnet) for subnet in subnets)
               or f"none: give the interface an IPv{address.version} address")
        raise InputError(field, f"{field}: {address} is not inside the interface's IPv{address.version} subnets "
                                f"({own})")
    if address in [interface.ip for interface in interfaces]:
        raise InputError(field, f"{field}: {address} is the interface's own address")
    return address


def _route(field: str, route: Any, interfaces: Sequence[Interface]) -> dict[str, Any]:
    if not isinstance(route, Mapping):
        raise InputError(field, f"{field} must be a dict with to, via and optionally metric, got {route!r}")
    unknown = sorted(set(route) - set(ROUTE_KEYS), key=str)
    if unknown:
        raise InputError(field, f"{field} has unknown keys {unknown} (allowed: {', '.join(ROUTE_KEYS)})")
    via = _on_link(f"{field}.via", route.get("via"), interfaces)
    to = route.get("to")
    if to != DEFAULT_ROUTE:
        try:
            if not isinstance(to, str) or "/" not in to:
                raise ValueError(to)
            network = ipaddress.ip_network(to)
        except ValueError:
            raise InputError(f"{field}.to", f"{field}.to must be a network with its prefix length (10.1.0.0/16, "
                                            f"no host bits set) or {DEFAULT_ROUTE}, got {to!r}") from None
        if network.version != via.version:
            raise InputError(f"{field}.via", f"{field}.via {via} is IPv{via.version}, {field}.to {network} is "
                                             f"IPv{network.version}")
        to = str(network)
    result: dict[str, Any] = {"to": to, "via": str(via)}
    if route.get("metric") is not None:
        metric = route["metric"]
        if isinstance(metric, bool) or not isinstance(metric, int) or not 0 <= metric <= ROUTE_METRIC_MAX:
            raise InputError(f"{field}.metric", f"{field}.metric must be an integer from 0 to {ROUTE_METRIC_MAX}, "
                                                f"got {metric!r}")
        result["metric"] = metric
    return result


def _nameservers(field: str, nameservers: Any) -> dict[str, list[str]]:
    if not isinstance(nameservers, Mapping):
        raise InputError(field, f"{field} must be a dict with addresses and search, got {nameservers!r}")
    unknown = sorted(set(nameservers) - set(NAMESERVER_KEYS), key=str)
    if unknown:
        raise InputError(field, f"{field} has unknown keys {unknown} (allowed: {', '.join(NAMESERVER_KEYS)})")
    result: dict[str, list[str]] = {}
    addresses = _list(f"{field}.addresses", nameservers.get("addresses") or [])
    limits.NAMESERVERS.check(len(addresses), f"{field}.addresses")
    if addresses:
        result["addresses"] = [str(_address(f"{field}.addresses[{index}]", text))
                               for index, text in enumerate(addresses)]
    search = _list(f"{field}.search", nameservers.get("search") or [])
    limits.SEARCH_DOMAINS.check(len(search), f"{field}.search")
    for index, domain in enumerate(search):
        if not isinstance(domain, str) or not _DNS_NAME.match(domain):
            raise InputError(f"{field}.search[{index}]", f"{field}.search[{index}] must be a DNS name (labels of "
                                                         f"letters, digits and '-', at most 253 characters), "
                                                         f"got {domain!r}")
    if search:
        result["search"] = list(search)
    return result
