"""berth.fleet.instance_info: the ledger's instances, read only (controller side)."""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        instances = Ledger(args["ledger_url"]).open().instances(launch=args["name"] or None)
        if args["name"]:
            # A launch's name covers its indexed instances: web -> web-1, web-2 ... An adopted
            # instance keeps the name it was given, so the name itself matches too. The ledger
            # gives those starting with the name; web-a or web-2b are not web's.
            wanted = re.compile(re.escape(args["name"]) + r"(?:-([0-9]+))?")
            indexed = []
            for row in instances:
                match = wanted.fullmatch(row["name"])
                if match:
                    indexed.append((int(match.group(1) or 0), row))
            instances = [row for _index, row in sorted(indexed, key=lambda pair: pair[0])]
        return {"changed": False, "instances": instances}
