"""Batch placement that packs (issue 36, item 5: within 2 % of the lower bound, in under 30 s):
hosts used by Nova's greedy order, by the CP-SAT packer, and the lower bound, on two cases.

    .venv/bin/python benchmarks/packing.py [--time-limit 30] [--output benchmarks/results/packing.md]

- batch: one request of 1,000 instances (2 vCPUs, 4 GiB, 20 GiB disk) on 200 empty hosts of
  three sizes (64 GiB/16 cores, 128 GiB/32, 256 GiB/48; cpu_allocation_ratio 4.0, 512 MB reserved).
  With one flavor the lower bound is exact: the fewest hosts whose counts (each host's fit by the
  real filters, capacity.host_capacities) reach 1,000, largest first.
- deployment: four entries placed together on 80 identical empty hosts (128 GiB, 32 cores):
  400 web (2 vCPUs, 4 GiB), 300 app (4, 8 GiB), 200 cache (1, 2 GiB), 40 db (8, 32 GiB) in an
  anti-affinity group of at most 2 per host. Lower bound: the larger of each resource's total
  demand over one host's room (rounded up) and the solver's own proven bound.

Both through packing.place_batch, the code berth_placement=packing runs (the greedy figure is the
greedy order it computes first, driver.schedule entry after entry, the default engine and
weighers). Timed in-process with time.perf_counter; the solver's time limit is ``--time-limit``.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".cache" / "collections"))

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.capacity import host_capacities  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (  # noqa: E402
    Flavor,
    HostState,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.packing import place_batch  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec  # noqa: E402

GIB = 1024
RESERVED_MB = 512
SIZES = ((64, 16), (128, 32), (256, 48))  # GiB, cores


def host(name: str, ram_gib: int, cores: int) -> HostState:
    return HostState(host=name, nodename=name, uuid=f"uuid-{name}", vcpus_total=cores,
                     total_usable_ram_mb=ram_gib * GIB, free_ram_mb=ram_gib * GIB - RESERVED_MB,
                     total_usable_disk_gb=4000, free_disk_mb=4000 * GIB, supported_instances=[])


def batch_case() -> tuple[list[HostState], list[RequestSpec], int, str]:
    hosts = [host(f"hv{number:03d}", *SIZES[number % len(SIZES)]) for number in range(200)]
    spec = RequestSpec(flavor=Flavor("m1.medium", vcpus=2, memory_mb=4 * GIB, root_gb=20), count=1000)
    fits = sorted((found.fits for found in host_capacities(hosts, spec)), reverse=True)
    total, needed = 0, 0
    while total < spec.count:
        total += fits[needed]
        needed += 1
    return hosts, [spec], needed, "exact (one flavor: largest hosts first)"


def deployment_case() -> tuple[list[HostState], list[RequestSpec], int, str]:
    hosts = [host(f"hv{number:03d}", 128, 32) for number in range(80)]
    group = {"name": "db", "policy": "anti-affinity", "rules": {"max_server_per_host": 2}}
    specs = [RequestSpec(flavor=Flavor("web", vcpus=2, memory_mb=4 * GIB, root_gb=20), count=400),
             RequestSpec(flavor=Flavor("app", vcpus=4, memory_mb=8 * GIB, root_gb=40), count=300),
             RequestSpec(flavor=Flavor("cache", vcpus=1, memory_mb=2 * GIB, root_gb=10), count=200),
             RequestSpec(flavor=Flavor("db", vcpus=8, memory_mb=32 * GIB, root_gb=100), count=40, server_group=group)]
    ram = sum(spec.flavor.memory_mb * spec.count for spec in specs) / hosts[0].free_ram_mb
    vcpus = sum(spec.flavor.vcpus * spec.count for spec in specs) / (hosts[0].vcpus_total * 4.0)
    disk = sum(spec.flavor.requested_disk_mb * spec.count for spec in specs) / hosts[0].free_disk_mb
    groups = math.ceil(40 / 2)
    return hosts, specs, max(math.ceil(ram), math.ceil(vcpus), math.ceil(disk), groups), \
        "resources' totals over one host's room"


def run(name: str, case, time_limit_s: float) -> dict:
    hosts, specs, bound, bound_kind = case()
    started = time.perf_counter()
    batch = place_batch(hosts, specs, time_limit_s)
    elapsed = time.perf_counter() - started
    packing = batch.explanation
    assert batch.ok, packing
    lower = max(bound, packing["bound"] or 0)
    used = packing["hosts_used"]
    return {"case": name, "hosts": len(hosts), "instances": sum(spec.count for spec in specs),
            "entries": len(specs), "greedy": packing["greedy_hosts_used"], "packed": used,
            "method": packing["method"], "status": packing.get("status"), "solver_bound": packing["bound"],
            "bound": lower, "bound_kind": bound_kind,
            "over_bound_percent": round(100.0 * (used - lower) / lower, 2), "solve_s": packing.get("solve_s"),
            "total_s": round(elapsed, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "results" / "packing.md")
    args = parser.parse_args()
    rows = [run("batch: 1,000 × m1.medium on 200 mixed hosts", batch_case, args.time_limit),
            run("deployment: 4 flavors, 940 instances, db anti-affinity ≤ 2/host, on 80 identical hosts",
                deployment_case, args.time_limit)]
    import ortools
    lines = [
        "# Batch placement that packs (benchmarks/packing.py)",
        "",
        f"Python {platform.python_version()}, OR-Tools {ortools.__version__} (CP-SAT), {os.cpu_count()} cores shared "
        f"with other work, load average {' '.join(f'{value:.2f}' for value in os.getloadavg())}. Solver time limit "
        f"{args.time_limit:g} s. Greedy: Nova's order (driver.schedule, default filters and weighers), computed in "
        "the same run as the packing's starting point. Hosts used: hosts holding an instance afterwards (all start "
        "empty). Total: place_batch in all (the filters' per-host counts, the greedy order, the solver, the replay "
        "of its answer through the filters), time.perf_counter, one run.",
        "",
        "| case | greedy hosts | packed hosts | lower bound | packed over bound | solver status | solver bound | "
        "solve s | total s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(f"| {row['case']} | {row['greedy']} | {row['packed']} | {row['bound']} ({row['bound_kind']}) | "
                     f"{row['over_bound_percent']} % | {row['status']} | {row['solver_bound']} | {row['solve_s']} | "
                     f"{row['total_s']} |")
    lines += ["", f"Command: `.venv/bin/python benchmarks/packing.py --time-limit {args.time_limit:g}`", ""]
    args.output.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
