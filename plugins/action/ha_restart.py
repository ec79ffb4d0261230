"""berth.fleet.ha_restart: the scheduled HA run - restart the HA instances of every down, fenced
hypervisor on other hosts, highest priority first (controller side). An adapter: the work is
plugins/plugin_utils/operations/ha.py."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.plugin_utils import hooks
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import without_gc
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.ha import HaRestart
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        if args.get("carry_definition"):
            raise InputError("carry_definition", "an HA restart renders each domain anew: nothing is carried from "
                                                 "the dead host")
        with without_gc():
            ledger = Ledger(args["ledger_url"]).open()
            try:
                return HaRestart(args, Settings.from_args(args), ledger, task_vars, bool(self._task.check_mode),
                                 hooks.installed()).run()
            finally:
                ledger.close()
