"""Powering an instance's domain: what brings it from one state to another (a pure table), and
the graceful shutdown, with its timeout, that berth.fleet.power and berth.fleet.resize share.
Private to the collection."""

from __future__ import annotations

import time
from typing import Any, Callable

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import HypervisorDriver

# libvirt's domain states by what they mean here.
OFF_STATES = ("shutoff", "crashed")
RUNNING_STATES = ("running", "blocked", "shutdown")  # shutdown: being shut down, still running
PAUSED_STATES = ("paused",)
# As Nova's libvirt driver does, the power button is pressed again this often: a guest that was
# not listening yet (still booting) gets another chance.
SHUTDOWN_RETRY_INTERVAL_S = 10.0
POLL_S = 0.5

# The actions, by name (as results report them).
START, SHUT_DOWN, PAUSE, RESUME, REBOOT = "start", "shut down", "pause", "resume", "reboot"


def check_shutdown_timeout(seconds: int) -> None:
    """The O(shutdown_timeout) of power and resize: 0 or more seconds."""
    if seconds < 0:
        raise InputError("shutdown_timeout", f"shutdown_timeout must be 0 or more seconds, got {seconds}")


def power_action(wanted: str, domain_state: str, name: str) -> str | None:
    """What brings a domain from ``domain_state`` (libvirt's) to ``wanted`` (running, stopped,
    paused, rebooted): one of the actions above, or None when it is there already. What Nova
    refuses is bad input here too: pausing a stopped instance; and a state Berth has no action
    for (pmsuspended, nostate...) is named."""
    if wanted == "rebooted" and (domain_state in RUNNING_STATES or domain_state in PAUSED_STATES):
        return REBOOT
    if wanted in ("running", "rebooted"):
        if domain_state in OFF_STATES:
            return START
        if domain_state in PAUSED_STATES:
            return RESUME
        if domain_state in RUNNING_STATES:
            return None
    elif wanted == "stopped":
        if domain_state in OFF_STATES:
            return None
        if domain_state in RUNNING_STATES or domain_state in PAUSED_STATES:
            return SHUT_DOWN
    elif wanted == "paused":
        if domain_state in PAUSED_STATES:
            return None
        if domain_state in ("running", "blocked"):
            return PAUSE
        if domain_state in OFF_STATES:
            raise InputError("state", f"{name} is shut off: only a running instance pauses (start it first)")
    else:
        raise InputError("state", f"state must be running, stopped, paused or rebooted, got {wanted!r}")
    raise InputError("state", f"{name}'s domain is {domain_state} in libvirt, which Berth has no action for "
                              f"towards {wanted}; run again once it is running, paused or shut off")


def shut_down(hv: HypervisorDriver, uuid: str, timeout_s: float, step: Callable[..., None],
              clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], Any] = time.sleep) -> str:
    """Shut a domain down as Nova's clean shutdown does: ask its guest (the ACPI power button),
    again every SHUTDOWN_RETRY_INTERVAL_S, wait up to ``timeout_s`` seconds for it to power off,
    then power it off. A paused guest cannot answer the button, and a timeout of 0 leaves no
    time: both are powered off at once. Returns how it went: ``off already``, ``graceful`` (the
    guest shut down) or ``powered off``."""
    state = hv.domain_state(uuid)
    if state is None:
        raise HypervisorError(hv.host, f"domain {uuid} is not there")
    if state in OFF_STATES:
        return "off already"
    if state in PAUSED_STATES or timeout_s <= 0:
        hv.stop(uuid)
        step("powered off" + (" (paused: its guest cannot answer the power button)" if state in PAUSED_STATES
                              else " (shutdown_timeout 0)"))
        return "powered off"
    step(f"asking the guest to shut down (ACPI power button), waiting up to {timeout_s:g} s")
    deadline = clock() + timeout_s
    next_ask = clock()
    while True:
        if hv.domain_state(uuid) in OFF_STATES:
            step("shut down by its guest")
            return "graceful"
        now = clock()
        if now >= deadline:
            break
        if now >= next_ask:
            try:
                hv.shutdown(uuid)
            except HypervisorError:
                if hv.domain_state(uuid) not in OFF_STATES:
                    raise
                continue  # it went off just now: said so above, on the next turn
            next_ask = now + SHUTDOWN_RETRY_INTERVAL_S
        sleep(min(POLL_S, max(0.0, deadline - now)))
    hv.stop(uuid)
    step(f"did not shut down within {timeout_s:g} s: powered off")
    return "powered off"
