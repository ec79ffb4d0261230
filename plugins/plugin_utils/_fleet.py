"""The host states a placement decides on (the ledger's, the inventory's or the task's own), how
to reach the host it chose, and which of them its decision record keeps. Private to the
collection."""

from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.cpu_sets import shared_cpu_set
from ansible_collections.berth.fleet.plugins.module_utils.guest_cpu import guest_cpu_record
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import (
    AUTO_FULL_EXPLAIN_HOSTS,
    Decision,
    needed_host_fields,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import inventory_host_states
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

NOT_TAKEN = ("the ledger did not take its state: its host UUID is another hypervisor's (an identity "
             "conflict) or its URI is refused; playbooks/gather.yml's drift report says which")
# Where host states come from (the ``source`` option): the ledger's last tracker sync plus its
# claims (no hypervisor is contacted: any fleet size), or the inventory's live facts.
SOURCES = ("ledger", "inventory")
DEFAULT_SERVICE_DOWN_TIME_S = 600


@contextlib.contextmanager
def without_gc() -> Iterator[None]:
    """Python's cyclic garbage collector off while a fleet is read and decided on: the host
    states are millions of long-lived objects, which every collection would walk again and
    again as more are made (a fifth of the time at 100,000 hypervisors), and they hold no
    reference cycles. Each task runs in a worker process of its own, so this ends with it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass
class Fleet:
    """The host states of one decision and what the claim and the build need beside them."""

    hosts: HostTable
    generations: list[Any]  # per host: the ledger generation it was read at (None: not in the ledger)
    uris: dict[str, str]  # inventory source only: host -> URI; the ledger's come with build_targets


def read_fleet(settings: Settings, task_vars: Mapping[str, Any], spec: RequestSpec, ledger: Any,
               sync: bool, hosts: Sequence[Mapping[str, Any]] | None = None) -> Fleet:
    """The hosts to decide on: the explicit ``hosts`` (host states given by a task), else per the
    operator's ``source`` the ledger's
    host states (one read, only the fields the request's filters need) or the inventory's live
    facts with the ledger's usage (synced into the ledger first when ``sync``)."""
    if hosts is None and settings.source == "ledger":
        if ledger is None:
            raise InputError("source", "source=ledger reads the hosts from the ledger: set ledger=true, or "
                                       "give hosts (or source=inventory) for a decision without it")
        images = [spec.image_volume] if spec.image_volume else []
        table, generations = ledger.host_table(needed_host_fields(spec), images, spec.requested_networks)
        if not len(table):
            raise InputError("source", f"{ledger.label} knows no hypervisor yet: run playbooks/gather.yml (the "
                                       f"tracker sync) into it first, or give hosts, or source=inventory")
        return Fleet(table, generations, {})
    if hosts is not None:
        states, uris = [dict(state) for state in hosts], {}
    else:
        states, uris = inventory_host_states(dict(task_vars), settings.hypervisor_group)
    if ledger is not None:
        if sync:
            written = {entry["host"] for entry in ledger.sync_hypervisors(
                [{**state, "uri": uris.get(state["host"])} for state in states],
                UriPolicy.from_settings(settings.uri_policy))}
            # A host the ledger did not take (its UUID is another's, or its URI is refused) is
            # no candidate: a claim would land on the other host's row.
            states = [state if state["host"] in written or not state.get("service_up") else
                      {**state, "service_up": False, "down_reason": NOT_TAKEN} for state in states]
        states = ledger.tracker_states(states, needed_host_fields(spec))
    table = HostTable.from_states([HostState.from_dict(state) for state in states])
    return Fleet(table, [state.get("generation") for state in states], uris)


def inventory_target(state: HostState, uri: str | None) -> dict[str, Any]:
    """What a build needs of a host read from the inventory (source=inventory), as the ledger's
    build_targets gives it: {host, hypervisor_uuid, uri, domain_types, cpu, cpu_shared_set}."""
    offered = sorted({triple[1] for triple in state.supported_instances if len(triple) > 1})
    return {"host": state.host, "hypervisor_uuid": state.uuid, "uri": uri, "domain_types": offered,
            "cpu": guest_cpu_record(state.cpu_info), "cpu_shared_set": shared_cpu_set(state.numa_topology)}


def build_target(fleet: Fleet, ledger: Any, state: HostState) -> dict[str, Any]:
    """How to reach a chosen host: {host, hypervisor_uuid, uri, domain_types, cpu,
    cpu_shared_set}, from the inventory's URIs (source=inventory) or the ledger's last sync."""
    if fleet.uris:
        target = inventory_target(state, fleet.uris.get(state.host))
    else:
        target = ledger.build_targets([state.uuid])[state.uuid]
    if not target.get("uri"):
        raise BerthError(f"no URI known for {state.host}: run playbooks/gather.yml to sync it")
    return target


def recorded_states(fleet: Fleet, decision: Decision) -> list[dict[str, Any]]:
    """The host states a decision record keeps: all of them on small fleets (so it replays
    whole), else those the decision names, most telling first (placed, alternates, runners-up,
    closest misses; the ledger keeps the first ledger.decisions.HOST_STATES_KEPT): every host of
    a 100,000-host fleet would be megabytes per launch."""
    table = fleet.hosts
    if len(table) <= AUTO_FULL_EXPLAIN_HOSTS:
        positions: Sequence[int] = range(len(table))
    else:
        rank: dict[str, int] = {}
        named = [[p.host for p in decision.placements],
                 [host for p in decision.placements for host in p.alternates],
                 [runner["host"] for p in decision.placements for runner in p.runners_up],
                 [miss.host for miss in decision.closest_misses]]
        for order, hosts in enumerate(named):
            for host in hosts:
                rank.setdefault(host, order)
        found = [(rank[host], position) for position, host in enumerate(table.column("host")) if host in rank]
        positions = [position for _rank, position in sorted(found)]
    return [{**table[position].to_dict(), "generation": fleet.generations[position]} for position in positions]
