"""Test-only: installs Berth's test hooks (a barrier, injected faults) and, on request, a claim
guard that checks nothing, in the ansible-playbook process, before Ansible forks its workers.

Ansible forks each task's worker from its main process (ansible/utils/multiprocessing.py uses the
fork context), so what this plugin installs there when it is loaded is what every action plugin
of the run finds through ``hooks.installed()``. The collection itself reads none of this: only
Berth's integration tests put this directory on ANSIBLE_CALLBACK_PLUGINS and set its variables.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Collection

from ansible.plugins.callback import CallbackBase

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError
from ansible_collections.berth.fleet.plugins.plugin_utils import hooks

DOCUMENTATION = r"""
name: berth_test_hooks
type: aggregate
short_description: Barriers, injected faults and unsafe claims for Berth's integration tests
description:
  - Installs hooks (plugins/plugin_utils/hooks.py) in the ansible-playbook process,
    which the workers it forks inherit. Without any of its variables set it installs nothing.
options:
  barrier_dir:
    description:
      - A run that reaches O(barrier_point) writes a file named after its process into
        C(<barrier_dir>/arrived) and waits until O(barrier_parties) have arrived, the file
        C(<barrier_dir>/release) appears, or O(barrier_timeout_s) have passed.
    type: path
    env: [{name: BERTH_TEST_HOOKS_BARRIER_DIR}]
  barrier_point:
    description: The hooks' point the barrier holds runs at (for example C(before-claim)).
    type: str
    env: [{name: BERTH_TEST_HOOKS_BARRIER_POINT}]
  barrier_parties:
    description: How many arrivals release the barrier.
    type: int
    default: 1
    env: [{name: BERTH_TEST_HOOKS_BARRIER_PARTIES}]
  barrier_timeout_s:
    description: The longest a run waits at the barrier, in seconds.
    type: float
    default: 300
    env: [{name: BERTH_TEST_HOOKS_BARRIER_TIMEOUT_S}]
  faults:
    description:
      - C(host:point) pairs; an operation reaching C(point) on C(host) fails there with
        HypervisorError(host, "injected fault at <point>").
    type: list
    elements: str
    default: []
    env: [{name: BERTH_TEST_HOOKS_FAULTS}]
  unsafe_claims:
    description:
      - Replace the ledger's claim guard (its locks and re-check) by one that checks nothing,
        to prove that the concurrency test catches the race the guard prevents.
    type: bool
    default: false
    env: [{name: BERTH_TEST_HOOKS_UNSAFE_CLAIMS}]
"""

POLL_S = 0.05


class Barrier:
    """A rendezvous of runs (processes, or threads of one) at one of the hooks' points. ``clock``
    and ``sleep`` are what its timeout is counted and waited on (its unit tests give it a fake)."""

    def __init__(self, directory: str, point: str, parties: int = 1, timeout_s: float = 300,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], Any] = time.sleep) -> None:
        self.directory, self.point, self.parties, self.timeout_s = directory, point, parties, timeout_s
        self.clock, self.sleep = clock, sleep

    def wait(self) -> None:
        deadline = self.clock() + self.timeout_s
        arrived = os.path.join(self.directory, "arrived")
        os.makedirs(arrived, exist_ok=True)
        # One arrival per waiting thread: a task builds its instances in threads of one worker.
        with open(os.path.join(arrived, f"{os.getpid()}-{threading.get_ident()}"), "w", encoding="utf-8"):
            pass
        while self.clock() < deadline:
            if len(os.listdir(arrived)) >= self.parties or os.path.exists(os.path.join(self.directory, "release")):
                return
            self.sleep(POLL_S)


class TestHooks(hooks.Hooks):
    """Holds runs at ``barrier`` (if any) and fails the ``faults``' (host, point) pairs."""

    __test__ = False  # not a pytest class

    def __init__(self, barrier: Barrier | None = None, faults: Collection[tuple[str, str]] = ()) -> None:
        self.barrier = barrier
        self.faults = frozenset(faults)

    def reached(self, point: str, host: str | None = None, instance: str | None = None) -> None:
        if self.barrier is not None and point == self.barrier.point:
            self.barrier.wait()
        if host is not None and (host, point) in self.faults:
            raise HypervisorError(host, f"injected fault at {point}")


def install_unsafe_claims() -> None:
    """Claims with neither their locks nor their re-check, in this process and the workers it
    forks from now on. (The ledger is imported here only: a run without it stays as light.)"""
    from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import claims, host_states

    class UnsafeClaimGuard(claims.ClaimGuard):
        def views(self, db: Any, hv_uuids: Any) -> Any:
            return host_states.locked_views(db, hv_uuids, lock=False)

        def check_room(self, view: Any, spec: Any, flavor: Any, host: str) -> None:
            pass

        def check_group(self, db: Any, group: Any, new_hosts: Any) -> None:
            pass

    claims.CLAIM_GUARD = UnsafeClaimGuard()


def parse_faults(faults: Collection[str]) -> list[tuple[str, str]]:
    """"hv1:after-root-volume" entries as (host, point) pairs; refuses an unknown point, which
    would otherwise make a test pass without any fault."""
    known = {value for name, value in vars(hooks).items() if name.isupper() and isinstance(value, str)}
    pairs = []
    for fault in faults:
        host, colon, point = fault.partition(":")
        if not colon or point not in known:
            raise ValueError(f"fault {fault!r}: {point!r} is none of the hooks' points {sorted(known)}")
        pairs.append((host, point))
    return pairs


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "berth_test_hooks"
    # Loaded whenever the tests put this directory on the callback path; inert without its variables.
    CALLBACK_NEEDS_ENABLED = False

    def set_options(self, task_keys=None, var_options=None, direct=None):
        super().set_options(task_keys=task_keys, var_options=var_options, direct=direct)
        barrier = None
        if self.get_option("barrier_dir"):
            barrier = Barrier(self.get_option("barrier_dir"), self.get_option("barrier_point"),
                              self.get_option("barrier_parties"), self.get_option("barrier_timeout_s"))
        faults = parse_faults(self.get_option("faults"))
        if barrier is not None or faults:
            hooks.install(TestHooks(barrier, faults))
        if self.get_option("unsafe_claims"):
            install_unsafe_claims()
