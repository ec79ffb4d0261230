"""What the placement actions (schedule, capacity, migrate) share: the flavor and request
options, where the host states come from, and how a failed decision reads. Private to the
collection."""

from __future__ import annotations

import contextlib
import gc
import os
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import yaml

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.guest_cpu import guest_cpu_record
from ansible_collections.berth.fleet.plugins.module_utils.request import resolve_flavor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import (
    AUTO_FULL_EXPLAIN_HOSTS,
    Decision,
    needed_host_fields,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
    Flavor,
    HostState,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import WEIGHERS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import REQUEST_REASONS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
    DEFAULT_PROJECT_ID,
    RequestSpec,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.server_group import (
    ServerGroup,
    server_group_from_dict,
)
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import inventory_host_states

NOT_TAKEN = ("the ledger did not take its state: its host UUID is another hypervisor's (an identity "
             "conflict) or its URI is refused; playbooks/gather.yml's drift report says which")
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_FLAVORS_FILE = os.path.join(COLLECTION_ROOT, "playbooks", "vars", "flavors.yml")
# Where host states come from (the ``source`` option): the ledger's last tracker sync plus its
# claims (no hypervisor is contacted: any fleet size), or the inventory's live facts.
SOURCES = ("ledger", "inventory")
DEFAULT_SERVICE_DOWN_TIME_S = 600
# Nova's option names, passed to the engine's RequestSpec as they are.
REQUEST_OPTIONS = (
    "enabled_filters", "weighers", "host_subset_size", "seed", "max_attempts", "ignore_hosts",
    "force_hosts", "force_nodes", "driver", "availability_zone", "default_availability_zone",
    "image_id", "image_properties", "scheduler_hints", "retry_hosts", "max_instances_per_host",
    "max_io_ops_per_host", "isolated_hosts", "isolated_images",
    "restrict_isolated_hosts_to_isolated_images", "metrics_weight_setting",
    "metrics_weight_of_unavailable", "explain", "engine", "service_down_time", "image_volume",
    "requested_networks", "project_id", "metrics_required", "image_props_weight_setting",
    "aggregate_image_properties_isolation_namespace",
    "aggregate_image_properties_isolation_separator", "pci_alias", "enabled_mdev_types",
)
# The operator's device configuration (doc fragment berth.fleet.devices): it decides which host
# devices a guest may get, so it comes from each run's own settings, never from a requester's
# variables or the ledger's copy of a launch's request.
DEVICE_OPTIONS = ("pci_alias", "enabled_mdev_types")
MULTIPLIER_OPTIONS = tuple(sorted(weigher.multiplier_option for weigher in WEIGHERS.values()))


def flavor_option(args: Mapping[str, Any]) -> Flavor:
    """The task's ``flavor``: a name from ``flavors_file`` (default the shipped one) or a dict of sizes."""
    return resolve_flavor(args["flavor"], _load_flavors(args.get("flavors_file") or DEFAULT_FLAVORS_FILE))


def _load_flavors(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle) or {}
    except OSError as exc:
        raise InputError("flavors_file", f"cannot read flavors_file {path}: {exc.strerror}") from exc
    flavors = data.get("berth_flavors") if isinstance(data, dict) else None
    if not isinstance(flavors, dict):
        raise InputError("flavors_file", f"flavors_file {path} must hold a mapping 'berth_flavors'")
    return flavors


def request_options(args: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's request options from the module's arguments (Nova's names on both sides)."""
    # What the ledger keeps of the request (each decision records it; each instance its project).
    for key in ("scheduler_hints", "image_properties"):
        limits.check_mapping_size(key, args.get(key))
    for key in ("project_id", "availability_zone"):
        limits.check_name(key, args.get(key))
    options = {key: args[key] for key in REQUEST_OPTIONS if args.get(key) is not None}
    multipliers = {key: args[key] for key in MULTIPLIER_OPTIONS if args.get(key) is not None}
    if multipliers:
        options["weight_multipliers"] = multipliers
    group = server_group_option(args.get("server_group"))
    if group is not None:
        options["server_group"] = group
    return options


def server_group_option(value: Any) -> ServerGroup | None:
    """The `server_group` option in its dict form ({name, policy, rules, hosts, members}),
    for "what if" runs and explicit use; a name is the ledger's group (read by the caller)."""
    if value is None or isinstance(value, str):
        return None
    if isinstance(value, dict):
        return server_group_from_dict(value)
    raise InputError("server_group", f"server_group must be a ledger group name or a mapping {{name, policy, rules, hosts, members}}, "
                                     f"got {type(value).__name__}")


def ledger_group(server_group: Any, ledger: Any) -> dict[str, Any] | None:
    """A server group given by name lives in the ledger: its engine form, checked to exist."""
    if server_group is None or isinstance(server_group, dict):
        return None
    if not isinstance(server_group, str) or not server_group:
        raise InputError("server_group", f"server_group must be a group name or a dict, got {server_group!r}")
    if ledger is None:
        raise InputError("server_group", "a server_group given by name needs the ledger (ledger=true); "
                                         "without it pass the group as a dict")
    group = ledger.scheduler_group(server_group)
    if group is None:
        raise InputError("server_group", f"no server group named {server_group!r} in {ledger.label}: create it "
                                         f"with berth.fleet.server_group first")
    return group


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


def read_fleet(args: Mapping[str, Any], task_vars: Mapping[str, Any], spec: RequestSpec, ledger: Any,
               sync: bool) -> Fleet:
    """The hosts to decide on: the explicit ``hosts`` list, else per ``source`` the ledger's
    host states (one read, only the fields the request's filters need) or the inventory's live
    facts with the ledger's usage (synced into the ledger first when ``sync``)."""
    if args.get("hosts") is None and args.get("source", "ledger") == "ledger":
        if ledger is None:
            raise InputError("source", "source=ledger reads the hosts from the ledger: set ledger=true, or "
                                       "give hosts (or source=inventory) for a decision without it")
        images = [spec.image_volume] if spec.image_volume else []
        table, generations = ledger.host_table(needed_host_fields(spec), images, spec.requested_networks)
        if not len(table):
            raise InputError("source", f"{ledger.label} knows no hypervisor yet: run playbooks/gather.yml (the "
                                       f"tracker sync) into it first, or give hosts, or source=inventory")
        return Fleet(table, generations, {})
    if args.get("hosts") is not None:
        states, uris = [dict(state) for state in args["hosts"]], {}
    else:
        states, uris = inventory_host_states(dict(task_vars), args.get("hypervisor_group") or "hypervisors")
    if ledger is not None:
        if sync:
            written = {entry["host"] for entry in ledger.sync_hypervisors(
                [{**state, "uri": uris.get(state["host"])} for state in states],
                UriPolicy.from_settings(args.get("uri_policy")))}
            # A host the ledger did not take (its UUID is another's, or its URI is refused) is
            # no candidate: a claim would land on the other host's row.
            states = [state if state["host"] in written or not state.get("service_up") else
                      {**state, "service_up": False, "down_reason": NOT_TAKEN} for state in states]
        states = ledger.tracker_states(states, needed_host_fields(spec))
    table = HostTable.from_states([HostState.from_dict(state) for state in states])
    return Fleet(table, [state.get("generation") for state in states], uris)


# Of a launch's request options, those that describe the run rather than the instance, which
# the instance does not record: the hosts it forced or avoided (Nova resets them for every move,
# and a move avoids its source), how the answer is computed and worded, the staleness age (each
# run brings its own) and the image volume (a move carries its disks, it needs no image there).
NOT_RECORDED = ("force_hosts", "force_nodes", "ignore_hosts", "retry_hosts", "explain", "engine",
                "service_down_time", "image_volume", *DEVICE_OPTIONS)


def launch_request(args: Mapping[str, Any], spec_args: Mapping[str, Any], flavor: Flavor) -> dict[str, Any]:
    """What an instance records of the request it was launched with (the ledger's
    instances.request), as Nova keeps the boot's RequestSpec: its flavor (with extra specs), the
    request options of the launch (``spec_args``, from request_options) less NOT_RECORDED, and
    its server group as the launch named it (a ledger group by name: its members are the
    ledger's; a group given as a dict, as given)."""
    recorded = {key: value for key, value in spec_args.items() if key not in NOT_RECORDED and key != "server_group"}
    recorded["flavor"] = flavor.to_dict()
    if args.get("server_group") is not None:
        recorded["server_group"] = args["server_group"]
    return recorded


def device_options(args: Mapping[str, Any]) -> dict[str, Any]:
    """The run's own DEVICE_OPTIONS, those the task sets."""
    return {key: args[key] for key in DEVICE_OPTIONS if args.get(key) is not None}


def move_request(instance: Mapping[str, Any], flavor: Flavor, service_down_time_s: int,
                 ignore_hosts: Sequence[str] = (), current_group: Mapping[str, Any] | None = None,
                 devices: Mapping[str, Any] | None = None) -> RequestSpec:
    """The request of a move (migrate, drain, resize) of one instance, for ``flavor`` (its own, or
    the new one of a resize): the request the instance recorded at launch (launch_request),
    with ``ignore_hosts`` (the source) and this run's staleness age, and its server group as
    it is now (``current_group``: the ledger's group with the moving instance left out, so that
    the scheduler sees what the claim will check). An instance without a recorded request
    (launched before Berth recorded them, or adopted) moves with its project and image
    properties only. ``devices``: the moving run's DEVICE_OPTIONS (device_options), which a
    recorded request never supplies."""
    recorded = dict(instance.get("request") or {})
    group: ServerGroup | None = None
    if current_group is not None:
        group = server_group_from_dict(current_group)
    elif isinstance(recorded.get("server_group"), dict):
        group = server_group_from_dict(recorded["server_group"])
    if not recorded:
        recorded = {"project_id": instance.get("project_id") or DEFAULT_PROJECT_ID,
                    "image_properties": dict(instance.get("image_properties") or {})}
    # Not request options: the flavor and group (above) and the build record (what the domain was defined from).
    options = {key: value for key, value in recorded.items()
               if key not in ("flavor", "server_group", "build", *DEVICE_OPTIONS)}
    options.update(devices or {})
    return RequestSpec(flavor=flavor, count=1, ignore_hosts=list(ignore_hosts), service_down_time=service_down_time_s,
                       server_group=group, **options)


def recorded_constraints(decision: Decision) -> str | None:
    """What the instance's recorded request turned hosts down for in ``decision``, as the
    explanation words it ('2 not in availability zone az1, 1 with different_host instances'),
    or None when nothing it asked for removed a host."""
    removed = [f"{item['count']} {item['phrase']}" for item in decision.reasons
               if item["reason"] in REQUEST_REASONS]
    return ", ".join(removed) or None


def build_target(fleet: Fleet, ledger: Any, state: HostState) -> dict[str, Any]:
    """How to reach a chosen host: {host, hypervisor_uuid, uri, domain_types}, from the
    inventory's URIs (source=inventory) or the ledger's last sync."""
    if fleet.uris:
        offered = sorted({triple[1] for triple in state.supported_instances if len(triple) > 1})
        target = {"host": state.host, "hypervisor_uuid": state.uuid, "uri": fleet.uris.get(state.host),
                  "domain_types": offered, "cpu": guest_cpu_record(state.cpu_info)}
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


def failure_message(decision: Decision) -> str:
    """'no valid host: <summary>. hv1: <why>; ...', every host on small fleets, else the
    closest misses (the counts per reason are in the summary already)."""
    if decision.rejections is not None:
        named, label = decision.rejections, ""
    else:
        named, label = decision.closest_misses, "closest misses: "
    if not named:
        return f"no valid host: {decision.summary}"
    reasons = "; ".join(f"{rejection.host}: {rejection.message()}" for rejection in named)
    return f"no valid host: {decision.summary}. {label}{reasons}"
