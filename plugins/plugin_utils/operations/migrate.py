"""A migration: one instance to another hypervisor, live or cold, through the one move path
(operations/move.py), its destinations screened for the guest's CPU where it would go live.
What berth.fleet.migrate does (and drain.yml, one instance at a time). Private to the collection."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Mapping

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect, HypervisorDriver
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import NO_HOOKS, Hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.move import (
    MOVABLE_STATES,
    Move,
    connections,
    destination,
    live_cpu_check,
    placed_instance,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


def no_migration_address(_host: str) -> str | None:
    """Without an address for the destination, libvirt reaches it by its hostname."""
    return None


class Migrate:
    """Move the instance ``args["name"]`` (berth.fleet.migrate's validated options; ``settings``
    the operator's) to ``args["to_host"]`` or where the scheduler picks: the CPU screen of a
    live move's candidates, the destination, the move's plan (what it cannot carry refused), and
    in check mode the answer without a claim; else the move.

    ``migration_address(host)``: where the source's QEMU sends memory and disks to reach
    ``host`` (the inventory's berth_migration_address), None for its hostname. ``connect`` opens
    the hypervisors (libvirt's by default); every connection is closed when ``run`` returns."""

    def __init__(self, args: Mapping[str, Any], settings: Settings, ledger: Ledger, task_vars: Mapping[str, Any],
                 check_mode: bool, hooks: Hooks = NO_HOOKS,
                 migration_address: Callable[[str], str | None] = no_migration_address,
                 connect: Connect = Hypervisor) -> None:
        self.args, self.settings, self.ledger, self.task_vars = args, settings, ledger, task_vars
        self.check_mode, self.hooks, self.migration_address, self.connect = check_mode, hooks, migration_address, connect

    def run(self) -> dict[str, Any]:
        args, settings, ledger = self.args, self.settings, self.ledger
        instance = placed_instance(ledger, args["name"], MOVABLE_STATES, "migrate")
        source = instance["host"]
        if not instance["uri"]:
            raise BerthError(f"{ledger.label} has no URI for {source}: run playbooks/gather.yml to sync it")
        with contextlib.ExitStack() as connected:

            def open_host(target: Mapping[str, Any]) -> HypervisorDriver:
                opened = self.connect(target["host"], target["uri"], **connections(args, settings))
                return connected.enter_context(opened)

            src = open_host({"host": source, "uri": instance["uri"]})
            check = live_cpu_check(args, settings, src, instance, open_host)
            target = destination(args, settings, self.task_vars, ledger, instance, screen=check)
            result: dict[str, Any] = {"changed": True, "name": args["name"], "uuid": instance["uuid"],
                                      "from_host": source, "to_host": target["host"], "why": target["why"]}
            if target["warnings"]:
                result["warnings"] = list(target["warnings"])
            if target.get("live_refused"):
                result["live_refused"] = target["live_refused"]
            move = Move(args, settings, ledger, instance, target, self.hooks)
            accepted = check.accepted if check is not None else None
            # The host the CPU screen accepted is the one connection kept for the move itself.
            dst = accepted if accepted is not None and accepted.host == target["host"] else open_host(target)
            move.plan(src, dst, check.defined_xml if check is not None else None)
            if self.check_mode:
                result["msg"] = f"would migrate {args['name']} from {source} to {target['host']} ({target['why']})"
                return result
            moved = move.run(src, dst, self.migration_address(target["host"]))
        warnings = result.get("warnings", []) + moved.pop("warnings")
        moved.pop("instance")
        result.update(moved)
        if warnings:
            result["warnings"] = warnings
        return result
