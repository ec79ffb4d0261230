"""The schedule's read + decide + claim at 10,000 hypervisors with NUMA and PCI facts on every
host, against the same for a fleet of hosts without them, measured in the same run.

    .venv/bin/python benchmarks/numa_scale.py [--hosts 10000] [--runs 5] [--backends sqlite,postgresql]
        [--output benchmarks/results/numa_scale.md]

Three fleets of ``--hosts`` synthetic hypervisors enter a fresh ledger each through the tracker
sync (benchmarks/synthetic.py, as gather.yml writes real ones):

- plain: today's synthetic hosts (one NUMA cell, no CPU sets, no devices), launched with a plain
  flavor: the baseline;
- numa fleet, plain flavor: the same hosts with two NUMA cells of 16 threads, CPU sets, huge
  pages, an SR-IOV NIC and a GPU per cell (synthetic.numa_facts): what the facts alone cost a
  launch that asks for none of it (NUMATopologyFilter and PciPassthroughFilter enabled, no-ops);
- numa fleet, numa flavor: 4 dedicated vCPUs (require: on thread siblings), 2 MiB pages,
  one SR-IOV VF on the instance's cell (pci_passthrough:alias, policy required);
- busy numa fleet, numa flavor: the same, where one host in three already holds one to three
  pinned instances (BUSY flavors, claimed through Ledger.claim as launches claim them);
- pinned numa fleet, numa flavor: the same, where every host's domains that Berth did not make
  are pinned to dedicated CPUs of their own (synthetic pinned=True, recorded by the tracker
  sync as unmanaged assignments): every host in a state of its own, the engine's worst case.

The NUMA hosts come in three hardware classes (synthetic.NUMA_CLASSES) and report free page counts
of their own. The engine fits an exact request once per distinct host state (hosts of one class
holding the same instances' assignments, assignment.per_state): the table says how many
distinct states each fleet has, which is what the decide time grows with.

Per run and fleet, one instance is placed the way berth.fleet.schedule places it: the host states
read from the ledger (``read``: Ledger.host_table with the fields the request's filters need),
the engine's decision (``decide``), the claim transaction (``claim``: locks, re-checks, fits the
CPUs, pages and device again under the lock and records the assignment). Median (min-max) of
``--runs`` runs, in seconds, wall time in this process (no Ansible: the launch as a play adds the
same fixed cost to all three, which benchmarks/fleet_scale.py measures against an empty play).
Each claim is given back before the next run, so every run sees the same fleet.
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

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "benchmarks")]

import synthetic  # noqa: E402
from pg_server import PostgresServer  # noqa: E402

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import of_spec  # noqa: E402
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

FILTERS = [*DEFAULT_FILTERS, "NUMATopologyFilter", "PciPassthroughFilter"]
PCI_ALIAS = [{"name": "vf", "vendor_id": "8086", "product_id": "154c", "device_type": "type-VF",
              "numa_policy": "required"}]
PLAIN = Flavor(name="plain", vcpus=4, memory_mb=2048, root_gb=1)
PINNED = Flavor(name="pinned", vcpus=4, memory_mb=1024, root_gb=1, extra_specs={
    "hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "require", "hw:mem_page_size": "2MB",
    "pci_passthrough:alias": "vf:1"})
BUSY = (Flavor(name="busy-2", vcpus=2, memory_mb=512, root_gb=1, extra_specs={
            "hw:cpu_policy": "dedicated", "hw:mem_page_size": "2MB"}),
        Flavor(name="busy-6", vcpus=6, memory_mb=4096, root_gb=1, extra_specs={"hw:cpu_policy": "dedicated"}),
        PINNED)
# (label, NUMA hosts, flavor launched, busy: one host in three holds pinned instances | "pinned": every
# host's foreign domains are pinned)
CASES = (("plain fleet, plain flavor", False, PLAIN, False), ("numa fleet, plain flavor", True, PLAIN, False),
         ("numa fleet, numa flavor", True, PINNED, False), ("busy numa fleet, numa flavor", True, PINNED, True),
         ("pinned numa fleet, numa flavor", True, PINNED, "pinned"))


def spec_of(flavor: Flavor) -> RequestSpec:
    return RequestSpec(flavor=flavor, count=1, enabled_filters=list(FILTERS), pci_alias=list(PCI_ALIAS),
                       service_down_time=86400)


def place_once(ledger: Ledger, flavor: Flavor, run: int) -> dict[str, float]:
    spec = spec_of(flavor)
    with without_gc():
        mark = time.perf_counter()
        table, generations = ledger.host_table(needed_host_fields(spec))
        read = time.perf_counter() - mark
        mark = time.perf_counter()
        decision = schedule(table, spec)
        decide = time.perf_counter() - mark
        if not decision.ok:
            raise SystemExit(f"{flavor.name}: no valid host: {decision.summary}")
        placement = decision.placements[0]
        mark = time.perf_counter()
        [row] = ledger.claim([{"name": f"bench-{flavor.name}-{run}", "host": placement.host,
                               "hypervisor_uuid": placement.uuid}], flavor, "bench",
                             request={"flavor": flavor.to_dict()}, exact=of_spec(spec))
        claim = time.perf_counter() - mark
    if flavor is PINNED and not row.get("assignment"):
        raise SystemExit("the numa flavor's claim recorded no assignment")
    ledger.delete_instance(row["uuid"])
    return {"read": read, "decide": decide, "claim": claim, "total": read + decide + claim}


def occupy(ledger: Ledger, hosts: list[tuple[str, str]], batch: int = 500) -> None:
    """Give each of ``hosts`` one to three pinned instances of the BUSY flavors, claimed as a
    launch claims them (the ledger fits each under the host's lock and records its assignment)."""
    rng = random.Random(3)
    wanted = {uuid: [rng.choice(BUSY) for _instance in range(rng.randint(1, 3))] for _name, uuid in hosts}
    for round_number in range(3):
        for flavor in BUSY:
            placements = [{"name": f"busy-{uuid}-{round_number}", "host": name, "hypervisor_uuid": uuid}
                          for name, uuid in hosts if len(wanted[uuid]) > round_number
                          and wanted[uuid][round_number] is flavor]
            for first in range(0, len(placements), batch):
                ledger.claim(placements[first:first + batch], flavor, "bench", lease_s=86400,
                             request={"flavor": flavor.to_dict()}, exact=of_spec(spec_of(flavor)))


def distinct_states(ledger: Ledger, flavor: Flavor) -> int:
    """How many distinct host states the engine fits an exact request on (assignment.per_state's
    key: facts by identity, assignments by their items)."""
    table, _generations = ledger.host_table(needed_host_fields(spec_of(flavor)))
    if "numa_topology" not in needed_host_fields(spec_of(flavor)):
        return 0
    return len({(id(topology), id(devices), tuple(map(id, held))) for topology, devices, held in zip(
        table.column("numa_topology"), table.column("pci_devices"), table.column("assignments"))})


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--backends", default="sqlite")
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "numa_scale.md"))
    args = parser.parse_args()
    lines = [f"# read + decide + claim at {args.hosts:,} hypervisors, with and without NUMA and PCI facts", "",
             f"`.venv/bin/python benchmarks/numa_scale.py --hosts {args.hosts} --runs {args.runs} "
             f"--backends {args.backends}` on {platform.node()} ({os.cpu_count()} CPUs, Python "
             f"{platform.python_version()}), load average at start {os.getloadavg()[0]:.2f}. Seconds, median "
             f"(min-max) of {args.runs} runs; see the script's docstring for what each column times.", ""]
    for backend in args.backends.split(","):
        with tempfile.TemporaryDirectory(prefix="berth-numa-bench-") as directory:
            server = None
            results = []
            for label, numa, flavor, busy in CASES:
                if backend == "sqlite":
                    url = f"sqlite:///{directory}/{len(results)}.db"
                else:
                    server = server or PostgresServer().start()
                    url = server.create_database(f"bench{len(results)}")
                results += measure_case(url, args.hosts, args.runs, label, numa, flavor, busy)
            if server is not None:
                server.stop()
        base = statistics.median(results[0][1]["total"])
        lines += [f"## {backend}", "",
                  "| fleet, flavor | distinct host states | read | decide | claim | read + decide + claim | x plain |",
                  "|---|---|---|---|---|---|---|"]
        for label, figures in results:
            lines.append(f"| {label} | {figures['states'][0]:,} | {spread(figures['read'])} | {spread(figures['decide'])} | "
                         f"{spread(figures['claim'])} | {spread(figures['total'])} | "
                         f"{statistics.median(figures['total']) / base:.2f} |")
        lines.append("")
        print("\n".join(lines), flush=True)
    text = "\n".join(lines)
    if args.output != "-":
        Path(args.output).write_text(text)


def measure_case(url: str, hosts: int, runs: int, label: str, numa: bool, flavor: Flavor,
                 busy: bool | str) -> list[tuple[str, dict[str, list[float]]]]:
    ledger = Ledger(url).open(create=True)
    try:
        written = synthetic.sync(ledger, 1, hosts, large=True, numa=numa, pinned=busy == "pinned")
        if busy is True:
            occupy(ledger, written[::3])
        place_once(ledger, flavor, 0)  # warm: imports, statement caches
        figures: dict[str, list[float]] = {"read": [], "decide": [], "claim": [], "total": [],
                                           "states": [distinct_states(ledger, flavor)]}
        for run in range(1, runs + 1):
            for key, value in place_once(ledger, flavor, run).items():
                figures[key].append(value)
        return [(label, figures)]
    finally:
        ledger.close()


if __name__ == "__main__":
    main()
