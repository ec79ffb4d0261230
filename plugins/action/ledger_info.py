"""berth.fleet.ledger_info: read the ledger's instances, claims, decisions, hypervisors, groups, and
what builds made (artefacts)."""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.plugin_utils._decision_view import decision_lines, decision_view
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
            rows = self._decisions(ledger, name, args["instance"], args["limit"])
        elif what == "hypervisors":
            rows = [h for h in ledger.hypervisors() if not name or name in (h["host"], h["uuid"])]
        elif what == "artefacts":
            rows = [row for row in ledger.artefacts() if not name or name in (row["host"], row["instance_name"])]
        else:
            rows = ledger.server_groups(name)
        return {"changed": False, what: rows, "ledger": ledger.shown_url}

    @staticmethod
    def _decisions(ledger: Ledger, name: str | None, instance: str | None, limit: int) -> list[dict[str, Any]]:
        """The newest decisions (of launch ``name``; that placed ``instance``), each with its
        explanation in lines."""
        if instance is None:
            rows = ledger.decisions(name, limit=limit)
        else:
            # web-2 was placed by a launch named web (count 2 or more) or web-2 (berth.fleet.server
            # without count); the decision's request names the instances it placed.
            launches = {instance, re.sub(r"-[0-9]+$", "", instance)} if name is None else {name}
            found = [row for launch in launches for row in ledger.decisions(launch, limit=limit)
                     if row["ok"] and instance in (row["request"] or {}).get("names", [])]
            rows = sorted(found, key=lambda row: row["id"], reverse=True)[:limit]
            if not rows:
                raise InputError("instance", f"no decision in {ledger.label} placed {instance} (of the newest "
                                             f"{limit} of launch {' or '.join(sorted(launches))})")
        return [{**row, "explanation": decision_lines(decision_view(row), instance)} for row in rows]
