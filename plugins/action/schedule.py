"""berth.fleet.schedule: decide where instances go and claim their resources (controller side)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import yaml

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import instance_names, resolve_flavor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec, schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import HostState
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
        "ram_weight_multiplier": {"type": "float"},
        "host_subset_size": {"type": "int", "default": 1},
        "seed": {"type": "int"},
        "max_attempts": {"type": "int", "default": 3},
        "ignore_hosts": {"type": "list", "elements": "str", "default": []},
        "force_hosts": {"type": "list", "elements": "str", "default": []},
        "force_nodes": {"type": "list", "elements": "str", "default": []},
        "lease_seconds": {"type": "int", "default": 3600},
        "server_group": {"type": "raw"},
        **LEDGER_ARGS,
    }

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        names = instance_names(args["name"], args["count"])
        flavor = resolve_flavor(args["flavor"], _load_flavors(args["flavors_file"] or DEFAULT_FLAVORS_FILE))
        states, uris = _host_states(args, task_vars)
        spec_args = {
            key: args[key]
            for key in ("enabled_filters", "weighers", "host_subset_size", "seed", "max_attempts",
                        "ignore_hosts", "force_hosts", "force_nodes")
            if args[key] is not None
        }
        if args["ram_weight_multiplier"] is not None:
            spec_args["weight_multipliers"] = {"ram_weight_multiplier": args["ram_weight_multiplier"]}

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
                spec_args["server_group"] = ledger.scheduler_group(group_name)
            spec = RequestSpec(flavor=flavor, count=len(missing), **_engine_args(spec_args))
            decision = schedule([HostState.from_dict(view) for view in views], spec)
            result["decision"] = decision.to_dict()
            result["summary"] = decision.summary

            def record(outcome: str) -> None:
                # What the engine needs to replay this decision: request, host states, answer.
                if ledger and not self._task.check_mode:
                    request = {**_engine_args(spec_args), "flavor": flavor.to_dict(), "count": len(missing)}
                    result["decision_id"] = ledger.record_decision(
                        args["name"], owner, request, views, result["decision"], outcome)

            if not decision.ok:
                record("no_valid_host")
                reasons = "; ".join(f"{r.host}: {r.message()}" for r in decision.rejections)
                result.update(failed=True, msg=f"no valid host: {decision.summary}. {reasons}")
                return result
            generations = {view.get("uuid"): view.get("generation") for view in views}
            placements = [
                {"name": name, "host": p.host, "nodename": p.nodename, "hypervisor_uuid": p.uuid,
                 "uri": uris.get(p.host), "alternates": p.alternates, "flavor": flavor.to_dict(),
                 "vcpus": flavor.vcpus, "memory_mb": flavor.memory_mb, "generation": generations.get(p.uuid)}
                for name, p in zip(missing, decision.placements)
            ]
            result["changed"] = True
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


def _engine_args(spec_args: dict[str, Any]) -> dict[str, Any]:
    """The request options this engine knows (server-group filters may not have landed yet)."""
    known = {field.name for field in dataclasses.fields(RequestSpec)}
    return {key: value for key, value in spec_args.items() if key in known}
