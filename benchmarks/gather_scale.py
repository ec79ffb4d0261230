"""The tracker sync at fleet scale: `ansible-playbook playbooks/gather.yml`, each run beside a
baseline (an empty play over the same inventory) in the same run.

    .venv/bin/python benchmarks/gather_scale.py [--hypervisors 10000] [--remote-hypervisors 1000]
        [--daemons 4] [--slices 4] [--backends sqlite,postgresql] [--workers 20]
        [--output benchmarks/results/gather_scale.md]

Needs root (the lab's libvirt daemons; PostgreSQL started from Debian's packages as the tests do).

Rows, per ledger (SQLite file, PostgreSQL server on this machine):
- ``in-process``: ``--hypervisors`` libvirt test-driver hypervisors opened in the controller's
  own process (``test:///abs/hvN.xml``), so only the controller's cost is measured (no network,
  no daemon): the first sync of a new ledger (every hypervisor inserted), then the steady state
  a schedule sees (the same hypervisors again, nothing changed).
- ``lab daemons``: ``--remote-hypervisors`` test-driver nodes served by ``--daemons`` real lab
  libvirtd daemons over libvirt's remote protocol (``test+unix:///abs/hvN.xml?socket=...``),
  so every call is an RPC to a daemon, as to a production hypervisor over qemu+ssh (less the
  network). First and steady, as above.
- ``slices``: ``--slices`` ansible-playbook processes at once over disjoint ``--limit`` sets
  of the in-process fleet into one PostgreSQL ledger (AWX job slicing does the same across
  execution nodes), first and steady; afterwards every hypervisor's row is checked: present,
  up, synced by this run, and named as its node file names it (nothing lost or misattributed).

Each figure is the wall time of the whole ansible-playbook run (Ansible's start and inventory
included); ``baseline`` is an empty play over the same inventory and hosts (one debug task, run
once), measured just before each run, so ``sync`` = run - baseline is what the sync adds. CPU is the
user + system time of the run and its children (the controller's whole CPU; the in-process
test driver's own work included, PostgreSQL's not). The load average is read before and after each
run: other people share this machine's 2 CPUs.

Why the test driver: a real QEMU hypervisor per host would need 10,000 namespaced libvirtd
processes on this 2-CPU machine (and they would all report the same machine, TESTBED.md); the
test driver gives each hypervisor a capacity and domains of its own behind the same API.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
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
BASELINE_PLAY = """- name: Baseline, an empty play over the same hosts
  hosts: hypervisors
  gather_facts: false
  tasks:
    - name: Nothing
      ansible.builtin.debug:
        msg: "{{ ansible_play_batch | length }} hosts"
      run_once: true
"""


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def write_inventory(directory: Path, nodes: Path, count: int, lab_dir: str | None, daemons: int) -> Path:
    """A berth.fleet.hypervisors source of ``count`` test-driver hypervisors, opened in process
    (``lab_dir`` None) or served by the lab's daemons. The ledger's URL is not in it: it comes
    from the environment, as an AWX credential gives it."""
    nodes.mkdir(parents=True, exist_ok=True)
    directory.mkdir(parents=True, exist_ok=True)
    lines = ["plugin: berth.fleet.hypervisors", "gather_facts: false", "timeout: 30",
             "uri_policy: {allow_test_files: true, allow_parameters: [socket]}", "hypervisors:"]
    for number in range(1, count + 1):
        node = nodes / f"hv{number}.xml"
        if not node.exists():
            node.write_text(test_driver_node(number))
        if lab_dir is None:
            uri = f"test://{node}"
        else:
            uri = f"test+unix://{node}?socket={fleet.socket_path(lab_dir, f'hv{1 + number % daemons}')}"
        lines += [f"  hv{number}:", f"    uri: {json.dumps(uri)}"]
    (directory / "fleet.berth.yml").write_text("\n".join(lines) + "\n")
    return directory


def run(playbook: str, inventory: Path, url: str, workers: int, limit: str | None = None) -> subprocess.Popen:
    env = {**os.environ, "BERTH_LEDGER_URL": url, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"}  # the drift report's summary line on one line
    command = [ANSIBLE_PLAYBOOK, "-i", str(inventory), playbook, "-e", f"berth_sync_workers={workers}"]
    if limit:
        command += ["--limit", limit]
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def timed(starts: list[subprocess.Popen]) -> dict:
    """Wait for processes started together: wall seconds, the CPU seconds of all of them (and
    their children), the load average before and after."""
    before_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    before_load = load()
    started = time.perf_counter()
    outputs = [proc.communicate(timeout=7200)[0] for proc in starts]
    wall = time.perf_counter() - started
    after_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    for proc, output in zip(starts, outputs):
        if proc.returncode != 0:
            raise RuntimeError(f"ansible-playbook failed (rc {proc.returncode}): {output[-3000:]}")
    cpu = (after_cpu.ru_utime - before_cpu.ru_utime) + (after_cpu.ru_stime - before_cpu.ru_stime)
    summary = next((line.strip().strip('",') for output in outputs for line in output.splitlines()
                    if "synced " in line and " hypervisor(s) in " in line), "")
    return {"wall_s": wall, "cpu_s": cpu, "load_before": before_load, "load_after": load(), "summary": summary}


def gather(inventory: Path, url: str, workers: int, limit: str | None = None) -> dict:
    # Started right before its wait: timed() takes the CPU of the children it waits for.
    return timed([run("playbooks/gather.yml", inventory, url, workers, limit)])


def baseline(inventory: Path, directory: Path, url: str, workers: int, limits: list[str | None] = (None,)) -> dict:
    """The empty play over the same inventory, once per ``limits`` (processes at once)."""
    play = directory / "baseline.yml"
    play.write_text(BASELINE_PLAY)
    return timed([run(str(play), inventory, url, workers, limit) for limit in limits])


def check_rows(url: str, count: int, since: float, nodes: Path) -> str:
    """Every hypervisor of the fleet is in the ledger, up, synced after ``since`` (this run), and
    its row holds what its own node file says (CPUs, memory): nothing lost or misattributed."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as db:
        rows = {row.name: row for row in db.execute(text(
            "SELECT name, sync_status, synced_at, vcpus_total, total_usable_ram_mb, uri FROM hypervisors"))}
    engine.dispose()
    wrong = []
    for number in range(1, count + 1):
        name = f"hv{number}"
        row = rows.get(name)
        cpus, memory_mb = 2 + (number % 8) * 2, 4096 * (1 + number % 6)
        if row is None:
            wrong.append(f"{name} missing")
        elif (row.sync_status, row.vcpus_total, row.total_usable_ram_mb) != ("up", cpus, memory_mb) \
                or not row.uri.endswith(f"/hv{number}.xml") or _utc_seconds(row.synced_at) < since - 1:
            wrong.append(f"{name}: {row.sync_status} {row.vcpus_total} {row.total_usable_ram_mb} {row.uri} "
                         f"{row.synced_at}")
    if len(rows) != count or wrong:
        raise RuntimeError(f"{len(rows)} rows for {count} hypervisors; wrong: {wrong[:10]}")
    return f"{count} rows, each up, synced by this run, with its own node's CPUs, memory and URI"


def _utc_seconds(synced_at: dt.datetime | str) -> float:
    """The ledger keeps naive UTC times (SQLite hands them back as text)."""
    moment = dt.datetime.fromisoformat(synced_at) if isinstance(synced_at, str) else synced_at
    return moment.replace(tzinfo=dt.timezone.utc).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hypervisors", type=int, default=10000)
    parser.add_argument("--remote-hypervisors", type=int, default=1000)
    parser.add_argument("--daemons", type=int, default=4)
    parser.add_argument("--slices", type=int, default=4)
    parser.add_argument("--workers", type=int, default=20)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--parts", default="in-process,lab daemons,slices")
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "gather_scale.md"))
    options = parser.parse_args()
    parts = options.parts.split(",")
    work = Path(tempfile.mkdtemp(prefix="berth-gather-", dir="/tmp"))
    lab_dir = str(work / "lab")
    started = time.time()
    server = None
    rows: list[dict] = []
    slices: list[dict] = []
    try:
        local = write_inventory(work / "in-process", work / "nodes", options.hypervisors, None, options.daemons)
        if "lab daemons" in parts:
            fleet.up(lab_dir, hosts=options.daemons)
            remote = write_inventory(work / "remote", work / "nodes", options.remote_hypervisors, lab_dir,
                                     options.daemons)
        for backend in options.backends.split(","):
            fleets = ([("in-process", local, options.hypervisors)] if "in-process" in parts else []) + \
                     ([("lab daemons", remote, options.remote_hypervisors)] if "lab daemons" in parts else [])
            for number, (kind, inventory, count) in enumerate(fleets):
                if backend == "sqlite":
                    url = f"sqlite:///{work}/{backend}-{number}.sqlite3"
                else:
                    server = server or PostgresServer().start()
                    url = server.create_database(f"gather{number}")
                # Each run right after its own baseline: the machine's load moves from minute to minute.
                first_base = baseline(inventory, work, url, options.workers)
                first = gather(inventory, url, options.workers)
                steady_base = baseline(inventory, work, url, options.workers)
                since = time.time()
                steady = gather(inventory, url, options.workers)
                check = check_rows(url, count, since, work / "nodes") if kind == "in-process" else ""
                rows.append({"backend": backend, "kind": kind, "count": count, "first": (first, first_base),
                             "steady": (steady, steady_base), "check": check})
                print(f"{backend} {kind} {count}: first {first['wall_s']:.1f} s (baseline {first_base['wall_s']:.1f}), "
                      f"steady {steady['wall_s']:.1f} s (baseline {steady_base['wall_s']:.1f}, load "
                      f"{steady['load_before']})", file=sys.stderr, flush=True)
        if "slices" in parts:
            server = server or PostgresServer().start()
            url = server.create_database("slices")
            count = options.hypervisors
            limits = [",".join(f"hv{number}" for number in range(1 + part, count + 1, options.slices))
                      for part in range(options.slices)]
            limits = [f"@{_limit_file(work, index, hosts)}" for index, hosts in enumerate(limits)]
            for round_name in ("first", "steady"):
                base = baseline(local, work, url, options.workers, limits)
                since = time.time()
                outcome = timed([run("playbooks/gather.yml", local, url, options.workers, limit) for limit in limits])
                outcome["check"] = check_rows(url, count, since, work / "nodes")
                slices.append({"round": round_name, "baseline": base, **outcome})
                print(f"{options.slices} slices {round_name}: {outcome['wall_s']:.1f} s; {outcome['check']}",
                      file=sys.stderr, flush=True)
    finally:
        if "lab daemons" in parts:
            fleet.down(lab_dir)
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    write(options, rows, slices, started)


def _limit_file(work: Path, index: int, hosts: str) -> Path:
    """A --limit of thousands of hosts, as a file (@path): one host per line."""
    path = work / f"slice{index}.limit"
    path.write_text(hosts.replace(",", "\n") + "\n")
    return path


def _row(label: str, count: int, outcome: dict, base: dict) -> str:
    sync_s = outcome["wall_s"] - base["wall_s"]
    cpu_ms = (outcome["cpu_s"] - base["cpu_s"]) * 1000 / count
    return (f"| {label} | {count:,} | {base['wall_s']:.1f} | {outcome['wall_s']:.1f} | {sync_s:.1f} | "
            f"{sync_s * 1000 / count:.1f} | {cpu_ms:.2f} | {outcome['load_before']} / {outcome['load_after']} |")


def write(options: argparse.Namespace, rows: list[dict], slices: list[dict], started: float) -> None:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    lines = [
        "# The tracker sync at fleet scale: gather.yml, one task for the play's hosts",
        "",
        "Each figure is one whole `ansible-playbook playbooks/gather.yml` run (Ansible's start and the",
        "inventory included) beside its baseline, run just before it: an empty play (one debug",
        "task, run once) over the same inventory and hosts (for the slices, as many empty plays at once",
        "over the same --limit sets). `sync` = run - baseline; `CPU/hv` is the",
        "controller's CPU (user + system of the run and its children, minus the baseline's) per",
        "hypervisor. `in-process`: libvirt test-driver hypervisors opened in the controller's own",
        "process (no network, no daemon; the test driver's own work is counted as controller CPU);",
        f"`lab daemons`: test-driver nodes served by {options.daemons} real lab libvirtd daemons over",
        "the remote protocol. `first`: a new ledger (every hypervisor inserted); `steady`: the same",
        "sync again, nothing changed (a schedule's every run). The ledger's URL comes from",
        f"BERTH_LEDGER_URL; {options.workers} hypervisors read at once (berth_sync_workers), 500 per",
        "transaction. Load average (1, 5, 15 min) before / after each run: other people share these",
        "2 CPUs, so the wall times vary with them.",
        "",
        f"Machine: {cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.system()} "
        f"{platform.release()}. Whole benchmark: {(time.time() - started) / 60:.1f} min.",
        "",
        "| ledger, fleet, run | hypervisors | baseline (s) | run (s) | sync (s) | sync per 1,000 (s) | CPU/hv (ms) "
        "| load before / after |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        for name in ("first", "steady"):
            lines.append(_row(f"{row['backend']}, {row['kind']}, {name}", row["count"], *row[name]))
    for entry in slices:
        lines.append(_row(f"postgresql, {options.slices} concurrent slices (--limit), {entry['round']}",
                          options.hypervisors, entry, entry["baseline"]))
    lines += ["", "What each run's own summary line said (the sync task's measurement, steady runs):", ""]
    lines += [f"- {row['backend']}, {row['kind']}: {row['steady'][0]['summary']}" for row in rows]
    lines += [f"- slices ({entry['round']}, one of the {options.slices}): {entry['summary']}" for entry in slices]
    checks = [f"- {row['backend']}, {row['kind']}: {row['check']}" for row in rows if row["check"]]
    checks += [f"- {options.slices} slices, {entry['round']}: {entry['check']}" for entry in slices]
    if checks:
        lines += ["", "Rows checked after the runs (read with SQL, not through Berth):", "", *checks]
    lines += ["", "Reproduce: `.venv/bin/python benchmarks/gather_scale.py` (root, after `scripts/setup`).", ""]
    Path(options.output).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
