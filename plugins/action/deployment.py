"""berth.fleet.deployment: place several entries (flavor, count, server group) together and claim
them all in one transaction (controller side). An adapter: the work is
plugins/plugin_utils/operations/deployment.py."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.deployment import Deployment
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        settings = Settings.from_args(args)
        ledger = Ledger(args["ledger_url"]).open()
        return Deployment(args["entries"], settings, ledger, task_vars, bool(self._task.check_mode)).run()
