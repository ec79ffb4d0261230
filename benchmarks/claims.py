"""Claims per second into a 10,000-hypervisor ledger, on SQLite and on PostgreSQL, with 1, 4 and
16 concurrent claimers.

Each claimer is its own process with its own Ledger (as separate ansible-playbook runs are) and
claims one instance at a time - one whole claim transaction each: lock the hypervisor row, read
its usage summary, re-check it with the engine's Ram/Core/Disk filters, insert the instance and
its claim, re-sum the hypervisor's usage from its rows and move its generation, commit - on a
hypervisor drawn at random among the 10,000 (large ones that never fill up). The 10,000 enter
the ledger through the tracker sync (benchmarks/synthetic.py), as gather.yml writes real ones.
Each configuration runs for a fixed time, three times; the median is reported, with the CPU
seconds per claim of the claimer processes and of the database server (from /proc), which say
where the time goes.

Reproduce (from the repository root, after scripts/setup; PostgreSQL is started here from
Debian's packages, as the tests do, which needs root or the postgres user's rights):

    .venv/bin/python benchmarks/claims.py            # writes benchmarks/results/claims.md
    .venv/bin/python benchmarks/claims.py --seconds 2 --runs 1 --output -
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing
import os
import platform
import random
import statistics
import sys
import sqlite3
import tempfile
import time
import uuid as uuidlib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "benchmarks")]

import synthetic  # noqa: E402
from pg_server import PostgresServer  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger  # noqa: E402

HYPERVISORS = 10_000
CLAIMERS = (1, 4, 16)
FLAVOR = Flavor(name="bench", vcpus=1, memory_mb=64, root_gb=1)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def claimer(url: str, hosts: list, worker: int, start_at: float, stop_at: float, results: multiprocessing.Queue) -> None:
    ledger = Ledger(url).open()
    rng = random.Random(worker * 7919 + int(start_at))
    done = 0
    while time.time() < start_at:
        time.sleep(0.001)
    while time.time() < stop_at:
        name, uuid = rng.choice(hosts)
        ledger.claim([{"name": f"w{worker}-{int(start_at)}-{done}", "host": name, "hypervisor_uuid": uuid}],
                     FLAVOR, f"bench-{worker}")
        done += 1
    ledger.close()
    results.put(done)


# The floor measured beside Berth in the same run: the same transaction - lock the hypervisor
# row and read it, insert the instance and its claim, re-sum the hypervisor's usage, commit -
# written straight for the database's own driver, without Berth or SQLAlchemy, and without the
# re-check's arithmetic. What Berth adds to a claim is the difference.
_FLOOR_SQL = {
    "lock": "SELECT uuid, generation, vcpus_total, vcpus_used, total_usable_ram_mb, reserved_host_memory_mb, "
            "memory_mb_used, total_usable_disk_gb, reserved_host_disk_mb, disk_mb_used, cpu_allocation_ratio, "
            "ram_allocation_ratio, disk_allocation_ratio FROM hypervisors WHERE uuid = {p}",
    "instance": "INSERT INTO instances (uuid, name, flavor_name, vcpus, memory_mb, root_gb, ephemeral_gb, swap, "
                "hypervisor_uuid, host, state, created_at, updated_at, project_id) "
                "VALUES ({p}, {p}, 'bench', 1, 64, 1, 0, 0, {p}, {p}, 'BUILDING', {p}, {p}, 'default')",
    "claim": "INSERT INTO claims (instance_uuid, hypervisor_uuid, vcpus, memory_mb, disk_mb, owner, lease_expires_at, "
             "created_at) VALUES ({p}, {p}, 1, 64, 1024, 'floor', {p}, {p}) RETURNING id",
    "usage": "UPDATE hypervisors SET (vcpus_used, memory_mb_used, disk_mb_used, num_instances, num_io_ops) = ("
             "SELECT COALESCE(SUM(vcpus), 0), COALESCE(SUM(memory_mb), 0), COALESCE(SUM(disk_mb), 0), COUNT(*), "
             "COALESCE(SUM(building), 0) FROM (SELECT vcpus, memory_mb, disk_mb, "
             "CASE WHEN lease_expires_at IS NULL THEN 0 ELSE 1 END AS building FROM claims "
             "WHERE claims.hypervisor_uuid = hypervisors.uuid UNION ALL SELECT vcpus, memory_mb, disk_mb, 0 "
             "FROM unmanaged_usage WHERE unmanaged_usage.hypervisor_uuid = hypervisors.uuid) AS used), "
             "generation = generation + 1 WHERE uuid = {p}",
}


def floor_claimer(url: str, hosts: list, worker: int, start_at: float, stop_at: float,
                  results: multiprocessing.Queue) -> None:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        db = sqlite3.connect(parsed.database, isolation_level=None, timeout=30)
        sql = {key: text.format(p="?") for key, text in _FLOOR_SQL.items()}
        begin, now = "BEGIN IMMEDIATE", lambda: dt.datetime.utcnow().isoformat(" ")
    else:
        import psycopg

        db = psycopg.connect(parsed.set(drivername="postgresql").render_as_string(hide_password=False),
                             autocommit=True)
        sql = {key: text.format(p="%s") for key, text in _FLOOR_SQL.items()}
        sql["lock"] += " FOR UPDATE"
        begin, now = "BEGIN", dt.datetime.utcnow
    rng = random.Random(worker * 7919 + int(start_at))
    done = 0
    while time.time() < start_at:
        time.sleep(0.001)
    cursor = db.cursor()
    while time.time() < stop_at:
        name, uuid = rng.choice(hosts)
        instance, stamp = str(uuidlib.uuid4()), now()
        cursor.execute(begin)
        cursor.execute(sql["lock"], (uuid,))
        cursor.fetchall()
        cursor.execute(sql["instance"], (instance, f"f{worker}-{int(start_at)}-{done}", uuid, name, stamp, stamp))
        cursor.execute(sql["claim"], (instance, uuid, stamp, stamp))
        cursor.fetchall()
        cursor.execute(sql["usage"], (uuid,))
        cursor.execute("COMMIT")
        done += 1
    db.close()
    results.put(done)


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes so far (0 for those gone)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


def server_pids(server: PostgresServer | None) -> list[int]:
    """The PostgreSQL server's processes (postmaster and backends), or none for SQLite."""
    if server is None:
        return []
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"postgres" in (entry / "cmdline").read_bytes().split(b"\0")[0]:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def measure(url: str, hosts: list, claimers: int, seconds: float, server: PostgresServer | None,
            target: Any = claimer) -> dict:
    results: multiprocessing.Queue = multiprocessing.Queue()
    start_at = time.time() + 1.0 + 0.05 * claimers  # every process open before the clock runs
    stop_at = start_at + seconds
    procs = [multiprocessing.Process(target=target, args=(url, hosts, w, start_at, stop_at, results))
             for w in range(claimers)]
    for proc in procs:
        proc.start()
    while time.time() < start_at:
        time.sleep(0.01)
    watched = [proc.pid for proc in procs]
    backends = server_pids(server)
    before = (cpu_seconds(watched), cpu_seconds(backends))
    # Read just before the claimers stop (their processes are gone after).
    time.sleep(max(0.0, stop_at - time.time() - 0.05))
    after = (cpu_seconds(watched), cpu_seconds(server_pids(server)))
    total = sum(results.get(timeout=seconds + 300) for _ in procs)
    for proc in procs:
        proc.join()
    if not total:
        raise RuntimeError("no claim was made")
    return {"rate": total / seconds, "client_ms": (after[0] - before[0]) * 1000 / total,
            "server_ms": (after[1] - before[1]) * 1000 / total}


def run(url: str, server: PostgresServer | None, runs: int, seconds: float, label: str) -> list[dict]:
    ledger = Ledger(url).open()
    hosts = synthetic.sync(ledger, 0, HYPERVISORS, large=True)
    ledger.close()
    rows = []
    for claimers in CLAIMERS:
        berth, floor = [], []
        for _run in range(runs):  # in turn, so that the machine's drift hits both alike
            berth.append(measure(url, hosts, claimers, seconds, server))
            floor.append(measure(url, hosts, claimers, seconds, server, target=floor_claimer))
        rates = [sample["rate"] for sample in berth]
        row = {"database": label, "claimers": claimers, "median": statistics.median(rates), "min": min(rates),
               "max": max(rates), "floor": statistics.median(sample["rate"] for sample in floor),
               "client_ms": statistics.median(s["client_ms"] for s in berth),
               "server_ms": statistics.median(s["server_ms"] for s in berth),
               "floor_client_ms": statistics.median(s["client_ms"] for s in floor)}
        rows.append(row)
        print(f"{label:28s} {claimers:3d} claimers: {row['median']:7.0f} claims/s "
              f"({row['min']:.0f}-{row['max']:.0f}), driver floor {row['floor']:.0f}/s; CPU per claim: claimer "
              f"{row['client_ms']:.2f} ms (floor {row['floor_client_ms']:.2f}), server {row['server_ms']:.2f} ms",
              file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="measuring time per run")
    parser.add_argument("--runs", type=int, default=3, help="runs per configuration (the median is reported)")
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "claims.md"),
                        help="markdown file to write, or - for stdout")
    args = parser.parse_args()
    load_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    rows = []
    with tempfile.TemporaryDirectory(prefix="berth-bench-") as tmp:
        rows += run(f"sqlite:///{tmp}/ledger.sqlite3", None, args.runs, args.seconds, "SQLite (file, WAL)")
    server = PostgresServer().start()
    try:
        rows += run(server.create_database("claims"), server, args.runs, args.seconds, "PostgreSQL 15 (loopback)")
    finally:
        server.stop()
    load_after = " ".join(Path("/proc/loadavg").read_text().split()[:3])

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    lines = [
        "# Claims per second",
        "",
        f"One claim = one ledger transaction (lock the hypervisor row, read its usage summary, re-check it",
        "with the engine's Ram/Core/Disk filters, insert the instance and its claim with owner and lease,",
        "re-sum the hypervisor's usage from its rows and move its generation, commit). Each claimer is a",
        "separate process with its own ledger connection, claiming one instance at a time on a hypervisor",
        f"drawn at random among {HYPERVISORS:,} (written by the tracker sync; large enough never to fill up),",
        f"for {args.seconds:g} s per run, {args.runs} runs per configuration (median, and min-max).",
        "PostgreSQL runs on loopback with fsync off (as in the tests); SQLite is a file in /tmp with WAL and",
        "synchronous=FULL (the default). CPU per claim: user + system seconds of the claimer processes,",
        "and of PostgreSQL's server processes, over the measuring window, divided by the claims made.",
        "The driver floor, measured in turn with Berth in the same run: the same transaction written",
        "straight for the database driver (sqlite3, psycopg), without Berth, SQLAlchemy or the re-check:",
        "what this machine allows at that moment; Berth / floor is the share of it Berth reaches.",
        "",
        f"Machine: {cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.system()} "
        f"{platform.release()}. Load average before: {load_before}; after: {load_after}.",
        "",
        "| database | concurrent claimers | Berth claims/s (median) | min-max | driver floor claims/s | "
        "Berth / floor | claimer CPU ms/claim (floor) | server CPU ms/claim |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *[f"| {row['database']} | {row['claimers']} | {row['median']:.0f} | {row['min']:.0f}-{row['max']:.0f} | "
          f"{row['floor']:.0f} | {row['median'] / row['floor']:.2f} | {row['client_ms']:.2f} "
          f"({row['floor_client_ms']:.2f}) | {row['server_ms']:.2f} |" for row in rows],
        "",
        "Reproduce: `.venv/bin/python benchmarks/claims.py` (after `scripts/setup`; starts its own",
        "PostgreSQL server from Debian's packages, as root).",
        "",
    ]
    text = "\n".join(lines)
    if args.output == "-":
        print(text)
    else:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text)
        print(f"wrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
