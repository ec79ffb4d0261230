"""The tracker sync at fleet scale: `ansible-playbook playbooks/gather.yml` over 1,000 hypervisors,
one at a time (forks 1) and in parallel (Ansible's forks), on SQLite and on PostgreSQL.

    .venv/bin/python benchmarks/gather_scale.py [--hypervisors 1000] [--daemons 4] [--forks 1,5,20]
        [--backends sqlite,postgresql] [--output benchmarks/results/gather_scale.md]

Needs root (the lab's libvirt daemons; PostgreSQL started from Debian's packages as the tests do).

The hypervisors answer through real libvirt APIs over libvirt's remote protocol: each is a node
file of libvirt's test driver (its own CPUs, memory, domains and pool, sizes varying from host to
host) served by one of ``--daemons`` real lab libvirtd daemons (lab/fleet.py) at
``test+unix:///abs/hvN.xml?socket=<daemon socket>``, so every call a sync makes - connect,
capabilities, node info, pools, volumes, networks, domains and their XML - is an RPC to a daemon,
as it is to a production hypervisor over qemu+ssh (less the network). Why the test driver: a
thousand QEMU-driven daemons would need a thousand namespaced libvirtd processes on this 2-CPU
machine (and would all report the same machine, TESTBED.md), while the test driver gives each
hypervisor a capacity of its own behind the same API.

gather.yml runs as a user's scheduled sync does: the inventory source lists the hypervisors
without connecting to them (`gather_facts: false`), and each hypervisor is an ordinary task
(berth.fleet.tracker_sync gathers it from the controller and writes it in one ledger transaction,
then its drift report), run over Ansible's forks. For each backend and fork count, a fresh
ledger is synced twice: the first run records every hypervisor (inserts), the second is the
steady state a schedule sees every few minutes (the same hypervisors again). For comparison, the
last row of each backend has the inventory plugin gather all hypervisors itself, in parallel
threads, before the play (`gather_facts: true`), and the tasks only write what it gathered.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "lab"), str(REPO / "tests"), str(REPO / "benchmarks")]

import fleet  # noqa: E402  (lab/fleet.py)
from pg_server import PostgresServer  # noqa: E402
from synthetic import test_driver_node  # noqa: E402

ANSIBLE_PLAYBOOK = str(REPO / ".venv" / "bin" / "ansible-playbook")


def write_inventory(directory: Path, lab_dir: str, count: int, daemons: int, gather: bool) -> Path:
    """A berth.fleet.hypervisors source of ``count`` test-driver hypervisors spread over the
    lab's daemons. The ledger's URL is not in it: it comes from the environment (see gather)."""
    nodes = directory / "nodes"
    nodes.mkdir(parents=True, exist_ok=True)
    inventory = directory / ("gathering" if gather else "listing")
    inventory.mkdir(parents=True, exist_ok=True)
    lines = ["plugin: berth.fleet.hypervisors", f"gather_facts: {str(gather).lower()}", "timeout: 60",
             "hypervisors:"]
    for number in range(1, count + 1):
        node = nodes / f"hv{number}.xml"
        if not node.exists():
            node.write_text(test_driver_node(number))
        socket = fleet.socket_path(lab_dir, f"hv{1 + number % daemons}")
        lines += [f"  hv{number}:", f"    uri: {json.dumps(f'test+unix://{node}?socket={socket}')}"]
    (inventory / "fleet.berth.yml").write_text("\n".join(lines) + "\n")
    return inventory


def gather(inventory: Path, url: str, forks: int) -> float:
    """One whole gather.yml run: its wall seconds (it must sync every hypervisor). The ledger's
    URL is in BERTH_LEDGER_URL, as an AWX credential gives it (and as a scheduled gather into a
    shared PostgreSQL ledger should have it, keeping its password out of the inventory): a
    PostgreSQL driver is then loaded once in Ansible's main process, not in every task's worker."""
    env = {**os.environ, "BERTH_LEDGER_URL": url, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.minimal"}
    started = time.perf_counter()
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(inventory), "-f", str(forks), "playbooks/gather.yml"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=7200, check=False)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        failed = [line for line in proc.stdout.splitlines() if "FAILED" in line or "UNREACHABLE" in line]
        raise RuntimeError(f"gather.yml failed (rc {proc.returncode}): {failed[:5]} {proc.stderr[-2000:]}")
    return wall


def synced(url: str, count: int) -> None:
    """Every hypervisor is in the ledger, up, as a sync leaves it."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as db:
        up = db.execute(text("SELECT count(*) FROM hypervisors WHERE sync_status = 'up'")).scalar()
    engine.dispose()
    if up != count:
        raise RuntimeError(f"{up} of {count} hypervisors up in the ledger after the sync")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hypervisors", type=int, default=1000)
    parser.add_argument("--daemons", type=int, default=4)
    parser.add_argument("--forks", default="1,5,20")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--modes", default="tasks,inventory",
                        help="tasks: each task gathers its host, per fork count; inventory: the plugin gathers all")
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "gather_scale.md"))
    options = parser.parse_args()
    count = options.hypervisors
    work = Path(tempfile.mkdtemp(prefix="berth-gather-", dir="/tmp"))
    lab_dir = str(work / "lab")
    load_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    started = time.time()
    server = None
    rows = []
    try:
        fleet.up(lab_dir, hosts=options.daemons)
        for backend in options.backends.split(","):
            modes = options.modes.split(",")
            runs = [(int(forks), False) for forks in options.forks.split(",") if "tasks" in modes]
            if "inventory" in modes:
                runs.append((int(options.forks.split(",")[-1]), True))
            for number, (forks, plugin_gathers) in enumerate(runs):
                if backend == "sqlite":
                    url = f"sqlite:///{work}/{backend}-{number}.sqlite3"
                else:
                    server = server or PostgresServer().start()
                    url = server.create_database(f"gather{number}")
                inventory = write_inventory(work / f"{backend}-{number}", lab_dir, count, options.daemons,
                                            plugin_gathers)
                first = gather(inventory, url, forks)
                synced(url, count)
                steady = gather(inventory, url, forks)
                synced(url, count)
                rows.append({"backend": backend, "forks": forks, "plugin_gathers": plugin_gathers,
                             "first": first, "steady": steady})
                print(f"{backend} forks {forks}{' (inventory gathers)' if plugin_gathers else ''}: first {first:.1f} s, "
                      f"steady {steady:.1f} s ({count / steady:.0f} hypervisors/s)", file=sys.stderr, flush=True)
    finally:
        fleet.down(lab_dir)
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    write(options.output, rows, count, options.daemons, started, load_before)


def write(path: str, rows: list[dict], count: int, daemons: int, started: float, load_before: str) -> None:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    lines = [
        "# The tracker sync at fleet scale: gather.yml over test-driver hypervisors",
        "",
        f"{count:,} hypervisors, each a libvirt test-driver node (its own CPUs, memory, domains, pool) served",
        f"by one of {daemons} real lab libvirtd daemons over the remote protocol; the inventory lists them",
        "without connecting and each is one berth.fleet.tracker_sync task (gather from the controller, one",
        "ledger transaction) plus its drift report, over Ansible's forks. `first`: a new ledger (every",
        "hypervisor inserted); `steady`: the same sync again, as a schedule runs it. The last row of each",
        "ledger has the inventory plugin gather every hypervisor first, in threads, and the tasks only write.",
        "See benchmarks/gather_scale.py for why the test driver and how the fleet is made.",
        "",
        f"Machine: {cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.system()} "
        f"{platform.release()}. Load average before: {load_before}; after: "
        f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])}. Whole run: {(time.time() - started) / 60:.1f} min.",
        "",
        "| ledger | forks | gathered by | first sync (s) | steady sync (s) | hypervisors/s (steady) | "
        "vs forks 1 |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        serial = next((r["steady"] for r in rows if r["backend"] == row["backend"] and r["forks"] == 1
                       and not r["plugin_gathers"]), None)
        speedup = f"{serial / row['steady']:.2f}x" if serial else "-"
        lines.append(f"| {row['backend']} | {row['forks']} | "
                     f"{'inventory plugin (threads)' if row['plugin_gathers'] else 'each task'} | {row['first']:.1f} | "
                     f"{row['steady']:.1f} | {count / row['steady']:.0f} | {speedup} |")
    lines += ["", "Reproduce: `.venv/bin/python benchmarks/gather_scale.py` (root, after `scripts/setup`).", ""]
    Path(path).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
