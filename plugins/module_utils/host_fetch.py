"""Talking to hypervisors: each one's raw facts, or why it did not answer, fetched in parallel.
The only I/O of the host facts: host_facts turns what this returns into host states, purely, so
that the inventory plugin can cache this step.

Python 3.9: the hypervisor_facts module ships this file to hypervisors.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid as uuid_lib
from typing import Any, Dict, Mapping, Optional
from urllib.parse import urlsplit

from ansible_collections.berth.fleet.plugins.module_utils import proc_stats
from ansible_collections.berth.fleet.plugins.module_utils._untrusted_text import failure_reason
from ansible_collections.berth.fleet.plugins.module_utils.host_facts import ip_address_text, is_local
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import (
    KEEPALIVE_COUNT,
    KEEPALIVE_INTERVAL_S,
    Hypervisor,
)
from ansible_collections.berth.fleet.plugins.module_utils.pool_images import image_refusals


def uri_address(uri: str) -> Optional[str]:
    """The address of a URI's host: itself if it is one, else as this machine resolves the name
    (the first answer); None for a URI without a host or a name that does not resolve."""
    hostname = urlsplit(uri).hostname
    if not hostname:
        return None
    address = ip_address_text(hostname)
    if address is not None:
        return address
    try:
        return ip_address_text(socket.getaddrinfo(hostname, None, type=socket.SOCK_STREAM)[0][4][0])
    except (OSError, IndexError, UnicodeError):
        return None


def fetch_one(name: str, uri: str, pool_name: str, timeout_s: float,
              connect: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """{'facts': raw facts} or {'down_reason': why}, with when; never raises for a hypervisor.

    ``connect`` may hold username, password, keepalive_interval, keepalive_count and
    uri_policy (a UriPolicy; the strict default without it).
    """
    return fetch_over(hypervisor_connection(name, uri, timeout_s, connect), pool_name)


def fetch_over(connection: Any, pool_name: str) -> Dict[str, Any]:
    """``fetch_one``'s outcome over ``connection`` (a hypervisor_driver.HypervisorDriver, not
    opened yet). Whatever opening it, asking it or reading its answers raises - a libvirt error,
    a timeout, XML that does not parse, a number that is none - makes this host down with why
    (failure_reason: short and printable, whatever the host sent), so that one hostile or broken
    hypervisor stops nobody else's sync or inventory."""
    gathered_at = time.time()
    try:
        with connection as hv:
            return fetch_from(hv, pool_name, gathered_at)
    except Exception as exc:  # one host's answers, whatever they broke: never the run's
        return {"down_reason": failure_reason(connection.host, exc), "gathered_at": gathered_at}


def hypervisor_connection(name: str, uri: str, timeout_s: float,
                          connect: Optional[Mapping[str, Any]] = None) -> Hypervisor:
    """The connection ``fetch_one`` makes (not opened yet: ``with hypervisor_connection(...) as hv``)."""
    connect = connect or {}
    return Hypervisor(name, uri, timeout_s, username=connect.get("username"), password=connect.get("password"),
                      keepalive_interval_s=connect.get("keepalive_interval", KEEPALIVE_INTERVAL_S),
                      keepalive_count=connect.get("keepalive_count", KEEPALIVE_COUNT),
                      uri_policy=connect.get("uri_policy"))


def fetch_from(hv: Hypervisor, pool_name: str, gathered_at: float) -> Dict[str, Any]:
    """``fetch_one``'s outcome over a connection already open (raises HypervisorError)."""
    name, uri = hv.host, hv.uri
    facts = hv.facts(pool_name)
    facts["image_refusals"] = image_refusals(hv, pool_name, facts["volumes"], name)
    facts["metrics"] = dict(facts.pop("cpu_times"))
    facts["memory_source"] = "libvirt" if facts["memory"]["free_mb"] is not None else "getInfo"
    if is_local(uri):
        # The machine itself: /proc is the truth, and it has the load libvirt does not report.
        facts["memory"] = proc_stats.meminfo()
        facts["metrics"] = {**proc_stats.cpu_times(), **proc_stats.loadavg()}
        facts["memory_source"] = "proc"
    facts["uri_uuid"] = str(uuid_lib.uuid5(uuid_lib.NAMESPACE_URL, uri.split("?", 1)[0]))
    facts["host_ip"] = uri_address(uri)
    return {"facts": facts, "gathered_at": gathered_at}


def fetch(targets: Mapping[str, str], pool_name: str, timeout_s: float,
          connect: Optional[Mapping[str, Any]] = None) -> Dict[str, Dict[str, Any]]:
    """Fetch every hypervisor at once, ``targets`` being {name: connection URI}.

    Each libvirt call has its own timeout; a host gets twice that for its connection plus all
    its calls before it is reported down, so the whole fetch ends within about 2 x timeout.
    """
    results: Dict[str, Dict[str, Any]] = {}
    lock = threading.Lock()

    def work(name: str, uri: str) -> None:
        outcome = fetch_one(name, uri, pool_name, timeout_s, connect)
        with lock:
            results[name] = outcome

    threads = [threading.Thread(target=work, args=(name, uri), name=f"gather-{name}", daemon=True)
               for name, uri in targets.items()]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 2 * timeout_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    with lock:
        return {
            name: results.get(name) or {"down_reason": f"{name}: no answer within {2 * timeout_s:g} s",
                                        "gathered_at": time.time()}
            for name in targets
        }
