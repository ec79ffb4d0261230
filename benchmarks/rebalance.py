"""The rebalancer's planner at scale (issue 36: a plan for 1,000 hypervisors in under 10 s), as
berth.fleet.rebalance works it out from the ledger.

    .venv/bin/python benchmarks/rebalance.py [--hosts 100 1000 10000] [--moves 50]
        [--output benchmarks/results/rebalance.md]

The fleet: synthetic hypervisors (benchmarks/synthetic.py: generated libvirt facts through
host_facts.host_state and the tracker sync, as gather.yml writes real ones) in a SQLite ledger.
Instances (1 vCPU, 2048 MB, 1 GB, each with its recorded request) are claimed through Ledger.claim
as a launch claims them, as many as fit up to 6 on each of a tenth of the hosts (the hot ones) and
one on every fifth of the rest, so the fleet is uneven. Timed in-process with time.perf_counter,
garbage collector off as the action runs it: operations.rebalance.ledger_plan (the ledger's read
of the instances, groups and hosts, then the plan) for goal spread with berth_rebalance_threshold
0, min gain 0 and ``--moves`` moves at most, and for the drain of the most loaded host.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".cache" / "collections"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import synthetic  # noqa: E402

from ansible_collections.berth.fleet.plugins.module_utils.request import Request  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import without_gc  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.rebalance import ledger_plan  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings  # noqa: E402

FLAVOR = Flavor(name="bench.small", vcpus=1, memory_mb=2048, root_gb=1)
HOT_SHARE, HOT_INSTANCES = 10, 6


def fleet(ledger: Ledger, hosts: int) -> int:
    """Sync ``hosts`` synthetic hypervisors and claim the instances; returns how many."""
    synthetic.sync(ledger, 1, hosts)
    table, _generations = ledger.host_table()
    record = Request(flavor=FLAVOR).to_record()
    placements = []
    for position in range(len(table)):
        room = min(table.column("free_ram_mb")[position] // FLAVOR.memory_mb - 1,
                   table.column("vcpus_total")[position] * 4 - table.column("vcpus_used")[position])
        wanted = HOT_INSTANCES if position % HOT_SHARE == 0 else (1 if position % 5 == 1 else 0)
        for _index in range(max(0, min(wanted, room))):
            placements.append({"name": f"vm-{len(placements)}", "host": table.column("host")[position],
                               "hypervisor_uuid": table.column("uuid")[position]})
    for first in range(0, len(placements), 500):
        ledger.claim(placements[first:first + 500], FLAVOR, "bench", request=record)
    # Built: only ACTIVE and STOPPED instances move.
    for row in ledger.placed_instances():
        ledger.mark_active(row["uuid"])
    return len(placements)


def timed(call):
    mark = time.perf_counter()
    with without_gc():
        answer = call()
    return time.perf_counter() - mark, answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--moves", type=int, default=50)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    rows = []
    for hosts in args.hosts:
        with tempfile.TemporaryDirectory() as directory:
            ledger = Ledger(f"sqlite:///{directory}/ledger.sqlite3").open(create=True)
            count = fleet(ledger, hosts)
            # The synthetic fleet was written once: its syncs must not count as stale.
            settings = Settings(service_down_time=10 ** 9, rebalance_threshold=0.0, rebalance_min_gain=0.0,
                                rebalance_max_moves=args.moves)
            spread_s, spread = timed(lambda: ledger_plan(ledger, settings, "spread"))
            placed = [row["host"] for row in ledger.placed_instances()]
            hottest = max(sorted(set(placed)), key=placed.count)
            drain_s, drain = timed(lambda: ledger_plan(ledger, settings, "drain", drain_host=hottest))
            ledger.close()
        rows.append((hosts, count, spread_s, spread, drain_s, drain))
    load = os.getloadavg()
    lines = [
        "# The rebalancer's planner at scale (benchmarks/rebalance.py)", "",
        "Synthetic hypervisors (benchmarks/synthetic.py through the tracker sync) in a SQLite ledger; instances of "
        "1 vCPU and 2048 MB claimed through Ledger.claim with their recorded requests, up to 6 on each tenth host and "
        "one on each fifth of the rest. Goal spread with threshold 0, min gain 0 and at most "
        f"{args.moves} moves; a drain of the host with the most instances. Seconds of one run of "
        "operations.rebalance.ledger_plan (ledger read + plan), time.perf_counter in-process, garbage collector off "
        f"as the action runs it. Python {platform.python_version()}, {os.cpu_count()} cores shared with other work, "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}.", "",
        "| hosts | instances | spread s | moves | imbalance before | imbalance after | drain s | drain moves "
        "| drain destinations |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for hosts, count, spread_s, spread, drain_s, drain in rows:
        lines.append(f"| {hosts} | {count} | {spread_s:.2f} | {len(spread.moves)} | {spread.imbalance_before:.4f} | "
                     f"{spread.imbalance_after:.4f} | {drain_s:.2f} | {len(drain.moves)} | "
                     f"{len({move.to_host for move in drain.moves})} |")
    lines += ["", "Why each spread plan stopped (its ``stopped``):", ""]
    lines += [f"- {hosts} hosts: {spread.stopped}" for hosts, _count, _spread_s, spread, _drain_s, _drain in rows]
    lines += ["", "Most of a synthetic host's usage is its own domains, which the ledger records as unmanaged "
              "usage that no move takes away, so the figure cannot fall far however many instances move.",
              "", "Command: `.venv/bin/python benchmarks/rebalance.py --hosts "
              f"{' '.join(str(hosts) for hosts in args.hosts)} --moves {args.moves}`"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    main()
