"""berth.fleet.console: the last lines of an instance's serial console log (controller side).
An adapter: the work is plugins/plugin_utils/operations/console.py."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils._provisioning import HostSession
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.console import (
    ConsoleOutput,
    check_directory,
    placed_instance,
)


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        serial_log_dir = check_directory("serial_log_dir", args["serial_log_dir"])
        row = placed_instance(Ledger(args["ledger_url"]).open(), args["name"])
        session = HostSession(row["host"], row["uri"], args["timeout"], UriPolicy.from_settings(args["uri_policy"]))
        return ConsoleOutput(row, serial_log_dir, args["lines"], session).run()
