"""berth.fleet.power: start, stop, pause, resume or reboot instances (controller side)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import dns_label
from ansible_collections.berth.fleet.plugins.plugin_utils._build import HostSession
from ansible_collections.berth.fleet.plugins.plugin_utils._power import (
    PAUSE,
    REBOOT,
    RESUME,
    SHUT_DOWN,
    START,
    check_shutdown_timeout,
    power_action,
    shut_down,
)
from ansible_collections.berth.fleet.plugins.plugin_utils._progress import Progress
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    ACTIVE,
    PAUSED,
    PLACED_STATES,
    STOPPED,
    Ledger,
)

# The instance state each wanted power state leaves in the ledger (Nova's vm_states).
LEDGER_STATES = {"running": ACTIVE, "stopped": STOPPED, "paused": PAUSED, "rebooted": ACTIVE}
# Instances acted on at once; each waits for its own guest.
MAX_PARALLEL = 16


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        dns_label("name", args["name"])
        check_shutdown_timeout(args["shutdown_timeout"])
        ledger = Ledger(args["ledger_url"]).open()
        rows = ledger.launch_instances(args["name"])
        if not rows:
            raise InputError("name", f"no instance named {args['name']} or {args['name']}-<n> in the ledger")
        unplaced = [f"{row['name']} ({row['state']})" for row in rows if row["state"] not in PLACED_STATES]
        if unplaced:
            raise InputError("name", f"only {', '.join(PLACED_STATES)} instances change their power state, not: "
                                     f"{', '.join(unplaced)}")
        unreachable = sorted({row["host"] for row in rows if not row["uri"]})
        if unreachable:
            raise BerthError(f"the ledger has no URI for {', '.join(unreachable)}: run playbooks/gather.yml to sync it")
        sessions: dict[str, HostSession] = {}
        try:
            for row in rows:
                if row["host"] not in sessions:
                    sessions[row["host"]] = HostSession(row["host"], row["uri"], args["timeout"])
            # Every instance is planned before any is touched: one refusal changes nothing.
            plans = [self._plan(row, args["state"], sessions[row["host"]]) for row in rows]
            if self._task.check_mode:
                results = [{**plan, "changed": plan["action"] is not None or plan["was"] != plan["state"],
                            "msg": _would(plan)} for plan in plans]
            else:
                progress = Progress()

                def act(plan: dict[str, Any]) -> dict[str, Any]:
                    try:
                        return self._act(plan, sessions[plan["host"]], ledger, args["shutdown_timeout"], progress)
                    except Exception as exc:  # reported per instance; the others go on
                        progress.step(plan["name"], plan["host"], f"FAILED: {exc}")
                        return {**plan, "changed": False, "failed": True, "msg": f"{plan['name']}: {exc}"}

                with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(plans))) as pool:
                    results = list(pool.map(act, plans))
        finally:
            for session in sessions.values():
                session.close()
        outcome: dict[str, Any] = {"changed": any(r["changed"] for r in results), "instances": results,
                                   "msg": "; ".join(r["msg"] for r in results)}
        failed = [r for r in results if r.get("failed")]
        if failed:
            outcome.update(failed=True, msg=f"{len(failed)} of {len(results)} instance(s) failed: "
                           + "; ".join(r["msg"] for r in failed))
        return outcome

    @staticmethod
    def _plan(row: dict[str, Any], wanted: str, session: HostSession) -> dict[str, Any]:
        domain_state = session.hv.domain_state(row["uuid"])
        if domain_state is None:
            raise BerthError(f"{row['name']} has no domain on {row['host']}, although the ledger places it there: "
                             f"run playbooks/gather.yml (it reports the instance missing)")
        return {"name": row["name"], "uuid": row["uuid"], "host": row["host"], "was": row["state"],
                "domain_state": domain_state, "action": power_action(wanted, domain_state, row["name"]),
                "state": LEDGER_STATES[wanted]}

    @staticmethod
    def _act(plan: dict[str, Any], session: HostSession, ledger: Ledger, shutdown_timeout_s: int,
             progress: Progress) -> dict[str, Any]:
        hv, uuid, action = session.hv, plan["uuid"], plan["action"]
        step = progress.of(plan["name"], plan["host"])
        result = {**plan}
        if action in (SHUT_DOWN, REBOOT):
            result["shutdown"] = shut_down(hv, uuid, shutdown_timeout_s, step)
        if action in (START, REBOOT):
            hv.start(uuid, None)
            step("started")
        elif action == PAUSE:
            hv.suspend(uuid)
            step("paused")
        elif action == RESUME:
            hv.resume(uuid)
            step("resumed")
        # The ledger follows what was done; it may have lagged behind the domain (drift the
        # tracker sync had not seen yet), which alone is a change too.
        instance, moved = ledger.set_instance_state(uuid, plan["state"])
        result.update(changed=action is not None or moved, instance=instance, msg=_done(result))
        return result


def _would(plan: dict[str, Any]) -> str:
    if plan["action"] is None:
        return (f"{plan['name']}: {plan['domain_state']} already" if plan["was"] == plan["state"]
                else f"{plan['name']}: {plan['domain_state']} already; would record {plan['state']} in the ledger")
    return f"{plan['name']}: would {plan['action']} it on {plan['host']} (it is {plan['domain_state']})"


def _done(result: dict[str, Any]) -> str:
    if result["action"] is None:
        return (f"{result['name']}: {result['domain_state']} already" if result["was"] == result["state"]
                else f"{result['name']}: {result['domain_state']} already; the ledger now says {result['state']}")
    how = f" ({result['shutdown']})" if result.get("shutdown") else ""
    return f"{result['name']}: {result['action']}{how} on {result['host']}, now {result['state']}"
