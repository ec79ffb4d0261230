"""berth.fleet.snapshot: write an instance's root disk as an image into the operator's image
directory (controller side). An adapter: the work is plugins/plugin_utils/operations/snapshot.py."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.plugin_utils import hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.snapshot import Snapshot
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        ledger = Ledger(args["ledger_url"]).open()
        try:
            return Snapshot(args, Settings.from_args(args), ledger, bool(self._task.check_mode),
                            hooks=hooks.installed()).run()
        finally:
            ledger.close()
