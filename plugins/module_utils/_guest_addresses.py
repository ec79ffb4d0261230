# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which of the addresses libvirt reports for a guest Berth may give as its ``ansible_host``.

A guest is not trusted: what its agent answers, and the address it claims on the wire (the
host's ARP table), are the guest's choice. An address is therefore data to check, never text to
pass on: only a string that parses as an IP address (Python's ipaddress) is kept, rewritten in
its canonical form, so that nothing but digits, dots, colons and hex letters can reach an SSH
command line. The hypervisor's own DHCP leases come first; an address a guest reports is kept
only where it falls in a network the interface it was reported for is attached to.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Iterable, Sequence, Union

# Sources whose addresses the guest chooses: its agent's answer and the address it uses on the
# wire. The lease source is the hypervisor's own dnsmasq, which handed the address out.
GUEST_REPORTED_SOURCES = ("agent", "arp")
# How much of a refused value a reason quotes: enough to recognise it, not a page of it.
_QUOTED_CHARS = 40

IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]  # module_utils run on Python 3.9


def trust_order(sources: Sequence[str]) -> list[str]:
    """``sources`` with the hypervisor's own before those the guest reports, each kind in the
    order given: an answer from the guest never hides a lease."""
    return [source for source in sources if source not in GUEST_REPORTED_SOURCES] + \
        [source for source in sources if source in GUEST_REPORTED_SOURCES]


def parse_networks(ip_elements: Iterable[tuple[str | None, str | None, str | None]]) -> list[IPNetwork]:
    """The networks of a libvirt network's ``<ip address= prefix= netmask=>`` elements (given as
    (address, prefix, netmask) triples); one without a length, or that does not parse, is left
    out rather than guessed."""
    networks = []
    for address, prefix, netmask in ip_elements:
        length = prefix or netmask
        if not address or not length:
            continue
        try:
            networks.append(ipaddress.ip_network(f"{address}/{length}", strict=False))
        except ValueError:
            continue
    return networks


def vetted(addresses: list[dict[str, Any]], source: str,
           networks_by_mac: dict[str, list[IPNetwork]]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the addresses Berth may use, why each other one was refused).

    ``addresses`` are libvirt's answer ({interface, mac, type, address, prefix} each);
    ``networks_by_mac`` the networks each of the domain's interfaces (by MAC) is attached to.
    A kept address is in canonical form with its type read from the address itself (not from
    what the source said) and its prefix an integer or None.
    """
    kept, refused = [], []
    for address in addresses:
        text = address.get("address")
        try:
            parsed = ipaddress.ip_address(text) if isinstance(text, str) else None
        except ValueError:
            parsed = None
        # A zone ("fe80::1%eth0") is free text the guest chose; no reachable address needs it.
        if parsed is None or getattr(parsed, "scope_id", None):
            refused.append(f"{_quoted(text)} is not an IP address")
            continue
        if source in GUEST_REPORTED_SOURCES:
            mac = address.get("mac") or ""
            networks = networks_by_mac.get(mac, [])
            if not any(parsed in network for network in networks):
                where = ", ".join(str(network) for network in networks) or "no network Berth knows of"
                refused.append(f"{parsed} is outside the networks of interface {_quoted(mac)} ({where})")
                continue
        prefix = address.get("prefix")
        kept.append({**address, "address": str(parsed), "type": f"ipv{parsed.version}",
                     "prefix": prefix if isinstance(prefix, int) and 0 <= prefix <= parsed.max_prefixlen else None})
    return kept, refused


def _quoted(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _QUOTED_CHARS else text[:_QUOTED_CHARS] + "..."
