"""Microseconds per host of one exact fit (assignment.fit: numa.fit with pci.fit per cell
permutation), the per-host cost of NUMATopologyFilter and PciPassthroughFilter, on numa_scale's
synthetic NUMA hosts and its NUMA + PCI flavor.

    .venv/bin/python benchmarks/numa_fit.py [--hosts 2000] [--repeats 7]

Three fleets of ``--hosts`` host states (benchmarks/synthetic.py, numa=True: its hardware
classes of NUMA cells with thread siblings, CPU sets, 2 MiB pages, a PF with four VFs and a GPU
per cell): idle, and holding one and three pinned instances with a VF each, taken with
assignment.take as the scheduler takes them (the flavor in small pages, so that the measured
fit still finds its 2 MiB pages).
Each repeat fits the flavor once more on every host of a fleet; the figure is the repeat's
processor time (time.process_time: this machine is shared, and wall time counts the
other processes' turns) divided by the hosts, min and median over ``--repeats``, garbage
collection off while timing.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import synthetic  # noqa: E402
from numa_scale import PCI_ALIAS, PINNED  # noqa: E402

from ansible_collections.berth.fleet.plugins.module_utils.scheduler import assignment  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor, HostState  # noqa: E402

HELD = Flavor(name="pinned-small-pages", vcpus=4, memory_mb=2048, root_gb=1, extra_specs={
    key: value for key, value in PINNED.extra_specs.items() if key != "hw:mem_page_size"})


def fleet(hosts: int, instances: int, held: assignment.ExactRequest) -> list[HostState]:
    states = [HostState.from_dict(state) for state in synthetic.host_states(1, hosts, large=True, numa=True)]
    for state in states:
        for number in range(1, instances + 1):
            taken, reason = assignment.take(state, held)
            if taken is None:
                raise SystemExit(f"{state.host}: instance {number} does not fit: {reason}")
    return states


def per_host_us(states: list[HostState], request: assignment.ExactRequest, repeats: int) -> list[float]:
    figures = []
    gc.disable()
    try:
        for _repeat in range(repeats):
            mark = time.process_time()
            for state in states:
                assignment.fit(state, request)
            figures.append((time.process_time() - mark) / len(states) * 1e6)
    finally:
        gc.enable()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    request = assignment.exact_request(PINNED, {}, PCI_ALIAS)
    held = assignment.exact_request(HELD, {}, PCI_ALIAS)
    print(f"assignment.fit of flavor {PINNED.name} ({PINNED.extra_specs}), {args.hosts} hosts, "
          f"{args.repeats} repeats: microseconds per host, min / median")
    for instances in (0, 1, 3):
        states = fleet(args.hosts, instances, held)
        figures = per_host_us(states, request, args.repeats)
        print(f"hosts holding {instances} instance(s): {min(figures):.1f} / {statistics.median(figures):.1f}",
              flush=True)


if __name__ == "__main__":
    main()
