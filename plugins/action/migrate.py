"""berth.fleet.migrate: move an instance to another hypervisor (controller side)."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.request import dns_label
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule
from ansible_collections.berth.fleet.plugins.plugin_utils import _move
from ansible_collections.berth.fleet.plugins.plugin_utils._placement import (
    build_target,
    failure_message,
    move_request,
    read_fleet,
    without_gc,
)
from ansible_collections.berth.fleet.plugins.plugin_utils._progress import Progress
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    ACTIVE,
    STOPPED,
    ClaimConflict,
    Ledger,
    instance_flavor,
    run_owner,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.operations import hooks

# A paused domain would need a live migration that keeps it paused; resume it first.
MOVABLE_STATES = (ACTIVE, STOPPED)


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        with without_gc():
            return self._run(args, task_vars)

    def _run(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        dns_label("name", args["name"])
        ledger = Ledger(args["ledger_url"]).open()
        rows = ledger.instances([args["name"]])
        if not rows:
            raise InputError("name", f"no instance named {args['name']} in the ledger")
        instance = rows[0]
        if instance["state"] not in MOVABLE_STATES:
            raise InputError("name", f"{args['name']} is {instance['state']}, only "
                                     f"{' and '.join(MOVABLE_STATES)} instances migrate")
        source = instance["host"]
        target = self._destination(args, task_vars, ledger, instance)
        result: dict[str, Any] = {"changed": True, "name": args["name"], "uuid": instance["uuid"],
                                  "from_host": source, "to_host": target["host"], "why": target["why"]}
        if not instance["uri"]:
            raise BerthError(f"the ledger has no URI for {source}: run playbooks/gather.yml to sync it")
        step = Progress().of(args["name"], source)
        connect = {"timeout_s": args["timeout"], "transfer_timeout_s": args["transfer_timeout"]}
        with Hypervisor(source, instance["uri"], **connect) as src, \
                Hypervisor(target["host"], target["uri"], **connect) as dst:
            disks, volumes = _move.movable_volumes(src, dst, instance, args["storage_pool"])
            if self._task.check_mode:
                result["msg"] = f"would migrate {args['name']} from {source} to {target['host']} ({target['why']})"
                return result
            try:
                claim = ledger.claim_move(instance["uuid"], target["hypervisor_uuid"], run_owner())
            except ClaimConflict as conflict:
                raise BerthError(f"cannot claim {target['host']} for {args['name']}: {conflict.reason}") from conflict
            step(f"claimed {target['host']} ({target['why']})")
            try:
                hostvars = task_vars.get("hostvars", {})
                address = (hostvars.get(target["host"]) or {}).get(
                    "berth_migration_address", task_vars.get("berth_migration_address"))
                result.update(_move.move(src, dst, instance["uuid"], args["name"], args["mode"], args["storage_pool"],
                                         address, disks, volumes, step, hooks.installed()))
            except Exception as exc:
                # The domain runs on the source again: the destination's claim goes back.
                ledger.release_claim(claim["id"])
                step(f"FAILED, stays here: {exc}")
                raise
        # The source is released only now that the domain runs on the destination.
        _instance, warnings = _move.finish(ledger, instance, claim["id"], result, args["storage_pool"], volumes)
        if warnings:
            result["warnings"] = warnings
        step(f"moved to {target['host']} ({result['mode']})")
        return result

    def _destination(self, args: dict[str, Any], task_vars: dict[str, Any], ledger: Ledger,
                     instance: dict[str, Any]) -> dict[str, Any]:
        """The named host, checked; else the scheduler's pick among the others (never the
        source), decided on the ledger's host states with their claims as usage (a drain moves
        instances one after the other: each migration moved its claim). Returns the build
        target ({host, hypervisor_uuid, uri, ...}) with why it was chosen."""
        source = instance["host"]
        spec = move_request(instance, instance_flavor(instance), args["service_down_time"], [source])
        fleet = read_fleet({**args, "hosts": None}, task_vars, spec, ledger, sync=False)
        names = list(fleet.hosts.column("host"))
        if args["to_host"]:
            target = args["to_host"]
            if target == source:
                raise InputError("to_host", f"{args['name']} already runs on {source}: name another host")
            if target not in names:
                raise InputError("to_host", f"unknown host {target} (hypervisors: {', '.join(sorted(names))})")
            state = fleet.hosts[names.index(target)]
            if not state.service_up:
                raise BerthError(f"{target} does not answer: {state.down_reason or 'down'}")
            chosen, why = state, "named by to_host"
        else:
            decision = schedule(fleet.hosts, spec)
            if not decision.ok:
                raise BerthError(f"cannot migrate {args['name']}: {failure_message(decision)}")
            chosen = fleet.hosts[names.index(decision.placements[0].host)]
            why = f"chosen by the scheduler: {decision.summary}"
        return {**build_target(fleet, ledger, chosen), "why": why}
