"""berth.fleet.adopt: take a domain that already runs on a hypervisor into the ledger (controller side).
An adapter: the work is plugins/plugin_utils/operations/adopt.py."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.plugin_utils._flavors import flavor_option
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.adopt import Adopt
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        host = args["host"]
        settings = Settings.from_args(args)
        flavor = flavor_option(args["flavor"], settings.flavors_file) if args["flavor"] is not None else None
        # The host's inventory variables, where the inventory lists it. Asked with ``in`` first:
        # HostVars cannot answer get() for a host it lacks outside a template (a ledger-only run
        # has no hypervisor hosts).
        hostvars = task_vars.get("hostvars", {})
        variables = (hostvars[host] if host in hostvars else None) or {}
        ledger = Ledger(args["ledger_url"]).open()
        return Adopt(args, settings, flavor, ledger, variables, bool(self._task.check_mode)).run()
