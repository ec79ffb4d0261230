"""berth.fleet.rescue: boot an instance from a rescue image with its own root disk as its second
disk, or from its own disk again (controller side). An adapter: the work is
plugins/plugin_utils/operations/rescue.py."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.plugin_utils import hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.rescue import Rescue
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        if args.get("carry_definition"):
            raise InputError("carry_definition", "a rescue and its unrescue define the instance from its recorded "
                                                 "request: no definition is carried")
        ledger = Ledger(args["ledger_url"]).open()
        try:
            return Rescue(args, Settings.from_args(args), ledger, task_vars, bool(self._task.check_mode),
                          hooks.installed()).run()
        finally:
            ledger.close()
