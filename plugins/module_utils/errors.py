"""Berth's one exception hierarchy.

Shared code raises these; exactly one place per entry point (an action plugin's ``run`` or the
inventory plugin's ``parse``) turns them into a failed task or an ``AnsibleError``.
"""

from __future__ import annotations

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)

# Bad user input, with the offending field named (``flavor.vcpus``, ``name`` ...). The placement
# engine raises the same class, so one ``except InputError`` covers all input checks.
InputError = SchedulerInputError


class BerthError(Exception):
    """A failure that is not the user's input: a hypervisor, the ledger, a lost race."""


class HypervisorError(BerthError):
    """A libvirt call failed or timed out; ``host`` names the hypervisor."""

    def __init__(self, host: str, message: str) -> None:
        super().__init__(f"{host}: {message}")
        self.host = host


class ControllerRefusal(HypervisorError):
    """The controller, not the host, stopped the step: its URI policy refuses the host's URI, it
    withholds the libvirt credentials from that host, or it cannot read the image it was to upload
    there. Never the host's failed build (BuildFailureWeigher counts only what failed on the host).
    A HypervisorError still, so that whatever skips a host it cannot reach skips it the same way."""


class NotSupported(HypervisorError):
    """The hypervisor's driver does not offer the call at all (libvirt's VIR_ERR_NO_SUPPORT): a
    check that needs it is skipped, and says so, where a failed call would refuse."""


class LedgerError(BerthError):
    """The ledger cannot be used (locked, corrupt, newer schema, unreachable)."""
