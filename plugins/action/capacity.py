"""berth.fleet.capacity: how many more of a flavor fit, per host and in total (controller side)."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.capacity import capacity
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.server_group import (
    server_group_from_dict,
)
from ansible_collections.berth.fleet.plugins.plugin_utils._flavors import flavor_option
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import read_fleet, without_gc
from ansible_collections.berth.fleet.plugins.plugin_utils._headroom import (
    check_failover_settings,
    keeps_headroom,
    ledger_headroom,
)
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import (
    ledger_group,
    request_spec,
    scheduling_request,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        with without_gc():
            return self._run(args, task_vars)

    def _run(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        settings = Settings.from_args(args)
        flavor = flavor_option(args["flavor"], settings.flavors_file)
        request = scheduling_request(args, flavor, settings)
        ledger = Ledger(args["ledger_url"]).open() if args["ledger"] else None
        group = ledger_group(request.server_group, ledger)
        spec = request_spec(request, settings, 1, server_group_from_dict(group) if group is not None else None,
                            ignore_hosts=args.get("ignore_hosts"), image_id=args.get("image_id"))
        fleet = read_fleet(settings, task_vars, spec, ledger, sync=False, hosts=args.get("hosts"))
        answer = capacity(fleet.hosts, spec)
        for host, failed_builds in zip(answer["hosts"], fleet.hosts.column("failed_builds")):
            host["failed_builds"] = failed_builds  # what BuildFailureWeigher holds against it
        total = "an unlimited number" if answer["total"] is None else answer["total"]
        check_failover_settings(settings)
        # The HA instances' room: only the ledger knows them, and only an operator who keeps some asks.
        headroom = (ledger_headroom(ledger, settings).to_dict()
                    if ledger is not None and keeps_headroom(settings.failover_hosts) else None)
        return {
            "headroom": headroom,
            "changed": False,
            "flavor": flavor.to_dict(),
            "total": answer["total"],
            "hosts": answer["hosts"],
            "summary": f"{total} more {flavor.name} fit on {len(fleet.hosts)} hosts"
                       + (f" (usage from {ledger.label})" if ledger is not None else ""),
            "ledger": ledger.shown_url if ledger is not None else None,
        }
