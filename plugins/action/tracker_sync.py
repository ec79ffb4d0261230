"""berth.fleet.tracker_sync: hypervisors' states into the ledger, reconciled (controller side).
The task of playbooks/gather.yml, Nova's ResourceTracker update; the work is operations/sync.py's."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.sync import (
    Sync,
    SyncRequest,
    Target,
    mark_missing,
)


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        check = bool(self._task.check_mode)
        ledger = Ledger(args["ledger_url"]).open()
        try:
            if args["mark_missing"]:
                listed = task_vars.get("groups", {}).get(args["hypervisor_group"]) or []
                return mark_missing(ledger, listed, args["service_down_time"], check,
                                    args["decisions_max_age_days"], args["decisions_max_count"])
            hosts = args["hosts"] if args["hosts"] is not None else [task_vars["inventory_hostname"]]
            variables = inventory_variables(task_vars["hostvars"])
            uri_policy = UriPolicy.from_settings(args["uri_policy"])
            request = SyncRequest(
                targets=tuple(Target.from_hostvars(host, variables(host), uri_policy) for host in hosts),
                workers=args["workers"], batch_size=args["batch_size"], keep_leftovers=args["keep_leftovers"],
                service_down_time_s=args["service_down_time"], dry_run=check, uri_policy=uri_policy,
                cpu_baseline_groups=tuple(args["cpu_baseline_groups"] or ()))
            return Sync(request, ledger).run()
        finally:
            ledger.close()


def inventory_variables(hostvars: Any) -> Callable[[str], Mapping[str, Any]]:
    """How to read a host's variables from its inventory source.

    berth.fleet.hypervisors sets berth_libvirt_uri, berth_hypervisor (and berth_host_state) as
    host variables, already marked unsafe, so they are taken from the inventory's host as they
    are: about 2 microseconds a host, where ``hostvars[host]`` works out and templates every
    variable of the host (0.3 ms a host on an idle machine, 3 s of a 10,000-host sync). HostVars
    has kept its inventory as ``_inventory`` for years; without it, hostvars it is."""
    inventory = getattr(hostvars, "_inventory", None)
    if inventory is None or not hasattr(inventory, "get_host"):
        return lambda host: hostvars[host] if host in hostvars else {}

    def variables(host: str) -> Mapping[str, Any]:
        found = inventory.get_host(host)
        return found.vars if found is not None else {}

    return variables
