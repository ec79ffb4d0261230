"""Named instances brought to the state a play declares (present, running, stopped, absent):
berth.fleet.server's work, and so playbooks/launch.yml's, composed of the launch, power and build
operations. Private to the collection."""

from __future__ import annotations

from typing import Any, Mapping

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.request import dns_label, instance_names
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils._power_states import check_shutdown_timeout
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import NO_HOOKS, Hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ERROR, PLACED_STATES, Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import Build
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import Launch, check_request
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.power import Power
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.schedule import syncs_first
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

# The instance's fields a result and a diff show.
SHOWN = ("name", "uuid", "host", "state", "vcpus", "memory_mb")


class Server:
    """``args`` are berth.fleet.server's validated options (the requester's, and the task's own:
    state, timeouts), ``settings`` the operator's; ``ledger`` the opened ledger.

    The instances are ``args["name"]`` itself, or with ``args["count"]`` ``<name>-1`` ..
    ``<name>-<count>`` as playbooks/launch.yml names them. ``connect`` opens the hypervisors
    (libvirt's by default)."""

    def __init__(self, args: Mapping[str, Any], settings: Settings, ledger: Ledger, task_vars: Mapping[str, Any],
                 template_path: str, check_mode: bool, diff: bool, hooks: Hooks = NO_HOOKS,
                 connect: Connect = Hypervisor) -> None:
        self.args, self.settings, self.ledger, self.task_vars = args, settings, ledger, task_vars
        self.template_path, self.check_mode, self.diff, self.hooks = template_path, check_mode, diff, hooks
        self.connect = connect

    def run(self) -> dict[str, Any]:
        args = self.args
        if args["count"] is None:
            names = [dns_label("name", args["name"])]
        else:
            names = instance_names(args["name"], args["count"])
        check_shutdown_timeout(args["shutdown_timeout"])
        if args["state"] != "absent" and syncs_first(self.settings):
            self.ledger.start_if_missing()  # before the first read: this launch may start it
        before = self._rows(names)
        if args["state"] == "absent":
            result = self._absent(before)
        else:
            result = self._present(names, before)
        diffs = []
        if args["count"] is None:
            result["instance"] = (result["instances"] or [None])[0]
            if self.diff:
                diffs.append({"before": _shown(before[0] if before else None), "after": _shown(result["instance"]),
                              "before_header": f"{names[0]} (ledger)", "after_header": f"{names[0]} (wanted)"})
        # Each build's domain XML, before and as defined (or planned): Ansible prints a task's
        # top-level diff, never one inside its results, so they move up here.
        diffs += [build.pop("diff") for build in result.get("results", []) if "diff" in build]
        if diffs:
            result["diff"] = diffs
        return result

    def _rows(self, names: list[str]) -> list[dict[str, Any]]:
        """The ledger's rows of ``names``, in their order, each with its hypervisor's URI."""
        by_name = {row["name"]: row for row in self.ledger.instances(names)}
        return [by_name[name] for name in names if name in by_name]

    def _absent(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        if not rows:
            return {"changed": False, "instances": [], "msg": f"{self.args['name']} is absent already"}
        placements = [{key: row[key] for key in ("name", "uuid", "host", "uri")} for row in rows]
        removed = Build(self.settings, self.ledger, self.template_path, self.check_mode, False, self.hooks,
                        self.args["timeout"], self.connect).remove(placements)
        verb = "would delete" if self.check_mode else "deleted"
        result = {"changed": removed["changed"], "instances": [], "results": removed["results"],
                  "msg": removed.get("msg") or f"{verb} " + ", ".join(f"{row['name']} from {row['host']}" for row in rows)}
        if removed.get("failed"):
            result["failed"] = True
        return result

    def _present(self, names: list[str], before: list[dict[str, Any]]) -> dict[str, Any]:
        args = self.args
        if all(row["state"] != ERROR for row in before) and len(before) == len(names):
            # All there: nothing to launch, and no request to check (an existing instance needs
            # no flavor to be declared present, stopped or absent).
            summary = (f"{names[0]} exists already" if args["count"] is None
                       else f"all {len(names)} instances named {args['name']} exist already")
            launched = {"changed": False, "schedule": {"placements": [], "existing": before, "summary": summary}}
        else:
            # The request is checked only when something is to be launched: an existing instance needs
            # no flavor to be declared present, stopped or absent.
            request = check_request(args, self.settings)
            launched = Launch(request, self.settings, names, args["name"], self.ledger, self.task_vars,
                              self.template_path, self.check_mode, self.diff, self.hooks,
                              ignore_hosts=args.get("ignore_hosts") or (), timeout_s=args["timeout"],
                              connect=self.connect).run()
        # The schedule's answer (placements, existing, decision, summary, timing), the builds'
        # results, and the instances as the ledger has them now.
        result = {**launched["schedule"], "changed": launched["changed"],
                  "results": launched.get("build", {}).get("results", [])}
        if launched.get("failed"):
            result.update(failed=True, msg=launched["msg"], instances=self._rows(names))
            return result
        if self.check_mode:
            planned = [{**placement, "state": "PLANNED"} for placement in result["placements"]]
            by_name = {row["name"]: row for row in [*result["existing"], *planned]}
            result["instances"] = [by_name[name] for name in names if name in by_name]
            result["msg"] = "; ".join([f"would build {p['name']} on {p['host']}" for p in planned]
                                      or [result["summary"]])
        else:
            result["instances"] = self._rows(names)
            built = [f"built {item['item']['name']} on {item['host']}" for item in result["results"]]
            result["msg"] = "; ".join(built or [result["summary"]])
        wanted = args["state"] if args["state"] in ("running", "stopped") else None
        placed = [row for row in result["instances"] if row["state"] in PLACED_STATES]
        if wanted is not None and placed:
            busy = [row["name"] for row in result["instances"] if row["state"] not in PLACED_STATES + ("PLANNED",)]
            if busy:
                raise BerthError(f"{', '.join(busy)}: another run is building or moving it; run again once it is done")
            powered = Power(placed, wanted, self.ledger, args["shutdown_timeout"], args["timeout"],
                            self.check_mode, UriPolicy.from_settings(self.settings.uri_policy), self.connect).run()
            if powered.get("failed"):
                result.update(failed=True, msg=powered["msg"])
            elif powered["changed"]:
                result.update(changed=True, msg=f"{result['msg']}; {powered['msg']}")
            if not self.check_mode:
                result["instances"] = self._rows(names)
        return result


def _shown(row: Mapping[str, Any] | None) -> dict[str, Any]:
    return {key: row.get(key) for key in SHOWN} if row else {"state": "absent"}
