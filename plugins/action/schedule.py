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
from ansible_collections.berth.fleet.plugins.plugin_utils import race_barrier
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import (
    LEDGER_ARGS,
    BerthAction,
    inventory_host_states,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    ERROR,
    ClaimConflict,
    Ledger,
    run_owner,
)

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_FLAVORS_FILE = os.path.join(COLLECTION_ROOT, "playbooks", "vars", "flavors.yml")
# A claim that finds a host already taken decides again with fresh usage, this many times.
CLAIM_ATTEMPTS = 5
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
        flavor = flavor_option(args)
        states, uris = _host_states(args, task_vars)
        spec_args = request_options(args)

        ledger = Ledger(args["ledger_url"]).open() if args["ledger"] else None
        group_name = _ledger_group_name(args["server_group"], ledger)
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

        owner = run_owner()
        for attempt in range(1, CLAIM_ATTEMPTS + 1):
            views = ledger.tracker_states(states) if ledger else states
            if group_name:
                # Read again on every attempt: a lost race may have been to this very group.
                spec_args["server_group"] = server_group_from_dict(ledger.scheduler_group(group_name))
            decision = decide(views, flavor, len(missing), spec_args)
            result["decision"] = decision.to_dict()
            result["summary"] = decision.summary

            def record(outcome: str) -> None:
                # What the engine needs to replay this decision: request, host states, answer.
                if ledger and not self._task.check_mode:
                    request = {**spec_args, "flavor": flavor.to_dict(), "count": len(missing)}
                    if isinstance(request.get("server_group"), ServerGroup):
                        request["server_group"] = request["server_group"].to_dict()
                    result["decision_id"] = ledger.record_decision(
                        args["name"], owner, request, views, result["decision"], outcome)

            if not decision.ok:
                record("no_valid_host")
                result.update(failed=True, msg=failure_message(decision))
                return result
            generations = {view.get("uuid"): view.get("generation") for view in views}
            placements = [
                {"name": name, "host": p.host, "nodename": p.nodename, "hypervisor_uuid": p.uuid,
                 "uri": uris.get(p.host), "alternates": p.alternates, "flavor": flavor.to_dict(),
                 "vcpus": flavor.vcpus, "memory_mb": flavor.memory_mb, "generation": generations.get(p.uuid)}
                for name, p in zip(missing, decision.placements)
            ]
            # Without the ledger nothing is claimed: a "what if" changes nothing.
            result["changed"] = ledger is not None
            if self._task.check_mode or ledger is None:
                result["placements"] = [{**p, "uuid": None, "state": "PLANNED"} for p in placements]
                return result
            if attempt == 1:
                race_barrier.wait(race_barrier.BEFORE_CLAIM)
            try:
                rows = ledger.claim(placements, flavor, owner, args["lease_seconds"], server_group=group_name)
            except ClaimConflict as conflict:
                record("claim_conflict")
                result.setdefault("conflicts", []).append(str(conflict))
                if attempt == CLAIM_ATTEMPTS:
                    result.update(failed=True, msg=f"no valid host: every claim lost a race ({conflict})")
                    return result
                continue
            record("claimed")
            race_barrier.wait(race_barrier.AFTER_CLAIM)
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
    if value is None or isinstance(value, str):
        return None  # a name is the ledger's group: _ledger_group_name looks it up
    if isinstance(value, dict):
        return server_group_from_dict(value)
    raise InputError("server_group", f"server_group must be a ledger group name or a mapping {{name, policy, rules, hosts, members}}, "
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


def flavor_option(args: dict[str, Any]) -> Flavor:
    """The task's ``flavor``: a name from ``flavors_file`` (default the shipped one) or a dict of sizes."""
    return resolve_flavor(args["flavor"], _load_flavors(args["flavors_file"] or DEFAULT_FLAVORS_FILE))


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
    return inventory_host_states(task_vars, args["hypervisor_group"])


def _ledger_group_name(server_group: Any, ledger: Ledger | None) -> str | None:
    """A server group given by name lives in the ledger: check it exists before deciding."""
    if server_group is None or isinstance(server_group, dict):
        return None
    if not isinstance(server_group, str) or not server_group:
        raise InputError("server_group", f"server_group must be a group name or a dict, got {server_group!r}")
    if ledger is None:
        raise InputError("server_group", "a server_group given by name needs the ledger (ledger=true); "
                                         "without it pass the group as a dict")
    if ledger.scheduler_group(server_group) is None:
        raise InputError("server_group", f"no server group named {server_group!r} in the ledger: create it "
                                         f"with berth.fleet.server_group first")
    return server_group
