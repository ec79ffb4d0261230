"""berth.fleet.ledger_info: read the ledger's instances, claims, decisions, hypervisors, groups, and
what builds made (artefacts)."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        ledger = Ledger(args["ledger_url"]).open()
        what, name = args["what"], args["name"]
        if what == "instances":
            rows = ledger.instances([name] if name else None)
        elif what == "claims":
            rows = ledger.claims()
            if name:
                rows = [c for c in rows if c["host"] == name]
        elif what == "decisions":
            rows = ledger.decisions(name, limit=args["limit"])
        elif what == "hypervisors":
            rows = [h for h in ledger.hypervisors() if not name or name in (h["host"], h["uuid"])]
        elif what == "artefacts":
            rows = [row for row in ledger.artefacts() if not name or name in (row["host"], row["instance_name"])]
        else:
            rows = ledger.server_groups(name)
        return {"changed": False, what: rows}
