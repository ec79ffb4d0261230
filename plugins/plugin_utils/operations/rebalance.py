"""A rebalance: the planner's moves (_rebalance_plan.py) made one after the other through the one
move path (operations/migrate.py, each move to the host the plan names: claimed first, live where
it can), stopping at the first that fails. What berth.fleet.rebalance does; drain.yml asks it for a
drain's plan (check mode) and moves with berth.fleet.migrate. Private to the collection."""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable, Mapping

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import carried_volumes_mb
from ansible_collections.berth.fleet.plugins.plugin_utils._rebalance_plan import (
    Controls,
    Plan,
    Planner,
    imbalance,
    packing_slack,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import NO_HOOKS, Hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.migrate import Migrate, no_migration_address
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


def ledger_plan(ledger: Ledger, settings: Settings, goal: str, drain_host: str | None = None,
                now: dt.datetime | None = None) -> Plan:
    """The plan for ``goal`` on the ledger's fleet as the scheduler reads it (claims as usage),
    with its placed instances, their server groups and the HA instances."""
    rows = ledger.placed_instances()
    names = sorted({row["server_group"] for row in rows if row.get("server_group")})
    groups = {name: ledger.scheduler_group(name) for name in names}
    planner = Planner(rows, {name: group for name, group in groups.items() if group}, settings,
                      [row for row in rows if row.get("ha")], ledger.scheduler_rules(),
                      carried_volumes_mb(ledger.volumes()))
    networks = sorted({network for spec in planner.specs.values() for network in spec.requested_networks})
    table, _generations = ledger.host_table(planner.host_fields(), (), networks)
    return planner.plan(table, goal, Controls.from_settings(settings), now=now, drain_host=drain_host)


def plan_lines(plan: Plan) -> list[str]:
    """The plan as the play prints it: the figure, each move with the figure after it, why it stops."""
    figure = "packing figure" if plan.goal == "pack" else "imbalance"
    lines = [f"{plan.goal}: {figure} {plan.imbalance_before:.4f} now, {plan.imbalance_after:.4f} after "
             f"{len(plan.moves)} move(s)"]
    lines += [f"{index}. {move.name}: {move.from_host} -> {move.to_host} ({figure} after: {move.imbalance_after:.4f})"
              for index, move in enumerate(plan.moves, start=1)]
    lines += [f"stays: {name} ({reason})" for name, reason in sorted(plan.held.items())]
    if plan.stopped:
        lines.append(f"stops: {plan.stopped}")
    return lines


class Rebalance:
    """Plan for ``args["goal"]`` (or the drain of ``args["host"]``) and, outside check mode, make
    the moves in plan order, each through Migrate to the host the plan names; the first that
    fails stops the run (it leaves that instance on its source, as every failed move does), and
    the answer says which moved, which failed and which were not tried."""

    def __init__(self, args: Mapping[str, Any], settings: Settings, ledger: Ledger, task_vars: Mapping[str, Any],
                 check_mode: bool, hooks: Hooks = NO_HOOKS,
                 migration_address: Callable[[str], str | None] = no_migration_address,
                 connect: Connect = Hypervisor) -> None:
        self.args, self.settings, self.ledger, self.task_vars = args, settings, ledger, task_vars
        self.check_mode, self.hooks, self.migration_address, self.connect = check_mode, hooks, migration_address, connect

    def run(self) -> dict[str, Any]:
        goal = self.args["goal"]
        drain_host = self.args.get("host")
        if goal == "drain" and not drain_host:
            raise BerthError("goal=drain needs host: the hypervisor to empty")
        plan = ledger_plan(self.ledger, self.settings, goal, drain_host)
        result: dict[str, Any] = {"changed": bool(plan.moves), "plan": plan.to_dict(), "lines": plan_lines(plan),
                                  "moved": []}
        if self.check_mode:
            return result
        for index, move in enumerate(plan.moves):
            args = {**self.args, "name": move.name, "to_host": move.to_host}
            try:
                moved = Migrate(args, self.settings, self.ledger, self.task_vars, False, self.hooks,
                                self.migration_address, self.connect).run()
            except BerthError as exc:
                left = [later.name for later in plan.moves[index + 1:]]
                result.update(failed=True, msg=(
                    f"move {index + 1} of {len(plan.moves)} failed, {move.name} stays on {move.from_host}: {exc}; "
                    f"moved before it: {', '.join(item['name'] for item in result['moved']) or 'none'}; "
                    f"not tried: {', '.join(left) or 'none'}"), failed_move=move.name, not_tried=left)
                break
            result["moved"].append({"name": move.name, "from_host": move.from_host, "to_host": moved["to_host"],
                                    "mode": moved.get("mode")})
            if moved.get("warnings"):
                result.setdefault("warnings", []).extend(moved["warnings"])
        result["changed"] = bool(result["moved"])
        table, _generations = self.ledger.host_table()
        result["imbalance_now"] = round(imbalance(table), 4)
        if goal == "pack":
            result["packing_now"] = round(packing_slack(list(table)), 4)
        return result
