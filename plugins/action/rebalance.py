"""berth.fleet.rebalance: plan moves that even out or pack the fleet, or empty one host, and make
them (controller side). An adapter: the work is plugins/plugin_utils/operations/rebalance.py."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.plugin_utils import hooks
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import without_gc
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.rebalance import Rebalance
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        hostvars = task_vars.get("hostvars", {})

        def migration_address(host: str) -> Any:
            """The destination's berth_migration_address, else the play's variable of that name."""
            return (hostvars.get(host) or {}).get("berth_migration_address", task_vars.get("berth_migration_address"))

        with without_gc():
            ledger = Ledger(args["ledger_url"]).open()
            try:
                return Rebalance(args, Settings.from_args(args), ledger, task_vars, bool(self._task.check_mode),
                                 hooks.installed(), migration_address).run()
            finally:
                ledger.close()
