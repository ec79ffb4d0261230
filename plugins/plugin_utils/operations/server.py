"""One named instance brought to the state a play declares (present, running, stopped, absent):
berth.fleet.server's work, composed of the launch, power and build operations. Private to the
collection."""

from __future__ import annotations

from typing import Any, Mapping

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError
from ansible_collections.berth.fleet.plugins.module_utils.request import dns_label
from ansible_collections.berth.fleet.plugins.plugin_utils._power import check_shutdown_timeout
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ERROR, PLACED_STATES, Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import Build
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.hooks import NO_HOOKS, Hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import BUILD_SPEC, Launch, half_options
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.power import Power

# The instance's fields a result and a diff show.
SHOWN = ("name", "uuid", "host", "state", "vcpus", "memory_mb")


class Server:
    """``args`` are berth.fleet.server's validated options; ``ledger`` the opened ledger."""

    def __init__(self, args: Mapping[str, Any], ledger: Ledger, task_vars: Mapping[str, Any], template_path: str,
                 check_mode: bool, diff: bool, hooks: Hooks = NO_HOOKS) -> None:
        self.args, self.ledger, self.task_vars, self.template_path = args, ledger, task_vars, template_path
        self.check_mode, self.diff, self.hooks = check_mode, diff, hooks

    def run(self) -> dict[str, Any]:
        args, ledger = self.args, self.ledger
        name = dns_label("name", args["name"])
        check_shutdown_timeout(args["shutdown_timeout"])
        before = self._row(name)
        if args["state"] == "absent":
            result = self._absent(before)
        else:
            result = self._present(name, before)
        after = result.get("instance")
        if self.diff:
            result["diff"] = {"before": _shown(before) or {"state": "absent"},
                              "after": _shown(after) or {"state": "absent"},
                              "before_header": f"{name} (ledger)", "after_header": f"{name} (wanted)"}
        return result

    def _row(self, name: str) -> dict[str, Any] | None:
        rows = self.ledger.instances([name])
        return rows[0] if rows else None

    def _absent(self, row: dict[str, Any] | None) -> dict[str, Any]:
        if row is None:
            return {"changed": False, "instance": None, "msg": f"{self.args['name']} is absent already"}
        build_args = half_options(BUILD_SPEC, {**self.args, "state": "absent", "flavor": None, "name": row["name"],
                                               "uuid": row["uuid"], "host": row["host"], "uri": row["uri"]})
        removed = Build(build_args, self.ledger, self.template_path, self.check_mode, False, self.hooks).run()
        verb = "would delete" if self.check_mode else "deleted"
        return {"changed": removed["changed"], "instance": None,
                "msg": removed.get("msg") or f"{verb} {row['name']} from {row['host']}"}

    def _present(self, name: str, row: dict[str, Any] | None) -> dict[str, Any]:
        args = self.args
        result: dict[str, Any] = {"changed": False}
        if row is None or row["state"] == ERROR:
            launched = Launch(args, [name], self.ledger, self.task_vars, self.template_path, self.check_mode,
                              self.diff, self.hooks).run()
            planned = launched["schedule"]
            result.update(changed=launched["changed"], decision_id=planned.get("decision_id"),
                          summary=planned.get("summary"))
            if launched.get("failed"):
                result.update(failed=True, msg=launched["msg"])
                return result
            placement = planned["placements"][0]
            if self.check_mode:
                result.update(changed=True, instance={**{key: placement.get(key) for key in SHOWN}, "state": "PLANNED"},
                              msg=f"would build {name} on {placement['host']}")
                return result
            built = launched["build"]["results"][0]
            row = self._row(name)  # with its hypervisor's URI, which the power step needs
            result["msg"] = f"built {name} on {built['host']}"
            if built.get("failed_attempts"):
                result["failed_attempts"] = built["failed_attempts"]
        elif row["state"] not in PLACED_STATES:
            raise BerthError(f"{name} is {row['state']}: another run is building or moving it; run again once it is done")
        else:
            result["msg"] = f"{name} is there already on {row['host']} ({row['state']})"
        wanted = {"running": "running", "stopped": "stopped"}.get(args["state"])
        if wanted is not None:
            powered = Power([row], wanted, self.ledger, args["shutdown_timeout"], args["timeout"],
                            self.check_mode).run()
            change = powered["instances"][0]
            if powered.get("failed"):
                result.update(failed=True, msg=powered["msg"])
            elif change["changed"]:
                result.update(changed=True, msg=f"{result['msg']}; {change['msg']}")
            row = change.get("instance") or row
        result["instance"] = row
        return result


def _shown(row: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return {key: row.get(key) for key in SHOWN} if row else None
