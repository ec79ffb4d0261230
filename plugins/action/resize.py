"""berth.fleet.resize: give an instance another flavor, on its own host where it still fits,
else on the host the scheduler picks (controller side).
An adapter: the work is plugins/plugin_utils/operations/resize.py."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.request import dns_label
from ansible_collections.berth.fleet.plugins.plugin_utils import hooks
from ansible_collections.berth.fleet.plugins.plugin_utils._flavors import flavor_option
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import without_gc
from ansible_collections.berth.fleet.plugins.plugin_utils._power_states import check_shutdown_timeout
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.resize import Resize
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        dns_label("name", args["name"])
        settings = Settings.from_args(args)
        new = flavor_option(args["flavor"], settings.flavors_file)
        check_shutdown_timeout(args["shutdown_timeout"])
        with without_gc():
            ledger = Ledger(args["ledger_url"]).open()
            return Resize(args, settings, new, ledger, task_vars, bool(self._task.check_mode), hooks.installed()).run()
