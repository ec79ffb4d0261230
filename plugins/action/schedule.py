"""berth.fleet.schedule: decide where instances go and claim their resources (controller side)."""

from __future__ import annotations

import os
from typing import Any

import yaml

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import instance_names, resolve_flavor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import (
    DRIVERS,
    ENGINES,
    EXPLAIN_MODES,
    Decision,
    RequestSpec,
    schedule,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor, HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import WEIGHERS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.server_group import (
    ServerGroup,
    server_group_from_dict,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import LEDGER_ARGS, BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    ERROR,
    ClaimConflict,
    Ledger,
    run_owner,
)

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_FLAVORS_FILE = os.path.join(COLLECTION_ROOT, "playbooks", "vars", "flavors.yml")
# A claim that finds a host already taken decides again with fresh usage, this many times.
CLAIM_ATTEMPTS = 3
# Nova's option names, passed to the engine's RequestSpec as they are.
REQUEST_OPTIONS = (
    "enabled_filters", "weighers", "host_subset_size", "seed", "max_attempts", "ignore_hosts",
    "force_hosts", "force_nodes", "driver", "availability_zone", "default_availability_zone",
    "image_id", "image_properties", "scheduler_hints", "retry_hosts", "max_instances_per_host",
    "max_io_ops_per_host", "isolated_hosts", "isolated_images",
    "restrict_isolated_hosts_to_isolated_images", "metrics_weight_setting",
    "metrics_weight_of_unavailable", "explain", "engine",
)
MULTIPLIER_OPTIONS = tuple(sorted(weigher.multiplier_option for weigher in WEIGHERS.values()))


class ActionModule(BerthAction):
    ARGUMENT_SPEC = {
        "name": {"type": "str", "required": True},
        "count": {"type": "int", "default": 1},
        "flavor": {"type": "raw", "required": True},
        "flavors_file": {"type": "path"},
        "hosts": {"type": "list", "elements": "dict"},
        "hypervisor_group": {"type": "str", "default": "hypervisors"},
        "enabled_filters": {"type": "list", "elements": "str"},
        "weighers": {"type": "list", "elements": "str"},
        **{option: {"type": "float"} for option in MULTIPLIER_OPTIONS},
        "host_subset_size": {"type": "int", "default": 1},
        "seed": {"type": "int"},
        "max_attempts": {"type": "int", "default": 3},
        "ignore_hosts": {"type": "list", "elements": "str", "default": []},
        "force_hosts": {"type": "list", "elements": "str", "default": []},
        "force_nodes": {"type": "list", "elements": "str", "default": []},
        "driver": {"type": "str", "default": "filter_scheduler", "choices": list(DRIVERS)},
        "availability_zone": {"type": "str"},
        "default_availability_zone": {"type": "str", "default": "nova"},
        "image_id": {"type": "str"},
        "image_properties": {"type": "dict", "default": {}},
        "scheduler_hints": {"type": "dict", "default": {}},
        "server_group": {"type": "raw"},
        "retry_hosts": {"type": "list", "elements": "str", "default": []},
        "max_instances_per_host": {"type": "int", "default": 50},
        "max_io_ops_per_host": {"type": "int", "default": 8},
        "isolated_hosts": {"type": "list", "elements": "str", "default": []},
        "isolated_images": {"type": "list", "elements": "str", "default": []},
        "restrict_isolated_hosts_to_isolated_images": {"type": "bool", "default": True},
        "metrics_weight_setting": {"type": "list", "elements": "str", "default": []},
        "metrics_weight_of_unavailable": {"type": "float", "default": -10000.0},
        "explain": {"type": "str", "default": "auto", "choices": list(EXPLAIN_MODES)},
        "engine": {"type": "str", "default": "auto", "choices": list(ENGINES)},
        "lease_seconds": {"type": "int", "default": 3600},
        **LEDGER_ARGS,
    }

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        names = instance_names(args["name"], args["count"])
        flavor = resolve_flavor(args["flavor"], _load_flavors(args["flavors_file"] or DEFAULT_FLAVORS_FILE))
        states, uris = _host_states(args, task_vars)
        spec_args = request_options(args)

        ledger = Ledger(args["ledger_url"]).open() if args["ledger"] else None
        existing = {row["name"]: row for row in ledger.instances(names)} if ledger else {}
        # ACTIVE and BUILDING instances are there already: a second launch leaves them alone.
        missing = [name for name in names if name not in existing or existing[name]["state"] == ERROR]
        result: dict[str, Any] = {
            "changed": False, "flavor": flavor.to_dict(), "placements": [],
            "existing": [existing[name] for name in names if name not in missing],
        }
        if not missing:
            result["summary"] = f"all {len(names)} instances named {args['name']} exist already"
            return result
        if ledger and not self._task.check_mode:
            ledger.sync_hypervisors(states)

        for attempt in range(1, CLAIM_ATTEMPTS + 1):
            views = ledger.tracker_states(states) if ledger else states
            decision = decide(views, flavor, len(missing), spec_args)
            result["decision"] = decision.to_dict()
            result["summary"] = decision.summary
            if not decision.ok:
                result.update(failed=True, msg=failure_message(decision))
                return result
            placements = [
                {"name": name, "host": p.host, "nodename": p.nodename, "hypervisor_uuid": p.uuid,
                 "uri": uris.get(p.host), "alternates": p.alternates, "flavor": flavor.to_dict(),
                 "vcpus": flavor.vcpus, "memory_mb": flavor.memory_mb}
                for name, p in zip(missing, decision.placements)
            ]
            # Without the ledger nothing is claimed: a "what if" changes nothing.
            result["changed"] = ledger is not None
            if self._task.check_mode or ledger is None:
                result["placements"] = [{**p, "uuid": None, "state": "PLANNED"} for p in placements]
                return result
            try:
                rows = ledger.claim(placements, flavor, run_owner(), args["lease_seconds"])
            except ClaimConflict as conflict:
                result.setdefault("conflicts", []).append(str(conflict))
                if attempt == CLAIM_ATTEMPTS:
                    result.update(failed=True, msg=f"no valid host: every claim lost a race ({conflict})")
                    return result
                continue
            result["placements"] = [
                {**p, "uuid": row["uuid"], "state": row["state"]} for p, row in zip(placements, rows)
            ]
            return result
        raise AssertionError("unreachable")


def request_options(args: dict[str, Any]) -> dict[str, Any]:
    """The engine's request options from the module's arguments (Nova's names on both sides)."""
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
    for "what if" runs and explicit use; null means no group."""
    if value is None:
        return None
    if isinstance(value, dict):
        return server_group_from_dict(value)
    raise InputError("server_group", f"server_group must be a mapping {{name, policy, rules, hosts, members}}, "
                                     f"got {type(value).__name__}")


def decide(states: list[dict[str, Any]], flavor: Flavor, count: int, options: dict[str, Any]) -> Decision:
    """The pure part of the module: host state dicts and options in, the engine's decision out."""
    spec = RequestSpec(flavor=flavor, count=count, **options)
    return schedule([HostState.from_dict(state) for state in states], spec)


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


def _host_states(args: dict[str, Any], task_vars: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The explicit ``hosts`` list, else the berth_host_state of each inventory hypervisor."""
    if args["hosts"] is not None:
        return [dict(state) for state in args["hosts"]], {}
    group = args["hypervisor_group"]
    members = task_vars.get("groups", {}).get(group)
    if not members:
        raise InputError(
            "hypervisor_group",
            f"the inventory has no hosts in group {group!r}: point -i at a berth.fleet.hypervisors "
            "source, or pass hosts",
        )
    hostvars = task_vars["hostvars"]
    states, uris = [], {}
    for host in members:
        variables = hostvars[host]
        if "berth_host_state" not in variables:
            raise InputError(
                "hypervisor_group",
                f"host {host} in group {group!r} has no berth_host_state (not from berth.fleet.hypervisors)",
            )
        states.append(dict(variables["berth_host_state"]))
        uris[host] = variables.get("berth_libvirt_uri")
    return states, uris
