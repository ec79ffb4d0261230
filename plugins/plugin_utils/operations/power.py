"""Power: bring placed instances' domains to a wanted power state (running, stopped, paused,
rebooted) as Nova's start, stop, pause, unpause and reboot do, and the ledger with them. What
berth.fleet.power and berth.fleet.server share. Private to the collection."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils._power_states import (
    PAUSE,
    REBOOT,
    RESUME,
    SHUT_DOWN,
    START,
    power_action,
    shut_down,
)
from ansible_collections.berth.fleet.plugins.plugin_utils._progress import Progress
from ansible_collections.berth.fleet.plugins.plugin_utils._provisioning import HostSession
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    ACTIVE,
    PAUSED,
    STOPPED,
    Ledger,
)

# The instance state each wanted power state leaves in the ledger (Nova's vm_states).
LEDGER_STATES = {"running": ACTIVE, "stopped": STOPPED, "paused": PAUSED, "rebooted": ACTIVE}
# Instances acted on at once; each waits for its own guest.
MAX_PARALLEL = 16


class Power:
    """Bring the instances ``rows`` (ledger rows of placed instances, each with its host's URI)
    to ``wanted``. Every instance is planned before any is touched: one refusal changes nothing.
    Each hypervisor is opened once, through ``connect`` (libvirt's by default)."""

    def __init__(self, rows: Sequence[dict[str, Any]], wanted: str, ledger: Ledger, shutdown_timeout_s: int,
                 timeout_s: float, check_mode: bool, uri_policy: UriPolicy, connect: Connect = Hypervisor) -> None:
        self.rows, self.wanted, self.ledger, self.uri_policy = list(rows), wanted, ledger, uri_policy
        self.connect = connect
        self.shutdown_timeout_s, self.timeout_s, self.check_mode = shutdown_timeout_s, timeout_s, check_mode

    def run(self) -> dict[str, Any]:
        rows, ledger = self.rows, self.ledger
        sessions: dict[str, HostSession] = {}
        try:
            for row in rows:
                if row["host"] not in sessions:
                    sessions[row["host"]] = HostSession(row["host"], row["uri"], self.timeout_s, self.uri_policy,
                                                        self.connect)
            # Every instance is planned before any is touched: one refusal changes nothing.
            plans = [self._plan(row, self.wanted, sessions[row["host"]]) for row in rows]
            if self.check_mode:
                results = [{**plan, "changed": plan["action"] is not None or plan["was"] != plan["state"],
                            "msg": _would(plan)} for plan in plans]
            else:
                progress = Progress()

                def act(plan: dict[str, Any]) -> dict[str, Any]:
                    try:
                        return self._act(plan, sessions[plan["host"]], ledger, self.shutdown_timeout_s, progress)
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
