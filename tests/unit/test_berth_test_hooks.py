"""The integration tests' hooks plugin (tests/integration/callback_plugins/berth_test_hooks.py):
its barrier holds runs until all have come, its faults fail the named host at the named point,
its unsafe claim guard really lets a claim overfill a host, and what it installs in a process
reaches the workers that process forks, as Ansible's do."""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import threading
import time
from pathlib import Path

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils import hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ClaimConflict, Ledger, claims

PLUGIN = Path(__file__).resolve().parents[1] / "integration" / "callback_plugins" / "berth_test_hooks.py"
_spec = importlib.util.spec_from_file_location("berth_test_hooks", PLUGIN)
test_hooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(test_hooks)

TINY = Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1)


@pytest.fixture
def restored(monkeypatch):
    """The process's hooks and claim guard as they were, whatever a test installs."""
    before = hooks.installed()
    monkeypatch.setattr(claims, "CLAIM_GUARD", claims.CLAIM_GUARD)
    yield
    hooks.install(before)


def test_a_barrier_at_another_point_passes_at_once_and_leaves_no_trace(tmp_path):
    hooked = test_hooks.TestHooks(test_hooks.Barrier(str(tmp_path), hooks.AFTER_CLAIM, parties=2, timeout_s=60))
    hooked.reached(hooks.BEFORE_CLAIM)
    assert os.listdir(tmp_path) == []


def test_a_barrier_holds_each_run_until_every_party_has_arrived(tmp_path):
    barrier = test_hooks.Barrier(str(tmp_path), hooks.BEFORE_CLAIM, parties=2, timeout_s=60)
    hooked = test_hooks.TestHooks(barrier)
    passed = []
    first = threading.Thread(target=lambda: passed.append(hooked.reached(hooks.BEFORE_CLAIM)))
    first.start()
    while not (tmp_path / "arrived").exists() or not os.listdir(tmp_path / "arrived"):
        time.sleep(0.01)
    time.sleep(0.2)
    assert first.is_alive() and passed == []  # arrived, and still waiting for its peer
    hooked.reached(hooks.BEFORE_CLAIM)
    first.join(timeout=10)
    assert not first.is_alive() and passed == [None]
    assert len(os.listdir(tmp_path / "arrived")) == 2


class FakeTime:
    """A barrier's clock and sleep: time moves only by what it sleeps."""

    def __init__(self) -> None:
        self.now_s, self.slept = 0.0, []

    def clock(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now_s += seconds


def test_a_barrier_lets_a_run_go_on_release_or_at_its_timeout(tmp_path):
    (tmp_path / "release").touch()
    released = FakeTime()
    test_hooks.Barrier(str(tmp_path), hooks.AFTER_MOVE, parties=99, timeout_s=60,
                       clock=released.clock, sleep=released.sleep).wait()
    assert released.slept == []  # released already: on at once, without waiting
    (tmp_path / "release").unlink()
    waited = FakeTime()
    test_hooks.Barrier(str(tmp_path), hooks.AFTER_MOVE, parties=99, timeout_s=0.3,
                       clock=waited.clock, sleep=waited.sleep).wait()
    # Polled until its timeout had passed on its clock, and not one poll longer.
    assert set(waited.slept) == {test_hooks.POLL_S}
    assert sum(waited.slept[:-1]) < 0.3 <= sum(waited.slept)


def test_a_fault_fails_its_host_at_its_point_only():
    hooked = test_hooks.TestHooks(faults=test_hooks.parse_faults(["hv1:after-root-volume", "hv2:after-define"]))
    with pytest.raises(HypervisorError, match="^hv1: injected fault at after-root-volume$") as raised:
        hooked.reached(hooks.AFTER_ROOT_VOLUME, host="hv1", instance="i")
    assert raised.value.host == "hv1"
    hooked.reached(hooks.AFTER_ROOT_VOLUME, host="hv2")
    hooked.reached(hooks.AFTER_DEFINE, host="hv1")
    hooked.reached(hooks.AFTER_DEFINE)
    with pytest.raises(HypervisorError, match="^hv2: injected fault at after-define$"):
        hooked.reached(hooks.AFTER_DEFINE, host="hv2")


def test_a_fault_at_a_point_that_does_not_exist_is_refused():
    """The old switch's "hv1:volume" would otherwise let a test pass with no fault at all."""
    with pytest.raises(ValueError, match="'volume' is none of the hooks' points"):
        test_hooks.parse_faults(["hv1:volume"])


def _told_in_a_forked_worker(queue):
    queue.put(type(hooks.installed()).__name__)
    try:
        hooks.installed().reached(hooks.AFTER_DEFINE, host="hv1")
    except HypervisorError as exc:
        queue.put(str(exc))


def test_what_the_main_process_installs_reaches_the_workers_it_forks(restored):
    hooks.install(test_hooks.TestHooks(faults=[("hv1", hooks.AFTER_DEFINE)]))
    context = multiprocessing.get_context("fork")  # as ansible/utils/multiprocessing.py
    queue = context.Queue()
    worker = context.Process(target=_told_in_a_forked_worker, args=(queue,))
    worker.start()
    worker.join(timeout=30)
    assert [queue.get(timeout=5), queue.get(timeout=5)] == ["TestHooks", "hv1: injected fault at after-define"]


def _fleet(url):
    ledger = Ledger(url).open()
    # 2048 MB, 512 reserved, 2 vCPUs at ratio 1.0: room for two one-vCPU instances.
    ledger.sync_hypervisors([{
        "host": "hv1", "nodename": "hv1", "uuid": "hv-1", "service_up": True, "disabled": False,
        "vcpus_total": 2, "vcpus_used": 0, "total_usable_ram_mb": 2048, "free_ram_mb": 1536,
        "total_usable_disk_gb": 100, "free_disk_mb": 100 * 1024, "num_instances": 0, "num_io_ops": 0,
        "cpu_allocation_ratio": 1.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
        "reserved_host_memory_mb": 512, "reserved_host_disk_mb": 0, "domains": []}])
    return ledger


def _placements(*names):
    return [{"name": name, "host": "hv1", "hypervisor_uuid": "hv-1"} for name in names]


def test_the_unsafe_claim_guard_lets_a_claim_overfill_a_host_and_the_default_does_not(ledger_url, restored):
    ledger = _fleet(ledger_url)
    try:
        with pytest.raises(ClaimConflict, match="vCPU"):
            ledger.claim(_placements("web-1", "web-2", "web-3"), TINY, "test")
        test_hooks.install_unsafe_claims()
        ledger.claim(_placements("web-1", "web-2", "web-3"), TINY, "test")
        assert len(ledger.claims()) == 3
    finally:
        ledger.close()
