"""The one place where Berth's controller-side actions turn exceptions into failed tasks."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import POLICY_ENV, POLICY_VARIABLE, UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils._argspec import (
    decode_json_options,
    module_argument_spec,
)


class BerthAction(ActionBase):
    """Validate the arguments against ``ARGUMENT_SPEC`` (a dict or list option may come as a JSON
    string, as an AWX survey gives it) and the size limits, run ``run_berth``, report failures."""

    TRANSFERS_FILES = False
    # Each action's own, derived from its module's DOCUMENTATION when the action is defined.
    ARGUMENT_SPEC: dict[str, Any] = {}
    # With the task argument from_vars (actions that document it): the variable prefixes an
    # option is looked up under, in order, and the options a task always sets itself.
    VARIABLE_PREFIXES: tuple[str, ...] = ()
    TASK_ONLY: frozenset[str] = frozenset({"from_vars"})
    # Options that are the operator's configuration only (which host devices a guest may get):
    # from_vars reads them from the berth_* settings, never from a variable a requester can set.
    OPERATOR_ONLY: frozenset[str] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.ARGUMENT_SPEC = module_argument_spec(sys.modules[cls.__module__].__file__)

    def run(self, tmp: Any = None, task_vars: Any = None) -> dict[str, Any]:
        if self.VARIABLE_PREFIXES and self._task.args.get("from_vars"):
            self._task.args = {**self._from_vars(task_vars or {}), **self._task.args}
        if "ledger_url" in self.ARGUMENT_SPEC and self._task.args.get("ledger_url") is None \
                and "berth_ledger_url" in (task_vars or {}):
            # The inventory's ledger, as the playbooks pass it: an ad-hoc task
            # (ansible -m berth.fleet.capacity) then reads the same ledger as a launch.
            self._task.args = {**self._task.args, "ledger_url": self._templar.template(task_vars["berth_ledger_url"])}
        result = super().run(tmp, task_vars)
        try:
            # Before validation: Ansible would split a JSON list at its commas.
            self._task.args = decode_json_options(self._task.args, self.ARGUMENT_SPEC)
            validation, args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
            limits.check_options(args)
            if "uri_policy" in self.ARGUMENT_SPEC:
                # Resolved once, handed on as plain settings (operations pass options on as they are).
                args["uri_policy"] = operator_uri_policy(args["uri_policy"], task_vars or {},
                                                         self._templar).to_settings()
            result.update(self.run_berth(args, task_vars or {}))
        except InputError as exc:
            result.update(failed=True, msg=str(exc), field=exc.field)
        except BerthError as exc:
            result.update(failed=True, msg=str(exc))
        return result

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _from_vars(self, task_vars: dict[str, Any]) -> dict[str, Any]:
        """Each option the task does not set, from the first variable of its name under
        VARIABLE_PREFIXES (a launch's extra vars, -e flavor=m1.small; the operator's berth_*
        settings, set once in the inventory). ``boot`` comes from berth_boot_kernel,
        berth_boot_initrd and berth_boot_cmdline, the operator's settings of direct kernel boot."""
        found = {}
        for option in self.ARGUMENT_SPEC:
            if option in self.TASK_ONLY:
                continue
            prefixes = ("berth_",) if option in self.OPERATOR_ONLY else self.VARIABLE_PREFIXES
            for prefix in prefixes:
                if f"{prefix}{option}" in task_vars:
                    found[option] = self._templar.template(task_vars[f"{prefix}{option}"])
                    break
        if "boot" in self.ARGUMENT_SPEC and "boot" not in found and task_vars.get("berth_boot_kernel"):
            found["boot"] = {part: self._templar.template(task_vars[f"berth_boot_{part}"])
                             for part in ("kernel", "initrd", "cmdline") if f"berth_boot_{part}" in task_vars}
        return found


def operator_uri_policy(option: Any, task_vars: dict[str, Any], templar: Any) -> UriPolicy:
    """The operator's URI policy (doc fragment berth.fleet.uri_policy): the task's uri_policy,
    else the variable berth_uri_policy (which a berth.fleet.hypervisors source sets for its
    run), else $BERTH_URI_POLICY (JSON), else the strict default; the SSH key file and
    known_hosts file of $BERTH_SSH_KEYFILE and $BERTH_SSH_KNOWN_HOSTS allowed as given."""
    field = "uri_policy"
    settings = option
    if settings is None and POLICY_VARIABLE in task_vars:
        settings, field = templar.template(task_vars[POLICY_VARIABLE]), POLICY_VARIABLE
    if settings is None and os.environ.get(POLICY_ENV):
        field = POLICY_ENV
        try:
            settings = json.loads(os.environ[POLICY_ENV])
        except ValueError as exc:
            raise InputError(field, f"${POLICY_ENV} is not JSON: {exc}") from None
    return UriPolicy.from_settings(settings, field, ssh_keyfile=os.environ.get("BERTH_SSH_KEYFILE"),
                                   known_hosts=os.environ.get("BERTH_SSH_KNOWN_HOSTS"))


def inventory_host_states(task_vars: dict[str, Any], group: str,
                          only: list[str] | None = None) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The berth_host_state of each host of ``group`` (or of those in ``only``), and their URIs."""
    members = task_vars.get("groups", {}).get(group)
    if not members:
        raise InputError(
            "hypervisor_group",
            f"the inventory has no hosts in group {group!r}: point -i at a berth.fleet.hypervisors "
            "source, or pass hosts",
        )
    hostvars = task_vars["hostvars"]
    states, uris = [], {}
    for host in members:
        if only is not None and host not in only:
            continue
        variables = hostvars[host]
        if "berth_host_state" not in variables:
            raise InputError(
                "hypervisor_group",
                f"host {host} in group {group!r} has no berth_host_state (not from berth.fleet.hypervisors)",
            )
        states.append(dict(variables["berth_host_state"]))
        uris[host] = variables.get("berth_libvirt_uri")
    return states, uris
