"""Evacuation (issue 35): the 100 instances of one down, fenced hypervisor of a 1,000-host
synthetic fleet decided and claimed elsewhere, against launching the same 100 afresh; then
evacuate.yml on the real lab fleet for 3 instances.

    .venv/bin/python benchmarks/evacuate.py [--hosts 1000] [--instances 100] [--runs 3]
        [--backends sqlite,postgresql] [--lab | --no-lab] [--output benchmarks/results/evacuate.md]

Synthetic part, per backend and run, in a fresh ledger: the source hypervisor (a large synthetic
host, benchmarks/synthetic.py) enters through the tracker sync, as gather.yml writes a real one;
the instances are claimed there through Ledger.claim with their recorded request (1 vCPU, 512 MB,
1 GB) and marked ACTIVE (Ledger.mark_active), as a launch's build does. The source's last sync
then ages past service_down_time (SERVICE_DOWN_TIME_S, real seconds), the other hosts are synced
(so they count as up) and it is evacuated through the collection's own code:
operations/evacuate.py down_hypervisor and ensure_fenced (the operator's confirmation, recorded),
then Evacuation, one instance at a time as its run() takes them:

- plan: Evacuation in check mode (what evacuate.yml's "Plan the evacuation" task does): the
  destination search (move.destination: the ledger's host table read, the scheduler's decision
  on the instance's recorded request with the dead host ignored);
- evacuate: the same search, then Ledger.claim_evacuation (the claim moved atomically), the guest
  definition rendered anew from the recorded request (recorded_definition) and
  Ledger.finish_evacuation. The pool is declared shared (berth_shared_pools), so the rebuild's
  only libvirt calls are the `connect` seam's (Evacuation's own argument): a stand-in
  destination (RecordingHost) that has the root volume and takes the definition. No libvirt, no
  image copy: what is timed is the decision, the claim and the ledger's writes.
- baseline: the same 100 requests launched afresh as 100 one-instance launches (the ledger's host
  table read through _fleet.read_fleet, the scheduler's decision, Ledger.claim), in the same
  ledger after the evacuation.

Lab part (--lab, default on): lab/fleet.py up with 3 hypervisors in a directory of its own, 3
instances launched on hv2 (launch.yml, berth_force_hosts), hv2's libvirtd stopped
(stop-daemon), gathered until it counts as down, then `evacuate.yml -e hypervisor=hv2 -e
fenced=true` timed as a whole ansible-playbook run with its tasks' seconds (the berth_timing
callback), the instances checked ACTIVE elsewhere in the ledger and their guests' boot markers
awaited on the destinations. The fleet is torn down (lab/fleet.py down) whatever happens.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "lab"), str(REPO / "tests"), str(REPO / "benchmarks"),
                str(REPO / ".cache" / "collections")]

import check  # noqa: E402  (lab/check.py)
import fleet  # noqa: E402  (lab/fleet.py)
import synthetic  # noqa: E402
from fleet_scale import run  # noqa: E402
from pg_server import PostgresServer  # noqa: E402

from ansible_collections.berth.fleet.plugins.module_utils.request import Built, Request  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import read_fleet, without_gc  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import request_spec  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.evacuate import (  # noqa: E402
    EVACUABLE_STATES,
    EVACUATED,
    WOULD_EVACUATE,
    Evacuation,
    down_hypervisor,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.fence import ensure_fenced  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings  # noqa: E402

FLAVOR = Flavor(name="evac.tiny", vcpus=1, memory_mb=512, root_gb=1)
# Real seconds the source's last sync must age before it counts as down; the other hosts are
# synced just before the timed part, which must end within this many seconds of that sync
# (checked: every instance evacuated, none refused for want of an up host).
SERVICE_DOWN_TIME_S = 20
LAB_HOSTS = 3
LAB_INSTANCES = 3
LAB_SERVICE_DOWN_TIME = ("-e", "berth_service_down_time=30")
BOOT_TIMEOUT_S = 300


class RecordingHost:
    """A destination for Evacuation's `connect` seam, as a shared pool presents one: the root
    volume is there, no domain of the instance yet; it keeps the definitions it is given."""

    def __init__(self, host: str, uri: str, timeout_s: float, uri_policy: Any = None) -> None:
        self.host, self.defined = host, []

    def __enter__(self) -> RecordingHost:
        return self

    def __exit__(self, *_exc: Any) -> None:
        return None

    def volume(self, pool_name: str, name: str, refresh: bool = True) -> dict[str, Any]:
        return {"name": name, "pool": pool_name}

    def find_domain(self, uuid: str) -> None:
        return None

    def pool_path(self, pool_name: str) -> str:
        return f"/var/lib/libvirt/images/{pool_name}"

    def define(self, domain_xml: str) -> str:
        self.defined.append(domain_xml)
        return domain_xml

    def start(self, uuid: str, autostart: bool | None = False) -> None:
        return None


def fleet_with_source(ledger: Ledger, hosts: int, instances: int) -> str:
    """The source (synthetic host 0, large) synced, ``instances`` claimed on it with their
    recorded request and marked ACTIVE; returns its name."""
    [(source, source_uuid)] = synthetic.sync(ledger, 0, 1, large=True)
    record = Request(flavor=FLAVOR).to_record()
    claimed = ledger.claim([{"name": f"evac-{index}", "host": source, "hypervisor_uuid": source_uuid}
                            for index in range(instances)], FLAVOR, "bench", request=record)
    built = Built(seed=False).to_record()
    for row in claimed:
        ledger.mark_active(row["uuid"], built)
    return source


def one_run(url: str, hosts: int, instances: int) -> dict[str, Any]:
    """One fresh ledger at ``url``: the source down, the others up, then plan, evacuation and
    baseline timed; seconds per instance and in all."""
    settings = Settings(service_down_time=SERVICE_DOWN_TIME_S, shared_pools=("default",))
    ledger = Ledger(url).open(create=True)
    try:
        source = fleet_with_source(ledger, hosts, instances)
        time.sleep(SERVICE_DOWN_TIME_S + 1)
        synthetic.sync(ledger, 1, hosts - 1)
        with without_gc():
            started = time.perf_counter()
            row = down_hypervisor(ledger, source, settings.service_down_time)
            placed = [i for i in ledger.instances() if i["hypervisor_uuid"] == row["uuid"]
                      and i["state"] in EVACUABLE_STATES]
            plan = Evacuation(settings, ledger, {}, [row], check_mode=True, connect=RecordingHost)
            plan_each = []
            for instance in placed:
                mark = time.perf_counter()
                [planned] = plan.run([instance])
                plan_each.append(time.perf_counter() - mark)
                assert planned["outcome"] == WOULD_EVACUATE, planned
            plan_total = time.perf_counter() - started

            started = time.perf_counter()
            row = down_hypervisor(ledger, source, settings.service_down_time)
            ensure_fenced(ledger, row, settings, True, "benchmark", False)
            placed = [i for i in ledger.instances() if i["hypervisor_uuid"] == row["uuid"]
                      and i["state"] in EVACUABLE_STATES]
            evacuation = Evacuation(settings, ledger, {}, [row], check_mode=False, connect=RecordingHost)
            evacuate_each, destinations = [], set()
            for instance in placed:
                mark = time.perf_counter()
                [done] = evacuation.run([instance])
                evacuate_each.append(time.perf_counter() - mark)
                assert done["outcome"] == EVACUATED, done
                destinations.add(done["to_host"])
            evacuate_total = time.perf_counter() - started

            request = Request(flavor=FLAVOR)
            spec = request_spec(request, settings, ignore_hosts=[source])
            record = request.to_record()
            started = time.perf_counter()
            baseline_each = []
            for index in range(instances):
                mark = time.perf_counter()
                fleet_read = read_fleet(settings, {}, spec, ledger, sync=False)
                decision = schedule(fleet_read.hosts, spec)
                assert decision.ok, decision.summary
                [placement] = decision.placements
                chosen = fleet_read.hosts[list(fleet_read.hosts.column("host")).index(placement.host)]
                ledger.claim([{"name": f"base-{index}", "host": placement.host, "hypervisor_uuid": chosen.uuid}],
                             FLAVOR, "bench", request=record)
                baseline_each.append(time.perf_counter() - mark)
            baseline_total = time.perf_counter() - started
        moved = [i for i in ledger.instances() if i["name"].startswith("evac-")]
        assert len(moved) == instances and all(i["host"] != source and i["state"] == "ACTIVE" for i in moved)
        return {"plan_each": plan_each, "plan_total": plan_total, "evacuate_each": evacuate_each,
                "evacuate_total": evacuate_total, "baseline_each": baseline_each, "baseline_total": baseline_total,
                "destinations": len(destinations)}
    finally:
        ledger.close()


def synthetic_part(backends: list[str], hosts: int, instances: int, runs: int, work: Path) -> dict[str, list]:
    server = None
    measured: dict[str, list] = {}
    try:
        for backend in backends:
            measured[backend] = []
            for number in range(runs):
                if backend == "sqlite":
                    url = f"sqlite:///{work}/ledger-{number}.sqlite3"
                else:
                    server = server or PostgresServer().start()
                    url = server.create_database(f"evac{number}")
                result = one_run(url, hosts, instances)
                print(f"{backend} run {number + 1}: evacuate {result['evacuate_total']:.2f} s, "
                      f"baseline {result['baseline_total']:.2f} s", flush=True)
                measured[backend].append(result)
    finally:
        if server is not None:
            server.stop()
    return measured


def lab_part(work: Path) -> dict[str, Any]:
    """evacuate.yml for LAB_INSTANCES instances of hv2 on a lab fleet of its own."""
    lab_dir = str(work)
    try:
        fleet.up(lab_dir, hosts=LAB_HOSTS)
        inventory = str(fleet.inventory_dir(lab_dir))
        url = f"sqlite:///{fleet.ledger_path(lab_dir)}"
        os.environ.pop("BERTH_LEDGER_URL", None)
        run(["-i", inventory, "playbooks/gather.yml"])
        run(["-i", inventory, "playbooks/launch.yml", "-e",
             json.dumps({"name": "evb", "count": LAB_INSTANCES, "berth_force_hosts": ["hv2"]})])
        ledger = Ledger(url).open()
        before = {i["name"]: i for i in ledger.instances() if i["name"].startswith("evb")}
        assert len(before) == LAB_INSTANCES and all(i["host"] == "hv2" for i in before.values()), before
        for name, instance in before.items():
            log = fleet.log_dir(lab_dir, "hv2") / f"{name}.serial.log"
            assert check.wait_for_marker(log, instance["uuid"], BOOT_TIMEOUT_S), f"{name} did not boot on hv2"
        fleet.stop_daemon(lab_dir, "hv2")
        run(["-i", inventory, "playbooks/gather.yml", *LAB_SERVICE_DOWN_TIME])
        time.sleep(31)
        run(["-i", inventory, "playbooks/gather.yml", *LAB_SERVICE_DOWN_TIME])
        started = time.perf_counter()
        wall_s, report = run(["-i", inventory, "playbooks/evacuate.yml", "-e", "hypervisor=hv2", "-e", "fenced=true",
                              "-e", "fenced_by=benchmark", *LAB_SERVICE_DOWN_TIME])
        after = {i["name"]: i for i in ledger.instances() if i["name"].startswith("evb")}
        assert all(i["host"] != "hv2" and i["state"] == "ACTIVE" for i in after.values()), after
        booted = {}
        for name, instance in sorted(after.items()):
            log = fleet.log_dir(lab_dir, instance["host"]) / f"{name}.serial.log"
            assert check.wait_for_marker(log, instance["uuid"], BOOT_TIMEOUT_S), f"{name} did not boot"
            booted[name] = (instance["host"], time.perf_counter() - started)
        ledger.close()
        tasks = {task["task"]: task.get("seconds", 0.0) for task in report["tasks"]}
        return {"wall_s": wall_s, "cpu_s": report["cpu_s"], "tasks": tasks, "booted": booted}
    finally:
        fleet.down(lab_dir)


def machine() -> str:
    """The CPU model (/proc/cpuinfo) and the kernel."""
    models = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
              if line.startswith("model name")]
    return f"{models[0] if models else platform.processor() or 'unknown CPU'}, Linux {platform.release()}"


def spread(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    return (f"{statistics.median(values) * scale:.{digits}f} "
            f"({min(values) * scale:.{digits}f}-{max(values) * scale:.{digits}f})")


def write(args: argparse.Namespace, measured: dict[str, list], lab: list[dict[str, Any]] | None,
          load_before: str) -> str:
    load_after = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    lines = [
        "# Evacuation (benchmarks/evacuate.py)", "",
        f"{machine()}, Python {platform.python_version()}, {os.cpu_count()} cores shared with other work; load average "
        f"{load_before} before, {load_after} after. Command: `.venv/bin/python benchmarks/evacuate.py "
        f"--hosts {args.hosts} --instances {args.instances} --runs {args.runs} --backends {args.backends}"
        f"{f' --lab-runs {args.lab_runs}' if args.lab else ' --no-lab'}`.", "",
        f"## {args.instances} instances of one down host, {args.hosts}-host synthetic fleet", "",
        f"Each run a fresh ledger: {args.hosts} synthetic hypervisors through the tracker sync, the "
        f"{args.instances} instances (1 vCPU, 512 MB, 1 GB, recorded request, ACTIVE) on one of them, its "
        f"last sync aged past service_down_time ({SERVICE_DOWN_TIME_S} s). In-process, time.perf_counter, "
        "garbage collector off as the actions run it; per instance in milliseconds, in all in seconds, "
        f"median (min-max) over {args.runs} runs (per instance: median, min and max over all "
        f"{args.runs} x {args.instances} instances).", "",
        "- plan: Evacuation in check mode, one instance at a time (evacuate.yml's plan task): the ledger's "
        "host table read and the scheduler's decision on the recorded request, dead host ignored;",
        "- evacuate: down_hypervisor + ensure_fenced (confirmation recorded) + the same decision, "
        "Ledger.claim_evacuation, the definition rendered anew, Ledger.finish_evacuation; the pool declared "
        "shared, the destination a stand-in through Evacuation's `connect` seam (no libvirt, no disk copy);",
        "- baseline: the same 100 requests launched afresh, 100 launches of one: read_fleet (host table) + "
        "schedule + Ledger.claim.", "",
        "| backend | plan per instance ms | plan in all s | evacuate per instance ms | evacuate in all s "
        "| baseline per instance ms | baseline in all s | evacuate / baseline | destinations |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for backend, results in measured.items():
        def every(key: str, results: list = results) -> list[float]:
            return [value for result in results for value in result[key]]

        def totals(key: str, results: list = results) -> list[float]:
            return [result[key] for result in results]
        ratio = statistics.median(totals("evacuate_total")) / statistics.median(totals("baseline_total"))
        lines.append(
            f"| {backend} | {spread(every('plan_each'), 1000, 1)} | {spread(totals('plan_total'))} | "
            f"{spread(every('evacuate_each'), 1000, 1)} | {spread(totals('evacuate_total'))} | "
            f"{spread(every('baseline_each'), 1000, 1)} | {spread(totals('baseline_total'))} | {ratio:.2f} | "
            f"{', '.join(str(result['destinations']) for result in results)} |")
    if lab is not None:
        def task(name: str, scale: float = 1.0) -> str:
            return spread([run["tasks"].get(name, 0.0) / scale for run in lab], digits=1)
        lines += [
            "", f"## evacuate.yml on the lab fleet, {LAB_INSTANCES} instances", "",
            f"Each run: lab/fleet.py up with {LAB_HOSTS} hypervisors in a directory of its own (real libvirtd, "
            f"QEMU guests of the lab's tiny image); {LAB_INSTANCES} instances launched on hv2 and booted; hv2's "
            "libvirtd stopped, gathered until down (berth_service_down_time=30); then one `ansible-playbook "
            "playbooks/evacuate.yml -e hypervisor=hv2 -e fenced=true` timed; lab/fleet.py down. The lab's pool is "
            "not shared: each instance's disks are made anew from its image on the destination. Seconds, median "
            f"(min-max) of {len(lab)} runs.", "",
            "| measure | seconds |", "|---|---|",
            f"| ansible-playbook wall, whole run | {spread([run['wall_s'] for run in lab], digits=1)} |",
            f"| its CPU (user + system, workers included) | {spread([run['cpu_s'] for run in lab], digits=1)} |",
            f"| task Plan the evacuation (check mode) | {task('Plan the evacuation')} |",
            f"| task Evacuate the hypervisor | {task('Evacuate the hypervisor')} |",
            f"| per instance (that task / {LAB_INSTANCES}) | {task('Evacuate the hypervisor', LAB_INSTANCES)} |",
            "| each guest's boot marker seen on its new host, from the playbook's start (polled every 0.5 s, "
            f"after the playbook ended) | {spread([s for run in lab for _host, s in run['booted'].values()], digits=1)} |",
            "", "Destinations: " + "; ".join(
                ", ".join(f"{name} to {host}" for name, (host, _s) in sorted(run["booted"].items())) for run in lab) + ".",
        ]
    text = "\n".join(lines) + "\n"
    if args.output:
        Path(args.output).write_text(text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--instances", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--lab", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--lab-runs", type=int, default=3)
    parser.add_argument("--output")
    args = parser.parse_args()
    load_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    work = Path(tempfile.mkdtemp(prefix="berth-evacbench-", dir="/tmp"))
    try:
        measured = synthetic_part(args.backends.split(","), args.hosts, args.instances, args.runs, work)
        lab = [lab_part(work / f"lab-{number}") for number in range(args.lab_runs)] if args.lab else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(write(args, measured, lab, load_before))


if __name__ == "__main__":
    main()
