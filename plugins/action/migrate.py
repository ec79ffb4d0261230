"""berth.fleet.migrate: move an instance to another hypervisor (controller side).
An adapter: the work is plugins/plugin_utils/operations/migrate.py."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.request import dns_label
from ansible_collections.berth.fleet.plugins.plugin_utils import hooks
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import without_gc
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.migrate import Migrate
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        dns_label("name", args["name"])
        hostvars = task_vars.get("hostvars", {})

        def migration_address(host: str) -> Any:
            """The destination's berth_migration_address, else the play's variable of that name."""
            return (hostvars.get(host) or {}).get("berth_migration_address", task_vars.get("berth_migration_address"))

        with without_gc():
            ledger = Ledger(args["ledger_url"]).open()
            return Migrate(args, Settings.from_args(args), ledger, task_vars, bool(self._task.check_mode),
                           hooks.installed(), migration_address).run()
