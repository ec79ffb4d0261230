"""Launches at fleet scale, deciding from the ledger: `ansible-playbook playbooks/launch.yml` at
1,000, 10,000 and 100,000 hypervisors, beside an empty play timed in the same run.

    .venv/bin/python benchmarks/fleet_scale.py [--numa] [--sizes 1000,10000,100000]
        [--backends sqlite,postgresql] [--runs 3] [--output benchmarks/results/fleet_scale.md]

Needs root (the lab fleet, and PostgreSQL started from Debian's packages as the tests do).

The fleet: the 3 real lab hypervisors (lab/fleet.py: real libvirtd daemons), synced by
`playbooks/gather.yml` as a user's scheduled gather does, plus synthetic hypervisors
(benchmarks/synthetic.py: generated libvirt facts through host_facts.host_state and the tracker
sync, as gather.yml writes real ones), up to N in all. The lab hosts are given
cpu_allocation_ratio 16 in their inventory source and the synthetic ones are smaller, so the
launch picks a lab host every time and the real run builds there; every synthetic host is still
read, filtered and weighed.

Each launch runs as a user would run it on a large fleet: `ansible-playbook -i <controller
inventory> playbooks/launch.yml -e server_name=... -e count=...`, where the controller inventory holds
only localhost and the berth_* variables (the lab's boot kernel...) and the ledger's URL comes
from the environment (BERTH_LEDGER_URL, as an AWX credential gives it, which keeps a PostgreSQL
password out of the inventory): no inventory of hypervisors is loaded and no hypervisor is
contacted except the one built on. The baseline is
`ansible-playbook -i localhost, benchmarks/playbooks/empty.yml` (the same ansible.cfg and
callback), timed in turn with the launches so that the machine's noise hits both alike.

Per size and ledger, `--runs` rounds of: empty play; check-mode launch of 1 and of 10; real launch
of 1 and of 10 (each followed by an untimed delete.yml). Reported: median (min-max) wall seconds,
the launch minus the empty play, and the launch's one task (berth.fleet.server) split in two: the
schedule's read/decide/claim/record seconds, which the schedule times itself inside the action and
returns in the task's result (`timing`), and the build = the rest of that task's seconds from the
timing callback (the task's worker, the action's import and argument checks, the request check,
the ledger's open, and the libvirt build with the ledger marking ACTIVE; in check mode the plan).
Each run's CPU seconds too (user + system of ansible-playbook and its workers), with the check
launch less the empty play round by round, which other people's load disturbs less than wall time.
Plus the peak memory of the read and decision measured in-process with tracemalloc. The load
average (1, 5, 15 min) is recorded at the start of each size and ledger.

The synthetic hosts are synced once per size, minutes before the last launches: the controller
inventory sets berth_service_down_time to a day so that none turns stale while the benchmark runs
(staleness is tested in tests/integration, not measured here). The lab hosts are gathered again
before each size.

With --numa (issue 24: a launch at 10,000 within 1 s of the empty play on a NUMA fleet), the same
at 10,000 hypervisors by default, on a NUMA fleet with a NUMA flavor: the lab is brought up with
2 MiB huge pages (128 of its own per hypervisor, twice a guest's) and host CPU 1 dedicated, CPU 0
shared on each (as tests/integration's numa_lab); the synthetic hosts have NUMA cells, CPU sets,
huge pages and PCI devices (synthetic.py's numa hosts); the controller inventory enables
NUMATopologyFilter (berth_enabled_filters, as an operator of a NUMA fleet does); each launch asks
for one dedicated vCPU in 2 MiB pages (hw:cpu_policy=dedicated, hw:mem_page_size=2MB). The lab hosts are still the
ones chosen. A lab hypervisor has one dedicated CPU, so three such guests fit on the lab at once:
the launches are of 1 instance only (check and real), and the results go to fleet_scale_numa.md.
In both modes each real launch is checked to have built on a lab host whose domain runs (in NUMA
mode with the vCPU pinned to the CPU its claim holds), and its delete to have given every claim
back before the next launch.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "lab"), str(REPO / "tests"), str(REPO / "benchmarks")]

import fleet  # noqa: E402  (lab/fleet.py)
import synthetic  # noqa: E402
from pg_server import PostgresServer  # noqa: E402

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import (  # noqa: E402
    needed_host_fields,
    schedule,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (  # noqa: E402
    DEFAULT_FILTERS,
    RequestSpec,
)
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import without_gc  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger  # noqa: E402

ANSIBLE_PLAYBOOK = str(REPO / ".venv" / "bin" / "ansible-playbook")
LAB_HOSTS = 3
LAB_CPU_ALLOCATION_RATIO = 16.0
SERVICE_DOWN_TIME_S = 86400
# playbooks/launch.yml's one task: the schedule (its result's timing) and the build (the rest).
LAUNCH_TASK = "Launch the instances"
RESULTS = REPO / "benchmarks" / "results"
# `virsh vcpupin`'s lines: "<vCPU> <host CPUs>"; the CPUs of each.
VCPU_PIN = re.compile(r"^\s*\d+\s+([\d,-]+)\s*$", re.M)


@dataclasses.dataclass(frozen=True)
class Mode:
    """What the fleet is and what each launch asks for."""

    title: str
    flavor: dict
    # (check or real, instances) of each timed launch, in the order they run in a round.
    kinds: tuple[tuple[str, int], ...]
    sizes: str
    output: Path
    # The operator's settings (the controller inventory's berth_* variables).
    settings: dict = dataclasses.field(default_factory=dict)
    # lab/fleet.py up's options beyond the number of hosts.
    lab: dict = dataclasses.field(default_factory=dict)
    # synthetic.sync's: NUMA cells, CPU sets, huge pages and PCI devices on every synthetic host.
    numa_hosts: bool = False

    def enabled_filters(self) -> list[str]:
        return list(self.settings.get("berth_enabled_filters", DEFAULT_FILTERS))


PLAIN = Mode(title="Launch at fleet scale, from the ledger",
             flavor={"name": "bench", "vcpus": 1, "memory_mb": 128, "root_gb": 1},
             kinds=(("check", 1), ("check", 10), ("real", 1), ("real", 10)), sizes="1000,10000,100000",
             output=RESULTS / "fleet_scale.md")
# A lab hypervisor with host CPU 1 dedicated holds one such guest (64 pages of 2 MiB). Each gets
# twice that: the kernel's pool is the machine's, and a process elsewhere that maps 2 MiB pages
# while they are free (another person's PostgreSQL started with huge_pages=try) takes from it.
HUGE_PAGES_PER_LAB_HOST = 128
NUMA = Mode(title="Launch at fleet scale on a NUMA fleet, from the ledger",
            flavor={"name": "bench.pin", "vcpus": 1, "memory_mb": 128, "root_gb": 1,
                    "extra_specs": {"hw:cpu_policy": "dedicated", "hw:mem_page_size": "2MB"}},
            kinds=(("check", 1), ("real", 1)), sizes="10000", output=RESULTS / "fleet_scale_numa.md",
            # NUMATopologyFilter is not a default, as in Nova: a NUMA fleet's operator enables it.
            settings={"berth_enabled_filters": [*DEFAULT_FILTERS, "NUMATopologyFilter"]},
            lab={"huge_pages": HUGE_PAGES_PER_LAB_HOST * LAB_HOSTS, "cpu_dedicated_set": "1",
                 "cpu_shared_set": "0"},
            numa_hosts=True)


def ansible_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               ANSIBLE_CALLBACK_PLUGINS=str(REPO / "benchmarks" / "callback_plugins"),
               ANSIBLE_STDOUT_CALLBACK="berth_timing", ANSIBLE_NOCOLOR="1")
    return env


def run(args: list[str]) -> tuple[float, dict]:
    """One whole ansible-playbook process: its wall seconds and the timing callback's JSON, with the
    process's CPU seconds (user + system, its workers' included) as ``cpu_s``."""
    started, used = time.perf_counter(), _children_cpu_s()
    proc = subprocess.run([ANSIBLE_PLAYBOOK, *args], cwd=REPO, env=ansible_env(), capture_output=True,
                          text=True, timeout=1800, check=False)
    wall = time.perf_counter() - started
    cpu_s = _children_cpu_s() - used
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    report = json.loads(lines[-1]) if lines else {}
    if proc.returncode != 0 or report.get("failed"):
        raise RuntimeError(f"ansible-playbook {' '.join(args)} failed (rc {proc.returncode}): "
                           f"{report.get('failed')} {proc.stderr[-2000:]}")
    report["cpu_s"] = cpu_s
    return wall, report


def _children_cpu_s() -> float:
    """CPU seconds of this process's finished children, theirs included (ansible-playbook waits
    for its workers): on a machine that others load, a steadier measure than wall time."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def lab_inventory(lab_dir: str, directory: Path) -> Path:
    """The lab's hypervisors as a berth.fleet.hypervisors source, for gather.yml only."""
    source = (Path(fleet.inventory_dir(lab_dir)) / "fleet.berth.yml").read_text()
    lines = []
    for line in source.splitlines():
        lines.append(line)
        if line.strip().startswith("uri:"):
            lines.append(f"    cpu_allocation_ratio: {LAB_CPU_ALLOCATION_RATIO}")
    inventory = directory / "lab"
    (inventory / "group_vars").mkdir(parents=True, exist_ok=True)
    (inventory / "fleet.berth.yml").write_text("\n".join(lines) + "\n")
    (inventory / "group_vars" / "all.yml").write_text(lab_variables(lab_dir))
    return inventory


def lab_variables(lab_dir: str) -> str:
    """The lab's group variables (boot kernel, domain type...) without its ledger: the benchmark's
    comes from the environment (BERTH_LEDGER_URL), as an AWX credential gives it."""
    variables = (Path(fleet.inventory_dir(lab_dir)) / "group_vars" / "all.yml").read_text().splitlines()
    return "\n".join(line for line in variables if not line.startswith("berth_ledger_url:")) + "\n"


def controller_inventory(lab_dir: str, directory: Path, mode: Mode) -> Path:
    """localhost and the berth_* variables only: what a launch on a large fleet loads."""
    inventory = directory / "controller"
    (inventory / "group_vars").mkdir(parents=True, exist_ok=True)
    (inventory / "hosts.ini").write_text("localhost ansible_connection=local\n")
    # The lab's variables carry the URI policy for its sockets (berth_uri_policy): no hypervisor
    # source is here to hand one on.
    variables = (lab_variables(lab_dir) + f"berth_service_down_time: {SERVICE_DOWN_TIME_S}\n"
                 + "".join(f"{name}: {json.dumps(value)}\n" for name, value in mode.settings.items()))
    (inventory / "group_vars" / "all.yml").write_text(variables)
    return inventory


def in_process_split(url: str, count: int, mode: Mode) -> dict[str, float]:
    """The schedule action's read and decision, in this process, with the garbage collector off
    as the action has it: seconds and tracemalloc peak."""
    with without_gc():
        return _in_process_split(url, count, mode)


def _in_process_split(url: str, count: int, mode: Mode) -> dict[str, float]:
    ledger = Ledger(url).open()
    spec = RequestSpec(flavor=Flavor.from_dict(mode.flavor, name=mode.flavor["name"]), count=count,
                       enabled_filters=mode.enabled_filters(), service_down_time=SERVICE_DOWN_TIME_S)
    started = time.perf_counter()
    table, _generations = ledger.host_table(needed_host_fields(spec))
    read_s = time.perf_counter() - started
    started = time.perf_counter()
    decision = schedule(table, spec)
    decide_s = time.perf_counter() - started
    assert decision.ok, decision.summary
    tracemalloc.start()
    table, _generations = ledger.host_table(needed_host_fields(spec))
    schedule(table, spec).to_dict()
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    ledger.close()
    return {"read_s": read_s, "decide_s": decide_s, "peak_mib": peak / 2 ** 20}


def check_built(lab_dir: str, ledger: Ledger, hosts: list[str], name: str, count: int, mode: Mode) -> None:
    """A real launch's guests run on the lab hosts it chose, which hold its claims (in NUMA mode:
    each vCPU pinned to the host CPU its claim holds)."""
    claims = ledger.claims()
    assert sorted(claim["host"] for claim in claims) == sorted(hosts), f"{name}: claims {claims}, chosen {hosts}"
    running, pinned = 0, set()
    for host in set(hosts):
        uri = fleet.uri(lab_dir, host)
        for domain in fleet.virsh(uri, "list", "--name", "--state-running").split():
            if domain.startswith(f"{name}-"):
                running += 1
                pinned |= {(host, cpus) for cpus in VCPU_PIN.findall(fleet.virsh(uri, "vcpupin", domain))}
    assert running == count, f"{name}: {running} of {count} guests run on {hosts}"
    if mode.numa_hosts:
        claimed = {(claim["host"], str(cpu)) for claim in claims for cell in claim["assignment"]["numa"]["cells"]
                   for cpu in cell["pinning"].values()}
        assert pinned == claimed, f"{name}: pinned {pinned}, claimed {claimed}"


def measure(size: int, controller: Path, runs: int, mode: Mode, lab_dir: str, ledger: Ledger) -> dict:
    figures: dict[str, list] = {"empty": [], "empty_cpu": [], "chosen": []}
    for kind, count in mode.kinds:
        figures[f"{kind}{count}"] = []
        figures[f"{kind}{count}_cpu"] = []
        figures[f"{kind}{count}_build"] = []
        figures[f"{kind}{count}_timing"] = []
    inventory = ["-i", str(controller)]
    # Warm-up: the first run after a sync pays cold caches (and SQLite's first read of the file).
    run([*inventory, "playbooks/launch.yml", "--check", "-e", "server_name=warm",
         "-e", json.dumps({"flavor": mode.flavor})])
    for round_ in range(runs):
        wall, report = run(["-i", "localhost,", "benchmarks/playbooks/empty.yml"])
        figures["empty"].append(wall)
        figures["empty_cpu"].append(report["cpu_s"])
        for kind, count in mode.kinds:
            name = f"s{size}r{round_}{kind}{count}"
            args = [*inventory, "playbooks/launch.yml", "-e", f"server_name={name}", "-e", f"count={count}",
                    "-e", json.dumps({"flavor": mode.flavor})]
            if kind == "check":
                args.append("--check")
            wall, report = run(args)
            tasks = {task["task"]: task for task in report["tasks"]}
            launch = tasks[LAUNCH_TASK]
            hosts = launch.get("hosts") or []
            assert all(not host.startswith("synth") for host in hosts), f"a synthetic host was chosen: {hosts}"
            timing = launch.get("timing") or {}
            figures[f"{kind}{count}"].append(wall)
            figures[f"{kind}{count}_cpu"].append(report["cpu_s"])
            figures["chosen"] += hosts
            figures[f"{kind}{count}_timing"].append(timing)
            figures[f"{kind}{count}_build"].append(launch["seconds"] - timing.get("total_s", 0.0))
            if kind == "real":
                check_built(lab_dir, ledger, hosts, name, count, mode)
                run([*inventory, "playbooks/delete.yml", "-e", f"server_name={name}"])
                assert not ledger.claims(), f"claims left after deleting {name}: {ledger.claims()}"
    return figures


def spread(values: list[float], digits: int = 2) -> str:
    if not values:
        return "-"
    return (f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"
            if len(values) > 1 else f"{values[0]:.{digits}f}")


def write(path: str, results: list[dict], started: float, load_before: str, mode: Mode) -> None:
    runs = [f"{kind}{count}" for kind, count in mode.kinds]
    lines = [
        f"# {mode.title}",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"{platform.platform()}, Python {platform.python_version()}. Load average before: {load_before}; "
        f"after: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}. Whole run: {(time.time() - started) / 60:.1f} min.",
        "",
        f"Reproduce: `.venv/bin/python benchmarks/fleet_scale.py{' --numa' if mode is NUMA else ''}` "
        "(root; see the script's docstring for",
        "what is measured and how the fleet is made). Seconds, median (min-max) over the runs; the",
        "baseline is `ansible-playbook -i localhost, benchmarks/playbooks/empty.yml`, timed in turn",
        "with the launches.",
        "",
        "## Whole ansible-playbook runs",
        "",
        "build = the launch task's seconds less the schedule's own (its result's timing.total_s).",
        "",
        "| ledger | hypervisors | load 1/5/15 min | empty play | "
        + "".join(f"{kind} {count} | " for kind, count in mode.kinds)
        + "check 1 − empty | real 1 − empty − build | build (real 1) |",
        "|---|---:|---|---:|" + "---:|" * (len(runs) + 3),
    ]
    for result in results:
        figures = result["figures"]
        empty = statistics.median(figures["empty"])
        check_over = [wall - empty for wall in figures["check1"]]
        real_over = [wall - empty - build for wall, build in zip(figures["real1"], figures["real1_build"])]
        lines.append(
            f"| {result['backend']} | {result['size']:,} | {result['load']} | {spread(figures['empty'])} | "
            + "".join(f"{spread(figures[run_])} | " for run_ in runs)
            + f"{spread(check_over)} | {spread(real_over)} | {spread(figures['real1_build'])} |")
    lines += [
        "",
        "## CPU seconds of the same runs",
        "",
        "User + system CPU of each ansible-playbook process, its workers included (not libvirtd's or",
        "QEMU's): what other people's load on the machine disturbs least. check 1 − empty is taken",
        "round by round (each check launch less the empty play of its own round), wall and CPU.",
        "",
        "| ledger | hypervisors | empty play | " + "".join(f"{kind} {count} | " for kind, count in mode.kinds)
        + "check 1 − empty, wall, by round | check 1 − empty, CPU, by round |",
        "|---|---:|---:|" + "---:|" * (len(runs) + 2),
    ]
    for result in results:
        figures = result["figures"]
        by_round_wall = [check - empty for check, empty in zip(figures["check1"], figures["empty"])]
        by_round_cpu = [check - empty for check, empty in zip(figures["check1_cpu"], figures["empty_cpu"])]
        lines.append(
            f"| {result['backend']} | {result['size']:,} | {spread(figures['empty_cpu'])} | "
            + "".join(f"{spread(figures[f'{run_}_cpu'])} | " for run_ in runs)
            + f"{spread(by_round_wall)} | {spread(by_round_cpu)} |")
    lines += [
        "",
        "## The schedule's own time (from the launch task's result), milliseconds",
        "",
        "read = the ledger's host states into the engine's columns; decide = filters and weighers;",
        "claim = the claim transaction; record = the decision record. Peak = tracemalloc peak of the",
        "read and the decision, in-process (Python allocations, NumPy's included).",
        "",
        "| ledger | hypervisors | run | read | decide | claim | record | total | peak MiB |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        figures = result["figures"]
        for kind, count in mode.kinds:
            timings = figures[f"{kind}{count}_timing"]

            def part(key: str, timings: list[dict] = timings) -> str:
                return spread([t.get(key, 0.0) * 1000 for t in timings], 1)

            lines.append(f"| {result['backend']} | {result['size']:,} | {kind} {count} | {part('read_s')} | "
                         f"{part('decide_s')} | {part('claim_s')} | {part('record_s')} | {part('total_s')} | "
                         f"{result['split']['peak_mib']:.0f} |")
    lines += ["", "## Setup", ""]
    for result in results:
        chosen = result["figures"]["chosen"]
        counted = ", ".join(f"{host} {chosen.count(host)}x" for host in sorted(set(chosen)))
        lines.append(f"- {result['backend']}, {result['size']:,} hypervisors: synthetic hosts synced by the tracker "
                     f"sync at {result['sync_rate']:,.0f} hypervisors/s; in-process read "
                     f"{result['split']['read_s'] * 1000:.0f} ms, decide {result['split']['decide_s'] * 1000:.0f} ms; "
                     f"instances placed on {counted}.")
    Path(path).write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--numa", action="store_true",
                        help="a NUMA fleet and flavor (sizes default 10000; output fleet_scale_numa.md)")
    parser.add_argument("--sizes")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--output")
    options = parser.parse_args()
    mode = NUMA if options.numa else PLAIN
    options.sizes = options.sizes or mode.sizes
    options.output = options.output or str(mode.output)
    sizes = sorted(int(size) for size in options.sizes.split(","))
    started, load_before = time.time(), " ".join(Path("/proc/loadavg").read_text().split()[:3])
    work = Path(tempfile.mkdtemp(prefix="berth-scale-", dir="/tmp"))
    lab_dir = str(work / "lab")
    server = None
    results = []
    try:
        fleet.up(lab_dir, hosts=LAB_HOSTS, **mode.lab)
        for backend in options.backends.split(","):
            if backend == "sqlite":
                url = f"sqlite:///{work}/ledger.sqlite3"
            else:
                server = server or PostgresServer().start()
                url = server.create_database("scale")
            scratch = work / backend
            os.environ["BERTH_LEDGER_URL"] = url
            lab = lab_inventory(lab_dir, scratch)
            controller = controller_inventory(lab_dir, scratch, mode)
            ledger = Ledger(url).open()
            synced = 0
            for size in sizes:
                began = time.perf_counter()
                synthetic.sync(ledger, synced, size - LAB_HOSTS - synced, numa=mode.numa_hosts)
                rate = (size - LAB_HOSTS - synced) / max(time.perf_counter() - began, 1e-9)
                synced = size - LAB_HOSTS
                run(["-i", str(lab), "playbooks/gather.yml"])
                print(f"{backend} {size}: synced, measuring", flush=True)
                load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
                results.append({"backend": backend, "size": size, "sync_rate": rate, "load": load,
                                "figures": measure(size, controller, options.runs, mode, lab_dir, ledger),
                                "split": in_process_split(url, 1, mode)})
                write(options.output, results, started, load_before, mode)
            ledger.close()
    finally:
        fleet.down(lab_dir)
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(Path(options.output).read_text())


if __name__ == "__main__":
    main()
