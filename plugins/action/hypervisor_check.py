"""berth.fleet.hypervisor_check: a hypervisor's prerequisites checked through libvirt (controller
side); the work is operations/check.py's."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.check import check_hypervisor
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.sync import Target


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        host = task_vars["inventory_hostname"]
        try:
            target = Target.from_hostvars(host, task_vars, UriPolicy.from_settings(args["uri_policy"]))
        except InputError as exc:
            # Not an option of this module: the play runs it on a host of the wrong kind.
            raise BerthError(f"{exc}; run berth.fleet.hypervisor_check on the hypervisors' group") from exc
        result = check_hypervisor(target, args["networks"])
        lines = [check["detail"] for check in result["checks"]] if result["ready"] else result["missing"]
        result.update(changed=False, summary=f"{host}: {'ready' if result['ready'] else 'MISSING'}: "
                                             + "; ".join(lines))
        if not result["ready"]:
            result.update(failed=True, msg=f"{host} lacks what Berth needs: " + "; ".join(result["missing"]))
        return result
