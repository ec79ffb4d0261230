"""The one place where Berth's controller-side actions turn exceptions into failed tasks."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError

# Every action that touches the ledger takes these two options.
LEDGER_ARGS = {
    "ledger": {"type": "bool", "default": True},
    "ledger_url": {"type": "str", "no_log": True},
}


class BerthAction(ActionBase):
    """Validate the arguments against ``ARGUMENT_SPEC``, run ``run_berth``, report failures."""

    TRANSFERS_FILES = False
    ARGUMENT_SPEC: dict[str, Any] = {}

    def run(self, tmp: Any = None, task_vars: Any = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        validation, args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
        try:
            result.update(self.run_berth(args, task_vars or {}))
        except InputError as exc:
            result.update(failed=True, msg=str(exc), field=exc.field)
        except BerthError as exc:
            result.update(failed=True, msg=str(exc))
        return result

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError
