#!/usr/bin/env python3
"""Benchmark: how long a deadline takes on the real clock, which the tests no longer assert.

    .venv/bin/python benchmarks/deadlines.py [--rounds 3] [--skip-lab]
        [--out benchmarks/results/deadlines.md]

The tests assert what a deadline does on a clock they move by hand (or by its outcome on the
lab); how long it takes on a real machine is measured here, beside the deadline it should keep:

- ``in-process sync``: ``Sync.run`` over 7 libvirt test-driver hypervisors opened in this
  process and one whose session never answers (its timeout 0.5, 1 and 2 s; the sync gives it up
  after twice that), into a SQLite ledger: the seconds until ``run()`` returns
  (tests/unit/plugins/plugin_utils/test_sync.py asserts the behaviour on a manual clock).
- ``lab gather``: ``ansible-playbook playbooks/gather.yml`` over a 3-hypervisor lab fleet
  (lab/fleet.py, real libvirtd daemons) with the source's timeout 3 s (deadline 6 s), with
  every daemon answering and with hv3's libvirtd stopped (SIGSTOP: its socket takes the
  connection, then nothing answers): the run's wall time and the sync's own ``duration_s``
  (tests/integration/test_tracker_sync.py asserts that hv3 is given up by its deadline).
- ``test hooks' barrier`` (tests/integration/callback_plugins/berth_test_hooks.py): returning
  with its release file present, and waiting out a 0.3 s timeout (tests/unit/test_berth_test_hooks.py
  asserts both on a fake clock).

Needs root for the lab part (``--skip-lab`` leaves it out). Writes --out.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "lab"), str(REPO / "benchmarks"), str(REPO / ".cache" / "collections")]

import fleet  # noqa: E402  (lab/fleet.py)
from synthetic import test_driver_node  # noqa: E402

from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.sync import (  # noqa: E402
    Sync,
    SyncRequest,
    Target,
)


def _module(name: str, path: Path) -> Any:
    """A test helper module imported under its own name (tests/ has two modules named conftest)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NODE_FILES = UriPolicy(allow_test_files=True)
SETTINGS = {"storage_pool": "default", "settings": {}, "aggregates": [], "availability_zone": "nova",
            "keepalive_interval": 5, "keepalive_count": 3}
TIMEOUTS_S = (0.5, 1.0, 2.0)
LAB_TIMEOUT_S = 3


class _Hung:
    """A hypervisor session that never answers until ``release`` is set."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release

    def __enter__(self) -> None:
        self.release.wait()
        raise ConnectionError("released after the benchmark")

    def __exit__(self, *_exc: Any) -> bool:
        return False


def in_process_sync(directory: Path, rounds: int) -> list[dict[str, Any]]:
    targets = []
    for number in range(1, 9):
        path = directory / f"hv{number}.xml"
        path.write_text(test_driver_node(number))
        targets.append(Target.from_hostvars(f"hv{number}", {"berth_libvirt_uri": f"test://{path}",
                                                            "berth_hypervisor": {**SETTINGS, "timeout": 5.0}},
                                            NODE_FILES))
    rows = []
    for timeout_s in TIMEOUTS_S:
        hung = Target(**{**targets[0].__dict__, "timeout_s": timeout_s})
        seconds = []
        for number in range(rounds):
            release = threading.Event()

            def connect(host, uri, timeout_s, **connection):
                return _Hung(release) if host == hung.host else Hypervisor(host, uri, timeout_s, **connection)

            ledger = Ledger(f"sqlite:///{directory}/ledger-{timeout_s}-{number}.sqlite3").open()
            try:
                started = time.perf_counter()
                result = Sync(SyncRequest(uri_policy=NODE_FILES, targets=(hung, *targets[1:]), workers=4),
                              ledger, connect).run()
                seconds.append(time.perf_counter() - started)
            finally:
                release.set()
                ledger.close()
            assert result["summary"]["down"] == 1, result["summary"]
        rows.append({"part": "in-process sync, hv1 hung", "deadline_s": hung.deadline_s, "seconds": seconds})
    return rows


def lab_gather(rounds: int) -> list[dict[str, Any]]:
    lab_conftest = _module("lab_conftest", REPO / "tests" / "integration" / "conftest.py")
    directory = tempfile.mkdtemp(prefix="berth-deadlines-", dir="/tmp")
    try:
        lab = lab_conftest.Lab(directory, fleet.up(directory, hosts=3))
        path = Path(directory) / "bench-ledger.sqlite3"
        use = ("-e", f"berth_ledger_url=sqlite:///{path}")
        inventory = Path(lab.inventory_copy(Path(directory) / "bench", f"sqlite:///{path}"))
        source = json.loads((inventory / "fleet.berth.yml").read_text())
        (inventory / "fleet.berth.yml").write_text(
            json.dumps({**source, "timeout": LAB_TIMEOUT_S, "gather_facts": False}) + "\n")

        def gather() -> tuple[float, float, dict]:
            started = time.perf_counter()
            output = lab.finish(lab.start_playbook("gather.yml", *use, inventory=str(inventory)))
            wall_s = time.perf_counter() - started
            assert output["rc"] == 0, lab_conftest.failed_messages(output)
            [synced] = lab_conftest.task_results(output, "Sync the hypervisors into the ledger")
            return wall_s, synced["summary"]["duration_s"], synced

        gather()  # the first sync fills the new ledger: not what is measured
        answering: dict[str, list[float]] = {"wall": [], "sync": []}
        hung: dict[str, list[float]] = {"wall": [], "sync": []}
        for _round in range(rounds):
            wall_s, sync_s, _synced = gather()
            answering["wall"].append(wall_s)
            answering["sync"].append(sync_s)
            pid = fleet.daemon_pid(directory, "hv3")
            os.kill(pid, signal.SIGSTOP)
            try:
                wall_s, sync_s, synced = gather()
            finally:
                os.kill(pid, signal.SIGCONT)
            assert synced["summary"]["down"] == 1, synced["summary"]
            hung["wall"].append(wall_s)
            hung["sync"].append(sync_s)
        deadline_s = 2 * LAB_TIMEOUT_S
        return [
            {"part": "lab gather.yml, all answering: run", "deadline_s": None, "seconds": answering["wall"]},
            {"part": "lab gather.yml, all answering: sync (duration_s)", "deadline_s": None,
             "seconds": answering["sync"]},
            {"part": "lab gather.yml, hv3 stopped: run", "deadline_s": deadline_s, "seconds": hung["wall"]},
            {"part": "lab gather.yml, hv3 stopped: sync (duration_s)", "deadline_s": deadline_s,
             "seconds": hung["sync"]},
        ]
    finally:
        fleet.discard(directory)


def barrier(directory: Path, rounds: int) -> list[dict[str, Any]]:
    test_hooks = _module("berth_test_hooks", REPO / "tests" / "integration" / "callback_plugins" / "berth_test_hooks.py")
    from ansible_collections.berth.fleet.plugins.plugin_utils import hooks

    rows = []
    for label, release, timeout_s in (("released", True, 60.0), ("waiting out its timeout", False, 0.3)):
        seconds = []
        for number in range(rounds):
            place = directory / f"barrier-{label[:4]}-{number}"
            place.mkdir()
            if release:
                (place / "release").touch()
            started = time.perf_counter()
            test_hooks.Barrier(str(place), hooks.AFTER_MOVE, parties=99, timeout_s=timeout_s).wait()
            seconds.append(time.perf_counter() - started)
        rows.append({"part": f"test hooks' barrier, {label}", "deadline_s": None if release else timeout_s,
                     "seconds": seconds})
    return rows


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| what | deadline (s) | rounds | median (s) | min-max (s) | median past the deadline (s) |",
             "|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        seconds, deadline_s = row["seconds"], row["deadline_s"]
        median = statistics.median(seconds)
        past = f"{median - deadline_s:.3f}" if deadline_s is not None else "-"
        lines.append(f"| {row['part']} | {deadline_s if deadline_s is not None else '-'} | {len(seconds)} | "
                     f"{median:.3f} | {min(seconds):.3f}-{max(seconds):.3f} | {past} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-lab", action="store_true")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "deadlines.md"))
    args = parser.parse_args()
    load_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="berth-deadlines-") as scratch:
        rows = in_process_sync(Path(scratch), args.rounds)
        rows += barrier(Path(scratch), args.rounds)
    if not args.skip_lab:
        rows += lab_gather(args.rounds)
    load_after = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    lines = [
        "# Deadlines on the real clock", "",
        "What the tests assert on a clock they move by hand (a hung hypervisor given up at its deadline, a",
        "barrier's release and timeout), timed on this machine: each beside the deadline it should keep.",
        "`in-process sync`: Sync.run over 7 libvirt test-driver hypervisors in this process and one whose",
        "session never answers, 4 reading at once, into a SQLite ledger. `lab gather.yml`: the whole",
        f"ansible-playbook run over 3 real lab libvirtd daemons, the source's timeout {LAB_TIMEOUT_S} s, with",
        "hv3's daemon stopped (SIGSTOP) or not; `sync (duration_s)` is the time the sync itself reports.",
        "`test hooks' barrier`: the integration tests' barrier, polling every "
        "0.05 s.", "",
        f"Reproduce: `.venv/bin/python benchmarks/deadlines.py --rounds {args.rounds}` (root, after scripts/setup).", "",
        f"Machine: {os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}. "
        f"Load average before: {load_before}; after: {load_after}. Whole benchmark: "
        f"{time.perf_counter() - began:.0f} s.", "",
        *table(rows), "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
