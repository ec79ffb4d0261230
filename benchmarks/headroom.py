"""The failover headroom (issue 35: at 10,000 hypervisors under 2 s, so capacity.yml stays
interactive), as berth.fleet.capacity and a launch's check work it out from the ledger.

    .venv/bin/python benchmarks/headroom.py [--hosts 10000] [--runs 3] [--share 0.3]
        [--output benchmarks/results/headroom.md]

The fleet: synthetic hypervisors (benchmarks/synthetic.py: generated libvirt facts through
host_facts.host_state and the tracker sync, as gather.yml writes real ones) in a SQLite ledger.
HA instances are claimed through Ledger.claim as a launch claims them, each with its recorded
request: one on each of ``--share`` of the hosts that have room for it (m1.tiny-sized, 1 vCPU and
512 MB, priorities 0 to 100), 20 of them members of one anti-affinity group. Timed in-process
with time.perf_counter, ``--runs`` times each: _headroom.ledger_headroom (the ledger's read of the
HA instances, their groups and every host, then the computation) for berth_failover_hosts 1 and 2,
and the computation alone (failover_headroom on the table read once).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
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
from ansible_collections.berth.fleet.plugins.plugin_utils import _headroom  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import without_gc  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings  # noqa: E402

HA_FLAVOR = Flavor(name="ha.tiny", vcpus=1, memory_mb=512, root_gb=1)
GROUP_MEMBERS = 20


def fleet(ledger: Ledger, hosts: int, share: float) -> int:
    """Sync ``hosts`` synthetic hypervisors and claim the HA instances; returns how many."""
    synthetic.sync(ledger, 1, hosts)
    table, _generations = ledger.host_table()
    rng = random.Random(35)
    roomy = [position for position in range(len(table))
             if table.column("vcpus_used")[position] + 1 <= table.column("vcpus_total")[position] * 4
             and table.column("free_ram_mb")[position] >= 1024]
    chosen = sorted(rng.sample(roomy, min(len(roomy), int(hosts * share))))
    ledger.create_server_group("web", "anti-affinity")
    record = Request(flavor=HA_FLAVOR).to_record()
    placements = [{"name": f"ha-{index}", "host": table.column("host")[position],
                   "hypervisor_uuid": table.column("uuid")[position]} for index, position in enumerate(chosen)]
    members, rest = placements[:GROUP_MEMBERS], placements[GROUP_MEMBERS:]
    ledger.claim(members, HA_FLAVOR, "bench", server_group="web", request={**record, "server_group": "web"},
                 ha=True, ha_priority=100)
    for first in range(0, len(rest), 500):
        batch = rest[first:first + 500]
        ledger.claim(batch, HA_FLAVOR, "bench", request=record, ha=True, ha_priority=rng.randint(0, 100))
    return len(placements)


def timed(call, runs: int) -> tuple[list[float], object]:
    seconds, answer = [], None
    for _run in range(runs):
        mark = time.perf_counter()
        with without_gc():
            answer = call()
        seconds.append(time.perf_counter() - mark)
    return seconds, answer


def shown(seconds: list[float]) -> str:
    return f"{statistics.median(seconds):.3f} ({min(seconds):.3f}-{max(seconds):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--share", type=float, default=0.3)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        ledger = Ledger(f"sqlite:///{directory}/ledger.sqlite3").open(create=True)
        mark = time.perf_counter()
        count = fleet(ledger, args.hosts, args.share)
        setup_s = time.perf_counter() - mark
        rows = []
        for k in (1, 2):
            settings = Settings(failover_hosts=k, service_down_time=86400)
            whole, answer = timed(lambda: _headroom.ledger_headroom(ledger, settings), args.runs)
            instances = _headroom.ha_instances(ledger.ha_instances(), settings,
                                               {"web": ledger.scheduler_group("web")})
            table, _generations = ledger.host_table()
            alone, _answer = timed(lambda: _headroom.failover_headroom(table, instances, k), args.runs)
            rows.append((k, shown(whole), shown(alone), answer.to_dict()))
        ledger.close()
    load = os.getloadavg()
    lines = [
        "# Failover headroom at scale (benchmarks/headroom.py)", "",
        f"{args.hosts} synthetic hypervisors (benchmarks/synthetic.py through the tracker sync) in a SQLite ledger, "
        f"{count} HA instances claimed through Ledger.claim with their recorded requests ({GROUP_MEMBERS} in one "
        f"anti-affinity group), fleet written in {setup_s:.1f} s. Python {platform.python_version()}, "
        f"{os.cpu_count()} cores shared with other work, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}. "
        f"Seconds, median (min-max) of {args.runs} runs, time.perf_counter in-process, garbage collector off "
        f"as the actions run it.", "",
        "| failover_hosts | ledger_headroom (read + compute) s | failover_headroom (compute) s | losses checked "
        "| held | single hosts not absorbed |",
        "|---|---|---|---|---|---|",
    ]
    for k, whole, alone, answer in rows:
        lines.append(f"| {k} | {whole} | {alone} | {answer['losses_checked']} | {answer['held']} | "
                     f"{len(answer['single_hosts_unabsorbed'])} |")
    lines += ["", "Command: `.venv/bin/python benchmarks/headroom.py "
              f"--hosts {args.hosts} --runs {args.runs} --share {args.share}`"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    main()
