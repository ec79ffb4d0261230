"""Benchmark of the placement engine: 100 / 1,000 / 10,000 / 100,000 hosts, one core.

    .venv/bin/python benchmarks/engine.py [--sizes 100,1000] [--output benchmarks/results/engine.md]

What it measures, for each fleet size, with the default filters and weighers (DESIGN.md) and
a request for m1.small-like instances (1 vCPU, 2048 MB, 20 GB):

- parse: the host state dicts (as the inventory or `hosts:` gives them) -> validated
  HostState objects (HostState.from_dict), once per request;
- engine setup: HostStates -> the structures the engine works on (the vectorised path's
  arrays; the plain path's per-request copies), once per request;
- first instance: the first instance's filter pass over every host and its weighing;
- per instance: the marginal cost of each further instance, (t(1 + N) - t(1)) / N, which is
  the decision time per instance of a multi-instance request;
- module call: the schedule action's pure part (plugins/action/schedule.py `decide`, from host
  dicts to the decision, plus its to_dict for the result) for 10 instances;
- peak memory: tracemalloc's peak during one module call (NumPy reports its buffers to it),
  and the process's maximum resident set.

Each timing is the best of --repeat runs (time.perf_counter), with the garbage collector off
while timing, as timeit does. The process is pinned to one CPU
(os.sched_setaffinity) and BLAS threads are limited to 1. Fleets are random but seeded: hosts
of 64-256 GiB and 32-64 cores, 0-40 instances, 1% down, 1% disabled, a few aggregates with
zones and ratios, hypervisor versions and build failures that vary.
"""
from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import resource
import sys
import time
import tracemalloc
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / ".cache" / "collections"))

import numpy  # noqa: E402

from ansible_collections.berth.fleet.plugins.module_utils.scheduler import vector  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.backend import PlainBackend  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (  # noqa: E402
    Flavor,
    HostState,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import (  # noqa: E402
    FILTERS,
    WEIGHERS,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec  # noqa: E402

FLAVOR = Flavor(name="m1.small", vcpus=1, memory_mb=2048, root_gb=20)
EXTRA_INSTANCES = 100
MODULE_CALL_INSTANCES = 10


def fleet(size: int, seed: int = 42) -> list[dict]:
    rng = random.Random(seed)
    aggregates = [
        {"name": "az1", "metadata": {"availability_zone": "az1", "cpu_allocation_ratio": "8.0"}},
        {"name": "az2", "metadata": {"availability_zone": "az2"}},
        {"name": "ssd", "metadata": {"ssd": "true", "ram_allocation_ratio": "1.2"}},
    ]
    hosts = []
    for number in range(size):
        ram_mb = rng.choice([65536, 131072, 262144])
        vcpus = rng.choice([32, 48, 64])
        instances = rng.randint(0, 40)
        hosts.append({
            "host": f"hv{number:06d}", "nodename": f"hv{number:06d}.example.com",
            "uuid": f"00000000-0000-0000-0000-{number:012d}",
            "service_up": rng.random() > 0.01, "disabled": rng.random() < 0.01,
            "vcpus_total": vcpus, "vcpus_used": rng.randint(0, vcpus * 3),
            "total_usable_ram_mb": ram_mb,
            "free_ram_mb": ram_mb - 512 - instances * rng.choice([1024, 2048, 4096]),
            "total_usable_disk_gb": 2000, "free_disk_mb": rng.randint(0, 2000 * 1024),
            "num_instances": instances, "num_io_ops": rng.randint(0, 4),
            "hypervisor_type": "QEMU", "hypervisor_version": rng.choice([8000000, 9000000]),
            "supported_instances": [["x86_64", "kvm", "hvm"]],
            "aggregates": rng.sample(aggregates, rng.randint(0, 2)),
            "failed_builds": rng.choice([0] * 30 + [1]),
        })
    return hosts


def best_of(repeat: int, function) -> float:
    """Best wall time of `repeat` runs, with the garbage collector off as timeit does: its
    full collections walk every live object (100,000 host states), and when they strike would
    otherwise decide the figures more than the code does."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            function()
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best


def spec(count: int, engine: str) -> RequestSpec:
    return RequestSpec(flavor=FLAVOR, count=count, engine=engine)


def measure(size: int, engine: str, repeat: int) -> dict:
    if engine == "plain":
        # The plain path is the reference, not the vectorised one: at 100,000 hosts one run of it
        # takes minutes, so it is timed fewer times.
        repeat = 1 if size > 10000 else min(repeat, 3)
    dicts = fleet(size)
    parse_s = best_of(repeat, lambda: [HostState.from_dict(host) for host in dicts])
    states = [HostState.from_dict(host) for host in dicts]
    request = spec(1, engine)
    filters = [FILTERS[name]() for name in request.enabled_filters]
    filters = [host_filter for host_filter in filters if not host_filter.is_noop(request)]
    weighers = [WEIGHERS[name]() for name in request.weighers]

    def setup() -> None:
        if engine == "vectorized":
            vector.VectorBackend(HostTable.of(states), request, filters, weighers)
        else:
            PlainBackend(HostTable.of(states), request, filters, weighers).start(range(len(states)))

    setup_s = best_of(repeat, setup)
    # The plain path at 100,000 hosts costs seconds per instance; fewer instances show it.
    extra = EXTRA_INSTANCES if engine == "vectorized" or size <= 10000 else 3
    one_s = best_of(repeat, lambda: schedule(states, spec(1, engine)))
    many_s = best_of(repeat, lambda: schedule(states, spec(1 + extra, engine)))
    decision = schedule(states, spec(1 + extra, engine))
    assert decision.ok and decision.engine == engine, decision.summary
    def decide() -> dict:
        # The schedule action's pure part on host state dicts (the live-facts path).
        return schedule([HostState.from_dict(host) for host in dicts],
                        RequestSpec(flavor=FLAVOR, count=MODULE_CALL_INSTANCES, engine=engine)).to_dict()

    module_s = best_of(repeat, decide)
    tracemalloc.start()
    decide()
    _, peak_bytes = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "size": size, "engine": engine, "parse_ms": parse_s * 1000, "setup_ms": setup_s * 1000,
        "first_ms": (one_s - setup_s) * 1000,
        "per_instance_ms": (many_s - one_s) / extra * 1000, "extra": extra,
        "module_ms": module_s * 1000, "peak_mib": peak_bytes / 2 ** 20, "repeat": repeat,
    }


def machine() -> str:
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    memory = ""
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            memory = f", {int(handle.readline().split()[1]) / 2 ** 20:.1f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return (f"{model}, {os.cpu_count()} CPUs (pinned to 1){memory}; {platform.platform()}; "
            f"Python {platform.python_version()}, NumPy {numpy.__version__}")


def _load(values: tuple[float, float, float]) -> str:
    return ", ".join(f"{value:.2f}" for value in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    parser.add_argument("--engines", default="vectorized,plain")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--output", help="also write the report (Markdown) to this file")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    load_before = os.getloadavg()
    rows = []
    for size in (int(text) for text in args.sizes.split(",")):
        for engine in args.engines.split(","):
            row = measure(size, engine, args.repeat)
            rows.append(row)
            print(f"{size:>7} hosts {engine:>10}: per instance {row['per_instance_ms']:.3f} ms, "
                  f"module call {row['module_ms']:.1f} ms", file=sys.stderr)
    lines = [
        "# Placement engine benchmark",
        "",
        f"Machine: {machine()}.",
        "",
        "Command: `.venv/bin/python benchmarks/engine.py --output benchmarks/results/engine.md`",
        "",
        "Default filters and weighers; m1.small-like instances (1 vCPU, 2048 MB, 20 GB). Times",
        f"in ms, best of {args.repeat} (plain path: 3, 1 at 100,000 hosts), garbage collector",
        "off while timing (as timeit does).",
        "parse = host dicts -> HostState (validation); setup =",
        "HostStates -> engine structures; first = the first instance (a filter pass over every",
        "host, weighing); per instance = marginal cost of each further instance of the request;",
        f"module call = the schedule action's pure part for {MODULE_CALL_INSTANCES} instances",
        "(parse + decide + to_dict); peak = tracemalloc peak during that call.",
        "",
        "| hosts | engine | parse | setup | first | per instance | module call | peak MiB |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['size']:,} | {row['engine']} | {row['parse_ms']:.1f} | {row['setup_ms']:.1f} "
            f"| {row['first_ms']:.1f} | {row['per_instance_ms']:.4f} (of {row['extra']}) "
            f"| {row['module_ms']:.1f} | {row['peak_mib']:.1f} |")
    maxrss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    load_after = os.getloadavg()
    lines += [
        "", f"Process maximum resident set over the whole run: {maxrss_mib:.0f} MiB.",
        "", f"Load average (1, 5, 15 min) before: {_load(load_before)}; after: "
            f"{_load(load_after)}. Other work on the machine (the other CPU) slows the figures;",
        "best-of-N keeps the quietest run.", ""]
    report = "\n".join(lines)
    print(report)
    if args.output:
        Path(args.output).write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
