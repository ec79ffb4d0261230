"""The test-only barrier: inert without its variables, and a real rendezvous with them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from ansible_collections.berth.fleet.plugins.plugin_utils import race_barrier


def test_inert_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("BERTH_TEST_BARRIER_DIR", raising=False)
    race_barrier.wait(race_barrier.BEFORE_CLAIM)
    monkeypatch.setenv("BERTH_TEST_BARRIER_DIR", str(tmp_path))
    monkeypatch.setenv("BERTH_TEST_BARRIER_STAGE", race_barrier.AFTER_CLAIM)
    race_barrier.wait(race_barrier.BEFORE_CLAIM)  # another stage: passes at once, leaves no trace
    assert os.listdir(tmp_path) == []


def test_holds_until_every_party_has_arrived(tmp_path):
    """Two processes: the first waits at the barrier until the second arrives."""
    script = textwrap.dedent("""
        import sys, time
        from ansible_collections.berth.fleet.plugins.plugin_utils import race_barrier
        race_barrier.wait(race_barrier.BEFORE_CLAIM)
        print(time.time())
    """)
    env = {**os.environ, "BERTH_TEST_BARRIER_DIR": str(tmp_path), "BERTH_TEST_BARRIER_STAGE": "before-claim",
           "BERTH_TEST_BARRIER_PARTIES": "2", "PYTHONPATH": os.pathsep.join(sys.path)}
    first = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
    while not (tmp_path / "arrived").exists() or not os.listdir(tmp_path / "arrived"):
        assert first.poll() is None
    assert first.poll() is None  # arrived, and still waiting for its peer
    second = subprocess.run([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True, timeout=60, check=False)
    first.wait(timeout=60)
    assert second.returncode == 0 and first.returncode == 0
    assert len(os.listdir(tmp_path / "arrived")) == 2
