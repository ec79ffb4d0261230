"""berth.fleet.host_rule: write, delete or list the operator's host rules in the ledger (controller side)."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import dns_label
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_rules import (
    HARD_KINDS,
    KINDS,
    SELECTORS,
    HostRule,
    host_rule_from_dict,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger


def rule_option(args: dict[str, Any]) -> HostRule:
    """The rule the task's options describe, checked, naming the option at fault."""
    for key in ("kind", "aggregate"):
        if not args[key]:
            allowed = f"; one of {', '.join(KINDS)}" if key == "kind" else ""
            raise InputError(key, f"{key} is required with state=present{allowed}")
    if args["kind"] in HARD_KINDS and args["weight"] is not None:
        raise InputError("weight", f"weight is for the soft kinds (should, should_not): a {args['kind']} rule "
                                   f"is never weighed")
    for key in ("name", "aggregate", "instance_name", "instance_group"):
        limits.check_name(key, args[key])
    if args["instance_label"] is not None:
        dns_label("instance_label", args["instance_label"])
    return host_rule_from_dict({key: args[key] for key in ("name", "kind", "aggregate", "weight", *SELECTORS)}, "")


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        state, name = args["state"], args["name"]
        if state != "list" and not name:
            raise InputError("name", f"name is required with state={state}")
        rule = rule_option(args) if state == "present" else None
        ledger = Ledger(args["ledger_url"]).open()
        check = bool(self._task.check_mode)
        if state == "list":
            return {"changed": False, "rules": ledger.host_rules(name)}
        if rule is None:
            before = ledger.delete_host_rule(name, dry_run=check)
            return {"changed": before is not None, "rule": before}
        written = ledger.put_host_rule(rule, dry_run=check)
        result: dict[str, Any] = {"changed": written["changed"], "rule": rule.to_dict(), "before": written["before"],
                                  "breaking": written["breaking"]}
        warnings = []
        if not written["known_aggregate"]:
            warnings.append(f"no hypervisor of the ledger is in aggregate {rule.aggregate} (as its last sync recorded "
                            f"them): a must rule on it turns down every host for the instances it selects")
        if written["breaking"]:
            warnings.append(f"{len(written['breaking'])} instance(s) run against rule {rule.name} now - "
                            + ", ".join(f"{item['name']} on {item['host']}" for item in written["breaking"])
                            + ": they stay there until moved (berth.fleet.migrate, drain.yml)")
        if warnings:
            result["warnings"] = warnings
        return result
