"""berth.fleet.migrate: move an instance to another hypervisor (controller side).
An adapter: the work is plugins/plugin_utils/operations/move.py."""

from __future__ import annotations

import contextlib
from typing import Any, Mapping

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.request import dns_label
from ansible_collections.berth.fleet.plugins.plugin_utils import hooks
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import without_gc
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
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


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        with without_gc():
            return self._run(args, task_vars)

    def _run(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        dns_label("name", args["name"])
        ledger = Ledger(args["ledger_url"]).open()
        instance = placed_instance(ledger, args["name"], MOVABLE_STATES, "migrate")
        source = instance["host"]
        if not instance["uri"]:
            raise BerthError(f"{ledger.label} has no URI for {source}: run playbooks/gather.yml to sync it")
        settings = Settings.from_args(args)
        with contextlib.ExitStack() as connected:

            def open_host(target: Mapping[str, Any]) -> Hypervisor:
                return connected.enter_context(Hypervisor(target["host"], target["uri"], **connections(args, settings)))

            src = open_host({"host": source, "uri": instance["uri"]})
            check = live_cpu_check(args, settings, src, instance, open_host)
            target = destination(args, settings, task_vars, ledger, instance, screen=check)
            result: dict[str, Any] = {"changed": True, "name": args["name"], "uuid": instance["uuid"],
                                      "from_host": source, "to_host": target["host"], "why": target["why"]}
            if target["warnings"]:
                result["warnings"] = list(target["warnings"])
            if target.get("live_refused"):
                result["live_refused"] = target["live_refused"]
            move = Move(args, settings, ledger, instance, target, hooks.installed())
            accepted = check.accepted if check is not None else None
            dst = accepted if accepted is not None and accepted.host == target["host"] else open_host(target)
            move.plan(src, dst, check.defined_xml if check is not None else None)
            if self._task.check_mode:
                result["msg"] = f"would migrate {args['name']} from {source} to {target['host']} ({target['why']})"
                return result
            hostvars = task_vars.get("hostvars", {})
            address = (hostvars.get(target["host"]) or {}).get(
                "berth_migration_address", task_vars.get("berth_migration_address"))
            moved = move.run(src, dst, address)
        warnings = result.get("warnings", []) + moved.pop("warnings")
        moved.pop("instance")
        result.update(moved)
        if warnings:
            result["warnings"] = warnings
        return result
