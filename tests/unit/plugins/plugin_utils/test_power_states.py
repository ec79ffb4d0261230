"""What brings a domain to a power state, and the graceful shutdown with its timeout, against a
small fake hypervisor and a fake clock (the lab's integration tests run them on real guests)."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.plugin_utils._power_states import (
    PAUSE,
    REBOOT,
    RESUME,
    SHUT_DOWN,
    START,
    SHUTDOWN_RETRY_INTERVAL_S,
    power_action,
    shut_down,
)


@pytest.mark.parametrize(("wanted", "domain_state", "action"), [
    ("running", "running", None), ("running", "shutoff", START), ("running", "crashed", START),
    ("running", "paused", RESUME), ("running", "shutdown", None),
    ("stopped", "shutoff", None), ("stopped", "running", SHUT_DOWN), ("stopped", "paused", SHUT_DOWN),
    ("stopped", "shutdown", SHUT_DOWN),
    ("paused", "paused", None), ("paused", "running", PAUSE),
    ("rebooted", "running", REBOOT), ("rebooted", "paused", REBOOT), ("rebooted", "shutoff", START),
], ids=str)
def test_each_state_is_reached_by_one_action_or_none(wanted, domain_state, action):
    assert power_action(wanted, domain_state, "web-1") == action


@pytest.mark.parametrize(("wanted", "domain_state", "why"), [
    ("paused", "shutoff", "web-1 is shut off: only a running instance pauses"),
    ("running", "pmsuspended", "web-1's domain is pmsuspended in libvirt, which Berth has no action for"),
    ("paused", "nostate", "no action for towards paused"),
    ("off", "running", "state must be running, stopped, paused or rebooted"),
], ids=str)
def test_what_nova_refuses_and_unknown_states_are_bad_input_naming_the_field(wanted, domain_state, why):
    with pytest.raises(InputError, match=why) as caught:
        power_action(wanted, domain_state, "web-1")
    assert caught.value.field == "state"


class FakeHypervisor:
    """A domain whose guest powers off ``answers_after`` power-button presses (never if None)."""

    host = "hv1"

    def __init__(self, state="running", answers_after=None, clock=None):
        self.state, self.answers_after, self.presses, self.calls = state, answers_after, 0, []

    def domain_state(self, uuid):
        return self.state

    def shutdown(self, uuid):
        self.calls.append("shutdown")
        if self.state == "shutoff":
            raise HypervisorError(self.host, "domain is not running")
        self.presses += 1
        if self.answers_after is not None and self.presses >= self.answers_after:
            self.state = "shutoff"

    def stop(self, uuid):
        self.calls.append("stop")
        self.state = "shutoff"
        return True


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def run(hv, timeout_s):
    clock, lines = Clock(), []
    how = shut_down(hv, "u", timeout_s, lambda what, detail=False: lines.append(what), clock, clock.sleep)
    return how, lines, clock.now


def test_a_guest_that_answers_the_power_button_shuts_down_gracefully():
    hv = FakeHypervisor(answers_after=1)
    how, lines, _elapsed = run(hv, 60)
    assert how == "graceful" and "stop" not in hv.calls
    assert lines == ["asking the guest to shut down (ACPI power button), waiting up to 60 s", "shut down by its guest"]


def test_the_button_is_pressed_again_for_a_guest_that_was_not_listening_yet():
    hv = FakeHypervisor(answers_after=3)
    how, _lines, elapsed = run(hv, 60)
    assert (how, hv.presses) == ("graceful", 3)
    assert elapsed >= 2 * SHUTDOWN_RETRY_INTERVAL_S


def test_a_guest_that_ignores_the_button_is_powered_off_when_the_timeout_is_over():
    hv = FakeHypervisor(answers_after=None)
    how, lines, elapsed = run(hv, 25)
    assert (how, hv.calls[-1], hv.state) == ("powered off", "stop", "shutoff")
    assert elapsed == pytest.approx(25)
    assert hv.presses == 3  # at 0, 10 and 20 s
    assert lines[-1] == "did not shut down within 25 s: powered off"


@pytest.mark.parametrize(("state", "timeout_s", "line"), [
    ("paused", 60, "powered off (paused: its guest cannot answer the power button)"),
    ("running", 0, "powered off (shutdown_timeout 0)"),
], ids=str)
def test_a_paused_guest_or_no_time_is_powered_off_at_once(state, timeout_s, line):
    hv = FakeHypervisor(state=state, answers_after=1)
    assert run(hv, timeout_s)[:2] == ("powered off", [line])
    assert hv.calls == ["stop"]


def test_an_off_domain_is_left_alone_and_a_missing_one_is_an_error():
    hv = FakeHypervisor(state="shutoff")
    assert run(hv, 60)[:2] == ("off already", []) and hv.calls == []
    hv.state = None
    with pytest.raises(HypervisorError, match="domain u is not there"):
        run(hv, 60)
