"""berth.fleet.deployment: place several entries (flavor, count, server group) together and claim
them all in one transaction (controller side). An adapter: the work is
plugins/plugin_utils/operations/deployment.py; each entry's request is checked here, once, as
berth.fleet.schedule's is."""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import instance_names
from ansible_collections.berth.fleet.plugins.plugin_utils._flavors import flavor_option
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import scheduling_request
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.deployment import Deployment, Entry
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

ENTRY_KEYS = ("name", "flavor", "count", "server_group")


def checked_entries(entries: Sequence[Mapping[str, Any]], settings: Settings) -> list[Entry]:
    """The task's ``entries``, each with its instances' names and its request, checked; an error
    names the entry's field (``entries[1].flavor``)."""
    if not entries:
        raise InputError("entries", "entries must list at least one entry {name, flavor, count, server_group}")
    checked = []
    for position, entry in enumerate(entries):
        unknown = sorted(set(entry) - set(ENTRY_KEYS))
        if unknown:
            raise InputError(f"entries[{position}].{unknown[0]}", f"entries[{position}] has an unknown key "
                                                                  f"{unknown[0]!r}; allowed: {', '.join(ENTRY_KEYS)}")
        for key in ("name", "flavor"):
            if entry.get(key) is None:
                raise InputError(f"entries[{position}].{key}", f"entries[{position}].{key} is required")
        names = instance_names(entry["name"], entry.get("count") or 1)
        request = scheduling_request({"server_group": entry.get("server_group")},
                                     flavor_option(entry["flavor"], settings.flavors_file), settings)
        checked.append(Entry(entry["name"], names, request))
    counted = Counter(name for entry in checked for name in entry.names)
    repeated = sorted(name for name, times in counted.items() if times > 1)
    if repeated:
        raise InputError("entries", f"two entries name instance {repeated[0]}: give each entry its own name")
    return checked


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        settings = Settings.from_args(args)
        entries = checked_entries(args["entries"], settings)
        ledger = Ledger(args["ledger_url"]).open()
        return Deployment(entries, settings, ledger, task_vars, bool(self._task.check_mode)).run()
