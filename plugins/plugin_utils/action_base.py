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
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import (
    OPERATOR_SETTINGS,
    TASK_OPTIONS,
    variable_warning,
)


class BerthAction(ActionBase):
    """Validate the arguments against ``ARGUMENT_SPEC`` (a dict or list option may come as a JSON
    string, as an AWX survey gives it) and the size limits, run ``run_berth``, report failures.

    Who sets what (plugin_utils/settings.py): an operator setting the task does not set comes
    from the variable ``berth_<name>`` (the inventory's), in every action, so an ad-hoc
    ``ansible -m`` task reads the settings a playbook does; with ``from_vars``, a requester
    option comes from the play variable ``<VARIABLE_PREFIX><name>``, else ``berth_<name>``, and
    a play variable ``<VARIABLE_PREFIX><name>`` named as an operator setting is ignored, with a
    warning in the task's result."""

    TRANSFERS_FILES = False
    # Each action's own, derived from its module's DOCUMENTATION when the action is defined.
    ARGUMENT_SPEC: dict[str, Any] = {}
    # The prefix of the play variables ``from_vars`` reads requester options from, for the
    # actions that document from_vars ("" for a launch's extra variables, -e flavor=m1.small).
    VARIABLE_PREFIX: str | None = None
    # Requester options a task of this action always sets itself: from_vars never reads them.
    TASK_SET: frozenset[str] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.ARGUMENT_SPEC = module_argument_spec(sys.modules[cls.__module__].__file__)

    def run(self, tmp: Any = None, task_vars: Any = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        self._task.args, ignored = self._gather_arguments(task_vars)
        result = super().run(tmp, task_vars)
        try:
            # Before validation: Ansible would split a JSON list at its commas.
            self._task.args = decode_json_options(self._task.args, self.ARGUMENT_SPEC)
            validation, args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
            limits.check_options(args)
            if "uri_policy" in self.ARGUMENT_SPEC:
                # Resolved once, handed on as plain settings (operations pass options on as they are).
                args["uri_policy"] = operator_uri_policy(args["uri_policy"], task_vars, self._templar).to_settings()
            result.update(self.run_berth(args, task_vars))
        except InputError as exc:
            result.update(failed=True, msg=str(exc), field=exc.field)
        except BerthError as exc:
            result.update(failed=True, msg=str(exc))
        if ignored:
            result["warnings"] = ignored + list(result.get("warnings") or [])
        return result

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _gather_arguments(self, task_vars: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The task's arguments, with the options it does not set taken from the variables as
        the class's docstring says; and the warnings for the variables ignored."""
        args, ignored = dict(self._task.args), []
        if self.VARIABLE_PREFIX is not None and args.get("from_vars"):
            found, ignored = self._from_vars(task_vars)
            args = {**found, **args}
        return {**args, **self._operator_settings(args, task_vars)}, ignored

    def _from_vars(self, task_vars: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Each requester option the task does not set, from the play variable
        ``<VARIABLE_PREFIX><option>`` (a launch's extra vars), else ``berth_<option>`` (the
        operator's fleet-wide default); and the warnings for the play variables of that prefix
        named as operator settings, which are ignored (_operator_settings reads those)."""
        found, ignored = {}, []
        for option in self.ARGUMENT_SPEC:
            variable = f"{self.VARIABLE_PREFIX}{option}"
            if option in OPERATOR_SETTINGS:
                if variable in task_vars:
                    ignored.append(variable_warning(variable, option))
                continue
            if option in TASK_OPTIONS or option in self.TASK_SET:
                continue
            for name in (variable, f"berth_{option}"):
                if name in task_vars:
                    found[option] = self._templar.template(task_vars[name])
                    break
        return found, ignored

    def _operator_settings(self, given: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        """Each operator setting this action takes and ``given`` does not set, from the variable
        ``berth_<name>`` where it is defined; ``boot`` also from berth_boot_kernel,
        berth_boot_initrd and berth_boot_cmdline, the operator's settings of direct kernel boot.
        The task's own arguments win: the play's author is the operator. (``uri_policy`` is
        left to operator_uri_policy, which names berth_uri_policy in its errors and falls back
        to the environment.)"""
        found = {}
        for option in self.ARGUMENT_SPEC:
            if option in OPERATOR_SETTINGS and option != "uri_policy" and given.get(option) is None \
                    and f"berth_{option}" in task_vars:
                found[option] = self._templar.template(task_vars[f"berth_{option}"])
        if "boot" in self.ARGUMENT_SPEC and given.get("boot") is None and "boot" not in found \
                and task_vars.get("berth_boot_kernel"):
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
