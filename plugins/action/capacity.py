"""berth.fleet.capacity: how many more of a flavor fit, per host and in total (controller side)."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.action.schedule import (
    ActionModule as ScheduleAction,
    _host_states,
    flavor_option,
    request_options,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.capacity import capacity
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import HostState
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger

# The schedule module's options that shape the filters; placement-only ones (name, count,
# weighers, subset, force...) mean nothing for a count.
_SHARED = (
    "flavor", "flavors_file", "hosts", "hypervisor_group", "enabled_filters", "ignore_hosts",
    "availability_zone", "default_availability_zone", "image_id", "image_properties",
    "scheduler_hints", "server_group", "max_instances_per_host", "max_io_ops_per_host",
    "isolated_hosts", "isolated_images", "restrict_isolated_hosts_to_isolated_images",
    "ledger", "ledger_url",
)


class ActionModule(BerthAction):
    ARGUMENT_SPEC = {key: ScheduleAction.ARGUMENT_SPEC[key] for key in _SHARED}

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        flavor = flavor_option(args)
        states, _uris = _host_states(args, task_vars)
        if args["ledger"]:
            states = Ledger(args["ledger_url"]).open().tracker_states(states)
        spec = RequestSpec(flavor=flavor, count=1, **request_options(args))
        answer = capacity([HostState.from_dict(state) for state in states], spec)
        total = "an unlimited number" if answer["total"] is None else answer["total"]
        return {
            "changed": False,
            "flavor": flavor.to_dict(),
            "total": answer["total"],
            "hosts": answer["hosts"],
            "summary": f"{total} more {flavor.name} fit on {len(states)} hosts",
        }
