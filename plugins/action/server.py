"""berth.fleet.server: named instances present, running, stopped or absent (controller side).
An adapter: the work is plugins/plugin_utils/operations/server.py."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import installed
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import DEFAULT_TEMPLATE
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.server import Server
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


class ActionModule(BerthAction):
    _supports_check_mode = True
    _supports_diff = True
    # from_vars: a requester option from a launch's extra variable of its name (-e flavor=m1.small).
    VARIABLE_PREFIX = ""

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        template_path = self._find_needle("templates", args["template"]) if args["template"] else DEFAULT_TEMPLATE
        ledger = Ledger(args["ledger_url"]).open()
        return Server(args, Settings.from_args(args), ledger, task_vars, template_path, bool(self._task.check_mode),
                      bool(self._task.diff), installed()).run()
