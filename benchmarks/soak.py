#!/usr/bin/env python3
"""A soak of Berth on the lab fleet: random operations and faults, with Berth's invariants
checked at every step. Not a timed benchmark and not a test: it looks for broken invariants.

    .venv/bin/python benchmarks/soak.py [--operations 200] [--seed N] [--full-every 10]
        [--lease 20] [--out benchmarks/results/soak.md]

Needs root (the lab's libvirt daemons) and scripts/setup. It starts its own lab fleet of 3 real
libvirtd hypervisors (lab/fleet.py, in a temporary directory) and its own PostgreSQL server
(tests/pg_server.py, Debian's packages), and stops both at the end.

The fleet is made small on purpose (per-host settings in the soak's inventory, CAPACITY below):
hv1 runs out of memory first, hv2 of vCPUs, hv3 of disk, so that launches really meet every
limit. Four server groups exist: two anti-affinity, two affinity.

Operations, in an order drawn from the seed, each a real `ansible-playbook playbooks/*.yml`
run as a user runs it (through tests/integration/conftest.py's Lab, which keeps the ledger
synced with gather.yml as a schedule would):
- launch: a new name (or, now and then, the name of a launch that ended in ERROR), 1-3
  instances of one of three small flavors, a third of them into a server group; one in five
  boots the lab's real guest kernel (QEMU TCG), the others a domain with an empty disk (a real
  QEMU process in SeaBIOS, cheap on the 2 CPUs); now and then 2-3 launches at once (a burst);
- delete: a whole launch or one instance;
- migrate: an ACTIVE instance, to the scheduler's choice or to a named host;
- drain: every ACTIVE instance off one host.
Faults:
- kill: the whole process tree of a launch (walked from /proc: with ansible-core 2.19 the
  task workers run in sessions of their own), SIGSTOP first so nothing forks or exits
  meanwhile, then SIGKILL; at a random moment, right after its claim appears in the ledger, or
  right after its first root volume appears in a pool (mid-build);
- restart: one lab libvirtd stopped (fleet.stop_daemon) either at a random moment during an
  operation or for the next 1-2 operations, then started again (fleet.start_daemon).

Checks (``violations``, a pure function of a snapshot of the ledger, read with psycopg and the
ledger's own USAGE_COLUMNS, and of libvirt, read with libvirt-python on every reachable host):
- cheap, after every operation: every ACTIVE (or STOPPED, PAUSED) instance holds exactly one
  claim, on the host whose libvirt has its domain (running, if ACTIVE); no ERROR instance holds
  a claim, every BUILDING one holds one; every domain on a hypervisor belongs to a ledger
  instance; the usage columns equal the sums of claims and unmanaged usage; no host is over a
  limit by the engine's own rules (rules.py), neither in the ledger nor in what libvirt runs;
  every hard server-group policy holds, in the ledger and in libvirt;
- full, every --full-every operations and after each fault (once every daemon runs again):
  wait until every lease has expired, run gather.yml, then the cheap checks and: nothing
  BUILDING, no claim but the placed instances' (no claim without a live build), no Berth
  volume or domain without a placed instance holding a claim on that host, no unmanaged usage,
  every host reachable.
A violation is reported once, with the operation and checkpoint it was first seen at and how
many checkpoints saw it.

Replay: the seed is printed first. Each step takes one number from the seeded generator and
draws all its choices from a generator seeded with it, so the same seed gives the same
sequence of choices; the targets drawn among existing instances, and where a kill lands, also
depend on what earlier operations did and on timing, so a replay follows the same path as far
as the outcomes agree.

While /tmp/berth-bench.lock exists (a timing benchmark runs) the soak waits between operations.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "lab"), str(REPO / "tests"), str(REPO / ".cache" / "collections")]

import libvirt  # noqa: E402
import psycopg  # noqa: E402
from psycopg.rows import dict_row  # noqa: E402
from sqlalchemy import create_engine, select  # noqa: E402

import fleet  # noqa: E402  (lab/fleet.py)
from pg_server import PostgresServer  # noqa: E402

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.rules import (  # noqa: E402
    disk_fit,
    ram_fit,
    vcpu_fit,
)
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import is_instance_volume  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.host_states import USAGE_COLUMNS  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import (  # noqa: E402
    ACTIVE,
    BUILDING,
    ERROR,
    PLACED_STATES,
    hypervisors,
)


def _lab_conftest() -> Any:
    """tests/integration/conftest.py (the Lab helper the integration tests drive the fleet
    with), imported under its own name: tests/conftest.py is a module named conftest too."""
    spec = importlib.util.spec_from_file_location("lab_conftest", REPO / "tests" / "integration" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lab_conftest = _lab_conftest()

FLAVORS = {
    "soak.tiny": {"vcpus": 1, "memory_mb": 64, "root_gb": 1},
    "soak.small": {"vcpus": 1, "memory_mb": 128, "root_gb": 1},
    "soak.medium": {"vcpus": 2, "memory_mb": 192, "root_gb": 2},
}
BOOTABLE = ("soak.small", "soak.medium")  # the lab's guest kernel wants 128 MiB
# Per host: vCPUs (through cpu_allocation_ratio), memory beyond the reserved amount, and disk
# (through disk_allocation_ratio): hv1 fills up by memory, hv2 by vCPUs, hv3 by disk.
CAPACITY = {
    "hv1": {"vcpus": 8, "ram_mb": 1024, "disk_gb": 40},
    "hv2": {"vcpus": 10, "ram_mb": 4096, "disk_gb": 40},
    "hv3": {"vcpus": 12, "ram_mb": 4096, "disk_gb": 10},
}
GROUPS = {"spread-a": "anti-affinity", "spread-b": "anti-affinity", "pack-a": "affinity", "pack-b": "affinity"}
KINDS = {"launch": 0.4, "delete": 0.32, "migrate": 0.19, "drain": 0.09}
KILL_MODES = ("random", "after-claim", "mid-build")
POOL = "default"
POOL_DIR = "/var/lib/libvirt/images"
LOCK = Path("/tmp/berth-bench.lock")
# Failures that are the fleet saying no, by design: full, a group's policy, nothing to move to.
REFUSALS = re.compile(r"no valid host|hosts are available|cannot claim|cannot migrate|would have \d+ members|"
                      r"would span|only ACTIVE instances migrate|already runs on", re.I)


# ---- the invariants (pure: a snapshot in, violations out) ---------------------------------------

def violations(snap: dict[str, Any], settled: bool) -> list[tuple[tuple, str]]:
    """Every invariant ``snap`` breaks, as (key, what was found); the key names the subject so
    that a violation seen at several checkpoints counts once.

    ``snap``: now (naive UTC), hypervisors (the ledger's rows with USAGE_COLUMNS, memory_mb_used,
    disk_mb_used), instances, claims, unmanaged_usage, server_groups, server_group_members (rows),
    libvirt ({host: None when unreachable, else {"domains": {uuid: {name, running, vcpus,
    memory_mb}}, "volumes": [name]}}). ``settled``: taken after a gather past every lease, with
    no operation running: then nothing may be BUILDING and nothing may be left over.
    """
    found: list[tuple[tuple, str]] = []
    hvs = {row["uuid"]: row for row in snap["hypervisors"]}
    host_name = {uuid: row["name"] for uuid, row in hvs.items()}
    host_uuid = {name: uuid for uuid, name in host_name.items()}
    instances = {row["uuid"]: row for row in snap["instances"]}
    claims_of: dict[str, list[dict]] = collections.defaultdict(list)
    for claim in snap["claims"]:
        claims_of[claim["instance_uuid"]].append(claim)
    libvirt_view = snap["libvirt"]

    def where(claims: list[dict]) -> str:
        return ", ".join(f"{host_name.get(c['hypervisor_uuid'], c['hypervisor_uuid'])}"
                         f"{' (lease ' + str(c['lease_expires_at']) + ')' if c['lease_expires_at'] else ''}"
                         for c in claims) or "none"

    # Claims against ledger rows.
    for claim in snap["claims"]:
        if claim["instance_uuid"] not in instances:
            found.append((("claim without instance", claim["id"]), f"claim {claim['id']} has no instance"))
    for uuid, instance in instances.items():
        held, name, state = claims_of[uuid], instance["name"], instance["state"]
        if state in PLACED_STATES and [c["hypervisor_uuid"] for c in held] != [instance["hypervisor_uuid"]]:
            found.append((("claims of a placed instance", name),
                          f"{state} {name} on {instance['host']} holds claims on: {where(held)}"))
        elif state == ERROR and held:
            found.append((("claim of an ERROR instance", name), f"ERROR {name} holds claims on: {where(held)}"))
        elif state == BUILDING and not held:
            found.append((("BUILDING without claim", name), f"BUILDING {name} holds no claim"))
        elif state == BUILDING and settled:
            found.append((("BUILDING after a gather past its lease", name),
                          f"{name} is still BUILDING after a gather past the leases, holding claims on: "
                          f"{where(held)} (now {snap['now']}); libvirt: {_domain_where(libvirt_view, uuid)}"))

    # Usage columns against the rows behind them, and every host within its limits.
    sums: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0, 0])
    for row in [*snap["claims"], *snap["unmanaged_usage"]]:
        total = sums[row["hypervisor_uuid"]]
        for index, amount in enumerate((row["vcpus"], row["memory_mb"], row["disk_mb"], 1)):
            total[index] += amount
    for uuid, row in hvs.items():
        columns = [row["vcpus_used"], row["memory_mb_used"], row["disk_mb_used"], row["num_instances"]]
        if columns != sums[uuid]:
            found.append((("usage columns", row["name"]),
                          f"{row['name']}: usage columns (vCPUs, MB, disk MB, instances) {columns}, "
                          f"its claims and unmanaged usage sum to {sums[uuid]}"))
        for what, fit in _fits(row, row["vcpus_used"], row["free_ram_mb"], row["free_disk_mb"]).items():
            found.append((("over its limit in the ledger", row["name"], what),
                          f"{row['name']}: the ledger has {fit.used:g} {what} used, limit {fit.limit:g}"))
        view = libvirt_view.get(row["name"])
        if view is not None:
            running = [dom for dom in view["domains"].values() if dom["running"]]
            vcpus = sum(dom["vcpus"] for dom in running)
            free_ram_mb = row["total_usable_ram_mb"] - row["reserved_host_memory_mb"] - sum(
                dom["memory_mb"] for dom in running)
            for what, fit in _fits(row, vcpus, free_ram_mb, None).items():
                found.append((("over its limit in libvirt", row["name"], what),
                              f"{row['name']}: libvirt runs {fit.used:g} {what}, limit {fit.limit:g}"))

    # Server groups: hard policies, by the ledger's claims and by where libvirt runs the members.
    members: dict[str, list[str]] = collections.defaultdict(list)
    for member in snap["server_group_members"]:
        members[member["group_uuid"]].append(member["instance_uuid"])
    for group in snap["server_groups"]:
        claimed = [host_name.get(c["hypervisor_uuid"]) for m in members[group["uuid"]] for c in claims_of[m]]
        running = [host for host, view in libvirt_view.items() if view is not None
                   for m in members[group["uuid"]] if view["domains"].get(m, {}).get("running")]
        for seen, hosts in (("claims", claimed), ("libvirt", running)):
            broken = _policy_broken(group["policy"], group.get("max_server_per_host"), hosts)
            if broken:
                found.append((("server group", group["name"], seen),
                              f"{group['policy']} group {group['name']}: its members' {seen} are on {broken}"))

    # Domains and volumes against ledger rows, on every host that answers.
    for host, view in libvirt_view.items():
        if view is None:
            if settled:
                found.append((("host unreachable at a full check", host), f"{host}'s libvirtd did not answer"))
            continue
        hv_uuid = host_uuid.get(host)
        for uuid, dom in view["domains"].items():
            instance = instances.get(uuid)
            if instance is None:
                found.append((("domain without instance", host, uuid),
                              f"domain {dom['name']} ({uuid}) on {host} has no instance in the ledger"))
            elif settled and hv_uuid not in [c["hypervisor_uuid"] for c in claims_of[uuid]]:
                # Until then it may be what a failed build or a move left, recorded for the sync.
                found.append((("domain without claim", host, uuid),
                              f"domain {dom['name']} on {host}: its instance is {instance['state']} on "
                              f"{instance['host']} with claims on: {where(claims_of[uuid])}"))
        if settled:
            for volume in view["volumes"]:
                if not volume.startswith("berth-"):
                    continue
                owner = instances.get(volume[len("berth-"):len("berth-") + 36]) if is_instance_volume(volume) else None
                if owner is not None and owner["state"] == BUILDING and owner["host"] == host:
                    continue  # its dead build is reported above, once
                if owner is None or owner["state"] not in PLACED_STATES or owner["host"] != host:
                    found.append((("volume without instance", host, volume),
                                  f"volume {volume} on {host}: " + (
                                      "no instance in the ledger" if owner is None else
                                      f"its instance {owner['name']} is {owner['state']} on {owner['host']}"
                                      + (f" ({owner['failure_reason']})" if owner["failure_reason"] else ""))))
    for uuid, instance in instances.items():
        view = libvirt_view.get(instance["host"]) if instance["state"] in PLACED_STATES else None
        if view is not None:
            dom = view["domains"].get(uuid)
            if dom is None or (instance["state"] == ACTIVE and not dom["running"]):
                found.append((("placed instance without its domain", instance["name"]),
                              f"{instance['state']} {instance['name']}: its domain is "
                              f"{'not running' if dom else 'not'} on {instance['host']} "
                              f"({_domain_where(libvirt_view, uuid)})"))
    if settled:
        for row in snap["unmanaged_usage"]:
            found.append((("unmanaged usage", row["domain_uuid"]),
                          f"the ledger counts domain {row['domain_name']} on {host_name.get(row['hypervisor_uuid'])} "
                          f"as unmanaged (an orphan)"))
    return found


def _fits(row: dict, vcpus_used: float, free_ram_mb: float, free_disk_mb: float | None) -> dict[str, Any]:
    """The resources of hypervisor ``row`` that are over their limit with these amounts used,
    by the engine's own formulas (a request for nothing does not fit an overfull host)."""
    fits = {
        "vCPUs": vcpu_fit(row["vcpus_total"], vcpus_used, row["cpu_allocation_ratio"], 0),
        "MB of memory": ram_fit(row["total_usable_ram_mb"], free_ram_mb, row["ram_allocation_ratio"], 0),
    }
    if free_disk_mb is not None:
        fits["MB of disk"] = disk_fit(row["total_usable_disk_gb"], free_disk_mb, row["disk_allocation_ratio"], 0)
    return {what: fit for what, fit in fits.items() if fit.applies and fit.short}


def _policy_broken(policy: str, max_per_host: int | None, hosts: list[str]) -> str | None:
    """The hosts, listed, when ``hosts`` (one entry per member) break a hard policy; else None."""
    counts = collections.Counter(hosts)
    if policy == "anti-affinity" and any(count > (max_per_host or 1) for count in counts.values()):
        return ", ".join(sorted(hosts))
    if policy == "affinity" and len(counts) > 1:
        return ", ".join(sorted(hosts))
    return None


def _domain_where(libvirt_view: dict[str, Any], uuid: str) -> str:
    """Where libvirt has the instance ``uuid``: its domain and volumes, host by host."""
    seen = []
    for host, view in sorted(libvirt_view.items()):
        if view is None:
            continue
        dom = view["domains"].get(uuid)
        volumes = [volume for volume in view["volumes"] if volume.startswith(f"berth-{uuid}-")]
        if dom or volumes:
            seen.append(f"{host}: " + ", ".join(
                ([f"domain {'running' if dom['running'] else 'defined'}"] if dom else [])
                + ([f"volumes {', '.join(v[len('berth-') + 37:] for v in volumes)}"] if volumes else [])))
    return "; ".join(seen) or "nothing on any reachable host"


def kill_stage(instance: dict | None, libvirt_view: dict[str, Any]) -> str:
    """How far one instance of a killed launch got: the furthest of no claim, claimed, volume,
    defined, started (its domain runs but the ledger has it BUILDING) and active."""
    if instance is None:
        return "no claim"
    if instance["state"] == ACTIVE:
        return "active"
    uuid = instance["uuid"]
    domains = [view["domains"][uuid] for view in libvirt_view.values() if view is not None and uuid in view["domains"]]
    if any(dom["running"] for dom in domains):
        return "started"
    if domains:
        return "defined"
    if any(volume.startswith(f"berth-{uuid}-") for view in libvirt_view.values() if view is not None
           for volume in view["volumes"]):
        return "volume"
    return "claimed" if instance["state"] == BUILDING else f"claimed, then {instance['state']}"


def failures(output: dict) -> list[str]:
    """The messages of a run's failed tasks; of a failed loop (drain.yml, delete.yml), those of
    its failed items (the task's own says only "One or more items failed")."""
    messages = []
    for result in (result for play in output["plays"] for task in play["tasks"] for result in task["hosts"].values()):
        if result.get("failed"):
            items = [item.get("msg", "") for item in result.get("results", []) if isinstance(item, dict)
                     and item.get("failed")]
            messages += items or [result.get("msg", "")]
    return messages


def pick(items: list, u: float) -> Any:
    return items[min(int(u * len(items)), len(items) - 1)]


# ---- the soak ----------------------------------------------------------------------------------

class SoakLab(lab_conftest.Lab):
    """The integration tests' Lab; a gather that fails is recorded, not raised."""

    def __init__(self, directory: str, hosts: list[dict]) -> None:
        super().__init__(directory, hosts)
        self.gathers = 0
        self.failed_gathers: list[str] = []
        self.drift_lines: list[str] = []

    def gather(self, *extra: str, env_extra: dict | None = None) -> dict | None:
        self.gathers += 1
        try:
            output = super().gather(*extra, env_extra=env_extra)
        except AssertionError as exc:
            self.failed_gathers.append(str(exc)[:1500])
            return None
        self.drift_lines += lab_conftest.drift(output)
        return output


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.log: list[dict] = []
        self.seen: dict[tuple, dict] = {}  # violation key -> {first, step, checkpoint, count, message}
        self.checkpoints = collections.Counter()
        self.settled_counts: list[dict] = []
        self.faults: list[dict] = []
        self.launches = 0
        self.launch_seconds: list[float] = [2.5]
        self.down: dict[str, Any] | None = None  # {host, ops_left}
        self.full_pending = False
        self.paused_s = 0.0
        self.step = 0
        self.running: list[subprocess.Popen] = []
        self._poll: psycopg.Connection | None = None

    # -- set-up and tear-down --

    def setup(self) -> None:
        self.pg = PostgresServer().start()
        self.url = self.pg.create_database("soak")
        self.dsn = self.pg.dsn("soak")
        self.engine = create_engine(self.url)
        self.dir = tempfile.mkdtemp(prefix="berth-soak-", dir="/tmp")
        self.lab = SoakLab(self.dir, fleet.up(self.dir, hosts=len(CAPACITY)))
        self.lab.inventory = self.lab.inventory_copy(Path(self.dir) / "soak", self.url, self._host_settings())
        for name, policy in GROUPS.items():
            self.lab.server_group(name, "present", policy)
        self.lab.gather()

    def _host_settings(self) -> dict[str, dict]:
        """The per-host settings that give CAPACITY: the lab's hypervisors all report this
        machine's CPUs, memory and disk (TESTBED.md)."""
        cpus = os.cpu_count() or 1
        memory_mb = int(Path("/proc/meminfo").read_text().split()[1]) // 1024
        disk_gb = os.statvfs(self.dir).f_blocks * os.statvfs(self.dir).f_frsize // 2 ** 30
        return {host: {"cpu_allocation_ratio": room["vcpus"] / cpus,
                       "reserved_host_memory_mb": memory_mb - room["ram_mb"],
                       "disk_allocation_ratio": room["disk_gb"] / disk_gb}
                for host, room in CAPACITY.items()}

    def teardown(self) -> None:
        for proc in self.running:
            if proc.poll() is None:
                lab_conftest.kill_tree(proc)
        if self._poll is not None:
            self._poll.close()
        if getattr(self, "dir", None) is not None and not self.args.keep:
            fleet.down(self.dir)
            shutil.rmtree(self.dir, ignore_errors=True)  # down keeps the guest it built
        if getattr(self, "engine", None) is not None:
            self.engine.dispose()
        if getattr(self, "pg", None) is not None and not self.args.keep:
            self.pg.stop()

    # -- the loop --

    def run(self) -> None:
        print(f"soak: seed {self.args.seed}, {self.args.operations} operations, lab {self.dir}", flush=True)
        self.started = time.monotonic()
        self.full_check("start")
        for self.step in range(1, self.args.operations + 1):
            self._wait_for_bench_lock()
            step_rng = random.Random(self.rng.random())
            entry = self.operation(step_rng)
            self.log.append(entry)
            self._end_of_step(entry)
        if self.down:
            self._daemon_back()
        self.full_check("end")
        self.wall_s = time.monotonic() - self.started

    def _end_of_step(self, entry: dict) -> None:
        new = self.check(settled=False, label=f"after step {self.step}")
        failed = [message for outcome, messages in zip(entry["outcomes"], entry["messages"])
                  if outcome in ("failed", "host down") for message in messages]
        print(f"#{self.step} {entry['kind']} {entry['what']}: {entry['outcome']} "
              f"({entry['seconds']:.1f} s){' ' + '; '.join(entry['faults']) if entry['faults'] else ''}"
              f"{' FAILED: ' + _short(' | '.join(failed)) if failed else ''}"
              f"{' NEW VIOLATIONS: ' + ' | '.join(new) if new else ''}", flush=True)
        if self.down is not None:
            self.down["ops_left"] -= 1
            if self.down["ops_left"] <= 0:
                self._daemon_back()
        if entry["faults"] or self.step % self.args.full_every == 0:
            self.full_pending = True
        if self.full_pending and self.down is None:
            self.full_check(f"after step {self.step}")

    def operation(self, rng: random.Random) -> dict:
        state = self.ledger_instances()
        kind = pick([k for k, weight in KINDS.items() for _ in range(int(weight * 100))], rng.random())
        restart = None
        if self.down is None and rng.random() < self.args.restart_rate:
            restart = {"host": pick(sorted(CAPACITY), rng.random()), "during": rng.random() < 0.5,
                       "delay_u": rng.random(), "ops": 1 + int(rng.random() * 2)}
        active = [row for row in state if row["state"] == ACTIVE]
        if kind == "delete" and state:
            runs, what = self._delete(rng, state)
        elif kind == "migrate" and active:
            runs, what = self._migrate(rng, active)
        elif kind == "drain" and active:
            host = pick(sorted({row["host"] for row in active}), rng.random())
            runs, what = [("drain.yml", {"drain_host": host})], f"drain_host={host}"
        else:
            kind = "launch"
            runs, what = self._launches(rng, state)
        kill = None
        if kind == "launch" and rng.random() < self.args.kill_rate:
            kill = {"index": int(rng.random() * len(runs)), "mode": pick(list(KILL_MODES), rng.random()),
                    "delay_u": rng.random()}
        faults_before = len(self.faults)
        if restart is not None and not restart["during"]:
            fleet.stop_daemon(self.dir, restart["host"])
            self.down = {"host": restart["host"], "ops_left": restart["ops"]}
            self._fault("restart", f"{restart['host']}'s libvirtd stopped before this operation, "
                                   f"for {restart['ops']} operation(s)", host=restart["host"])
        started = time.monotonic()
        outputs = self._run(runs, kill, restart if restart and restart["during"] else None)
        seconds = time.monotonic() - started
        if kind == "launch" and not kill:
            self.launch_seconds.append(seconds)
        down_hosts = {fault["host"] for fault in self.faults[faults_before:] if "host" in fault}
        if self.down is not None:
            down_hosts.add(self.down["host"])
        outcome = [self._outcome(output, down_hosts) for output in outputs]
        return {"step": self.step, "kind": kind, "what": what, "runs": [extra for _playbook, extra in runs],
                "outcome": ", ".join(outcome), "outcomes": outcome, "seconds": seconds,
                "messages": [output.get("messages", []) for output in outputs],
                "faults": [fault["what"] for fault in self.faults[faults_before:]]}

    # -- choosing operations --

    def _launches(self, rng: random.Random, state: list[dict]) -> tuple[list, str]:
        burst = 1 if rng.random() >= 0.12 else 2 + int(rng.random() * 2)
        error_launches = sorted({_launch_name(row["name"]) for row in state if row["state"] == ERROR})
        runs = []
        for _index in range(burst):
            flavor = pick(sorted(FLAVORS), rng.random())
            if error_launches and rng.random() < 0.15:
                name = error_launches.pop(int(rng.random() * len(error_launches)))
                count = max(int(row["name"].rsplit("-", 1)[1]) for row in state if _launch_name(row["name"]) == name)
            else:
                self.launches += 1
                name, count = f"l{self.launches}", 1 + int(rng.random() * 3)
            extra: dict[str, Any] = {"name": name, "count": count, "flavor": {"name": flavor, **FLAVORS[flavor]},
                                     "berth_lease_seconds": self.args.lease}
            if rng.random() < 0.33:
                extra["server_group"] = pick(sorted(GROUPS), rng.random())
            if not (flavor in BOOTABLE and rng.random() < 0.2):
                # No kernel: the domain runs SeaBIOS on its empty disk, a real QEMU that costs little.
                extra.update(berth_boot_kernel="", berth_boot_initrd="")
            runs.append(("launch.yml", extra))
        what = " + ".join(
            f"{e['name']} x{e['count']} {e['flavor']['name']}"
            f"{' in ' + e['server_group'] if 'server_group' in e else ''}"
            f"{'' if 'berth_boot_kernel' in e else ' (booting the guest)'}" for _pb, e in runs)
        return runs, what

    def _delete(self, rng: random.Random, state: list[dict]) -> tuple[list, str]:
        if rng.random() < 0.7:
            name = pick(sorted({_launch_name(row["name"]) for row in state}), rng.random())
        else:
            name = pick(sorted(row["name"] for row in state), rng.random())
        return [("delete.yml", {"name": name})], f"name={name}"

    def _migrate(self, rng: random.Random, active: list[dict]) -> tuple[list, str]:
        instance = pick(sorted(active, key=lambda row: row["name"]), rng.random())
        extra = {"instance": instance["name"]}
        if rng.random() < 0.3:
            extra["to_host"] = pick(sorted(set(CAPACITY) - {instance["host"]}), rng.random())
        return [("migrate.yml", extra)], f"{instance['name']} from {instance['host']} to {extra.get('to_host', 'any')}"

    # -- running operations and faults --

    def _run(self, runs: list[tuple[str, dict]], kill: dict | None, restart: dict | None) -> list[dict]:
        if any(playbook in lab_conftest.LEDGER_PLAYBOOKS for playbook, _extra in runs):
            self.lab.keep_synced((), None)
        volumes_before = self._root_volumes()
        uuids_before = {row["uuid"] for row in self.ledger_instances()} if kill else set()
        started = time.monotonic()
        procs = [self.lab.start_playbook(playbook, "-e", json.dumps(extra)) for playbook, extra in runs]
        self.running = procs
        stopper = None
        if restart is not None:
            stopper = threading.Thread(target=self._stop_during, args=(restart, procs, started))
            stopper.start()
        killed = None
        if kill is not None:
            killed = self._kill(procs[kill["index"]], runs[kill["index"]][1], kill, volumes_before)
        outputs = []
        for index, proc in enumerate(procs):
            if killed is not None and index == kill["index"]:
                outputs.append({"rc": None, "killed": True})
                continue
            try:
                output = self.lab.finish(proc)
            except AssertionError as exc:  # no JSON: the run crashed
                output = {"rc": proc.returncode, "messages": [str(exc)[:1500]]}
            else:
                output["messages"] = failures(output)
            outputs.append(output)
        if stopper is not None:
            stopper.join()
            self._daemon_back()
        if kill is not None:
            self._record_kill(runs[kill["index"]][1], kill, killed, uuids_before)
        self.running = []
        return outputs

    def _kill(self, proc: subprocess.Popen, extra: dict, kill: dict, volumes_before: set[str]) -> dict | None:
        """Kill the launch as ``kill`` says; None if it ended first."""
        started = time.monotonic()
        expected_s = statistics.median_high(self.launch_seconds)

        def ready() -> bool:
            if kill["mode"] == "random":
                return time.monotonic() - started >= kill["delay_u"] * expected_s * 1.2
            if kill["mode"] == "after-claim":
                return self._building(extra["name"])
            return bool(self._root_volumes() - volumes_before)

        while proc.poll() is None and not ready():
            time.sleep(0.002)
        if kill["mode"] == "after-claim":
            time.sleep(kill["delay_u"] * 0.1)
        elif kill["mode"] == "mid-build":
            # Half of them at once: between a root volume and its domain there are milliseconds.
            time.sleep(max(0.0, kill["delay_u"] - 0.5) * 0.2)
        if proc.poll() is not None:
            return None
        return {"processes": len(lab_conftest.kill_tree(proc)), "after_s": time.monotonic() - started}

    def _record_kill(self, extra: dict, kill: dict, killed: dict | None, uuids_before: set[str]) -> None:
        if killed is None:
            self._fault("kill missed", f"kill ({kill['mode']}) of launch {extra['name']}: it ended first")
            return
        snap = self.snapshot()
        # A relaunched name's earlier ERROR row is not this launch's instance.
        rows = {row["name"]: row for row in snap["instances"] if row["uuid"] not in uuids_before}
        stages = [kill_stage(rows.get(f"{extra['name']}-{index}"), snap["libvirt"])
                  for index in range(1, extra["count"] + 1)]
        self._fault("kill", f"killed launch {extra['name']} ({kill['mode']}, {killed['processes']} processes, "
                            f"after {killed['after_s']:.2f} s): instances at {', '.join(stages)}", stages=stages)

    def _stop_during(self, restart: dict, procs: list[subprocess.Popen], started: float) -> None:
        expected_s = statistics.median_high(self.launch_seconds)
        while time.monotonic() - started < restart["delay_u"] * expected_s * 1.2:
            if all(proc.poll() is not None for proc in procs):
                break
            time.sleep(0.01)
        running = any(proc.poll() is None for proc in procs)
        fleet.stop_daemon(self.dir, restart["host"])
        self.down = {"host": restart["host"], "ops_left": 0}
        self._fault("restart", f"{restart['host']}'s libvirtd stopped {time.monotonic() - started:.2f} s into the "
                               f"operation ({'while it ran' if running else 'after it ended'}), started after it",
                    host=restart["host"])

    def _daemon_back(self) -> None:
        self.lab.start_daemon(self.down["host"])
        self.down = None
        self.full_pending = True

    def _fault(self, kind: str, what: str, **more: Any) -> None:
        self.faults.append({"step": self.step, "kind": kind, "what": what, **more})

    @staticmethod
    def _outcome(output: dict, down_hosts: set[str]) -> str:
        if output.get("killed"):
            return "killed"
        if output["rc"] == 0:
            return "ok"
        messages = output.get("messages") or [output.get("stderr", "")[-500:]]
        if all(REFUSALS.search(message) for message in messages):
            return "refused"
        if down_hosts and all(any(host in message for host in down_hosts) for message in messages):
            return "host down"
        return "failed"

    # -- reading the fleet --

    def ledger_instances(self) -> list[dict]:
        with psycopg.connect(self.dsn, row_factory=dict_row) as conn:
            return conn.execute("SELECT name, uuid, host, state FROM instances ORDER BY name").fetchall()

    def _building(self, launch: str) -> bool:
        if self._poll is None:
            self._poll = psycopg.connect(self.dsn, autocommit=True)
        return self._poll.execute("SELECT 1 FROM instances WHERE state = 'BUILDING' AND (name = %s OR name LIKE %s)",
                                  (launch, f"{launch}-%")).fetchone() is not None

    def _root_volumes(self) -> set[str]:
        """The root volumes in the hosts' pools, read from their directories (cheap enough to
        poll while a launch runs)."""
        found = set()
        for host in CAPACITY:
            try:
                found.update(f"{host}/{name}" for name in os.listdir(fleet.host_path(self.dir, host, POOL_DIR))
                             if name.startswith("berth-") and name.endswith("-root.qcow2"))
            except OSError:
                pass
        return found

    def snapshot(self) -> dict[str, Any]:
        tables = {table: lab_conftest.rows(self.url, table)
                  for table in ("instances", "claims", "unmanaged_usage", "server_groups", "server_group_members")}
        with psycopg.connect(self.dsn) as conn:
            now = conn.execute("SELECT now() AT TIME ZONE 'utc'").fetchone()[0]
        query = select(hypervisors.c.uuid, hypervisors.c.name, hypervisors.c.memory_mb_used,
                       hypervisors.c.disk_mb_used, *(column.label(name) for name, column in USAGE_COLUMNS.items()))
        with self.engine.connect() as db:
            rows = [dict(row) for row in db.execute(query).mappings()]
        return {"now": now, "hypervisors": rows, **tables,
                "libvirt": {host: self._libvirt(host) for host in CAPACITY}}

    def _libvirt(self, host: str) -> dict[str, Any] | None:
        try:
            conn = libvirt.open(fleet.uri(self.dir, host))
        except libvirt.libvirtError:
            return None
        try:
            domains = {}
            for dom in conn.listAllDomains():
                state, max_kib, _kib, vcpus, _cpu_ns = dom.info()
                domains[dom.UUIDString()] = {"name": dom.name(), "running": state == libvirt.VIR_DOMAIN_RUNNING,
                                             "vcpus": vcpus, "memory_mb": max_kib // 1024}
            pool = conn.storagePoolLookupByName(POOL)
            pool.refresh(0)
            return {"domains": domains, "volumes": sorted(pool.listVolumes())}
        except libvirt.libvirtError:
            return None
        finally:
            conn.close()

    # -- checkpoints --

    def check(self, settled: bool, label: str) -> list[str]:
        """Record the violations of a snapshot; returns the new ones' messages."""
        snap = self.snapshot()
        self.checkpoints["full" if settled else "cheap"] += 1
        new = []
        for key, message in violations(snap, settled):
            if key not in self.seen:
                self.seen[key] = {"step": self.step, "checkpoint": label, "count": 0, "message": message,
                                  "settled": settled}
                new.append(message)
            self.seen[key]["count"] += 1
            self.seen[key]["last"] = message
        if settled:
            berth_domains = sum(len(view["domains"]) for view in snap["libvirt"].values() if view)
            states = collections.Counter(row["state"] for row in snap["instances"])
            self.settled_counts.append({"label": label, "active": states[ACTIVE], "building": states[BUILDING],
                                        "error": states[ERROR], "claims": len(snap["claims"]),
                                        "domains": berth_domains})
        return new

    def full_check(self, label: str) -> None:
        """Wait until every lease (up to --lease from now) has expired, gather, check settled."""
        self._wait_for_bench_lock()
        with psycopg.connect(self.dsn) as conn:
            latest, now = conn.execute("SELECT max(lease_expires_at), now() AT TIME ZONE 'utc' FROM claims").fetchone()
        if latest is not None and latest > now:
            time.sleep(min((latest - now).total_seconds(), self.args.lease) + 1)
        self.lab.gather()
        new = self.check(settled=True, label=label)
        self.full_pending = False
        counts = self.settled_counts[-1]
        print(f"  full check {label}: {counts['active']} ACTIVE, {counts['claims']} claims, {counts['domains']} "
              f"domains, {counts['building']} BUILDING, {counts['error']} ERROR"
              f"{'; NEW VIOLATIONS: ' + ' | '.join(new) if new else ''}", flush=True)

    def _wait_for_bench_lock(self) -> None:
        while LOCK.exists():
            print(f"  {LOCK} exists (a benchmark is being timed): waiting", flush=True)
            time.sleep(30)
            self.paused_s += 30

    # -- the report --

    def report(self, load_before: str, interrupted: str | None) -> str:
        kinds = collections.defaultdict(collections.Counter)
        for entry in self.log:
            for outcome in entry["outcomes"]:
                kinds[entry["kind"]][outcome] += 1
        operations = sum(sum(counter.values()) for counter in kinds.values())
        lines = ["# Soak: random operations and faults on the lab fleet, invariants at every step", ""]
        if interrupted:
            lines += [f"**Interrupted at step {self.step}: {interrupted}**", ""]
        lines += [
            f"Seed {self.args.seed}: {len(self.log)} steps, {operations} playbook runs (a burst of launches is "
            f"one step), on 3 lab hypervisors (real libvirtd, real QEMU domains) with the ledger on "
            f"PostgreSQL {self._pg_version()}, lease {self.args.lease} s, a full check every "
            f"{self.args.full_every} steps and after each fault. What the soak does: the docstring of "
            f"benchmarks/soak.py.", "",
            f"Command: `.venv/bin/python benchmarks/soak.py --operations {self.args.operations} --seed {self.args.seed}"
            f" --full-every {self.args.full_every} --lease {self.args.lease}`", "",
            f"Wall time: {getattr(self, 'wall_s', time.monotonic() - self.started) / 60:.1f} min"
            f"{f' (of which {self.paused_s / 60:.1f} min waiting for a timed benchmark)' if self.paused_s else ''}. "
            f"Machine: {_machine()}. Load average before: {load_before}; after: {_load()}.", "",
            "## Operations", "",
            "| kind | runs | ok | refused (no room, group policy) | failed, its host's daemon stopped | "
            "failed otherwise | killed |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for kind in KINDS:
            counter = kinds.get(kind, collections.Counter())
            lines.append(f"| {kind} | {sum(counter.values())} | {counter['ok']} | {counter['refused']} | "
                         f"{counter['host down']} | {counter['failed']} | {counter['killed']} |")
        lines += ["", f"Tracker syncs (gather.yml): {self.lab.gathers}, of which failed: {len(self.lab.failed_gathers)}. "
                      f"Drift report lines: {len(self.lab.drift_lines)}, of which about released claims: "
                      f"{sum('released' in line for line in self.lab.drift_lines)}.", ""]
        failed = [(entry["step"], entry["kind"], message) for entry in self.log
                  for outcome, messages in zip(entry["outcomes"], entry["messages"]) if outcome == "failed"
                  for message in messages or ["(no message)"]]
        if failed:
            lines += ["Runs that failed otherwise (the step, then the message):", ""]
            lines += [f"- #{step} {kind}: {_short(message)}" for step, kind, message in failed]
            lines.append("")
        stages = collections.Counter(stage for fault in self.faults for stage in fault.get("stages", []))
        fault_kinds = collections.Counter(fault["kind"] for fault in self.faults)
        lines += ["## Faults", "",
                  f"- launches killed (whole process tree): {fault_kinds['kill']}; kills that came too late "
                  f"(the launch had ended): {fault_kinds['kill missed']}",
                  "- where the killed launches' instances were: "
                  + (", ".join(f"{stage} {count}" for stage, count in stages.most_common()) or "-"),
                  f"- libvirt daemon restarts: {fault_kinds['restart']}", "", "<details><summary>Every fault</summary>", ""]
        lines += [f"- #{fault['step']} {fault['what']}" for fault in self.faults]
        lines += ["", "</details>", "", "## Checkpoints", "",
                  f"{self.checkpoints['cheap']} cheap checks (after every step) and {self.checkpoints['full']} full "
                  f"checks (after a gather past the leases).", ""]
        if self.settled_counts:
            last = self.settled_counts[-1]
            lines += [f"At the last full check ({last['label']}): {last['active']} ACTIVE instances, "
                      f"{last['claims']} claims, {last['domains']} domains, {last['building']} BUILDING, "
                      f"{last['error']} ERROR.", ""]
        lines += [f"## Invariant violations: {len(self.seen)}", ""]
        if self.seen:
            lines += ["Each once, where it was first seen, and at how many checkpoints it was seen.", "",
                      "| invariant | first seen | checkpoints | what was found |", "|---|---|---:|---|"]
            for key, seen in sorted(self.seen.items(), key=lambda item: (item[1]["step"], item[0][0])):
                lines.append(f"| {key[0]} | step {seen['step']} ({seen['checkpoint']}) | {seen['count']} | "
                             f"{_short(seen['message'], 400)} |")
            lines.append("")
        return "\n".join(lines) + "\n"

    def _pg_version(self) -> str:
        with psycopg.connect(self.dsn) as conn:
            return conn.execute("SHOW server_version").fetchone()[0].split()[0]


def _launch_name(instance: str) -> str:
    return instance.rsplit("-", 1)[0]


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[:limit] + " ..."


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _machine() -> str:
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "unknown CPU")
    memory_gib = int(Path("/proc/meminfo").read_text().split()[1]) / 2 ** 20
    return (f"{model}, {os.cpu_count()} CPUs, {memory_gib:.0f} GiB, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()} (shared with other engineers' work)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operations", type=int, default=200, help="steps (a burst of launches is one)")
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, printed")
    parser.add_argument("--full-every", type=int, default=10, help="steps between full checks (besides faults)")
    parser.add_argument("--lease", type=int, default=20, help="berth_lease_seconds of every launch")
    parser.add_argument("--kill-rate", type=float, default=0.2, help="share of launches killed")
    parser.add_argument("--restart-rate", type=float, default=0.06, help="share of steps with a daemon restart")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "soak.md"))
    parser.add_argument("--log", help="every step as JSON lines (default: next to --out's name in /tmp)")
    parser.add_argument("--keep", action="store_true", help="leave the lab and PostgreSQL running (inspection)")
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(10 ** 6)
    if os.geteuid() != 0:
        parser.error("needs root: the lab's libvirt daemons and PostgreSQL")
    libvirt.registerErrorHandler(lambda _context, _error: None, None)  # errors are raised, not printed too
    load_before = _load()
    soak = Soak(args)
    interrupted = None
    try:
        soak.setup()
        soak.run()
    except BaseException as exc:  # the report says how far it got, whatever stopped it
        interrupted = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        if hasattr(soak, "started"):
            Path(args.out).write_text(soak.report(load_before, interrupted))
            log = Path(args.log or f"/tmp/berth-soak-{args.seed}.jsonl")
            log.write_text("".join(json.dumps(entry, default=str) + "\n" for entry in [*soak.log, *soak.faults]))
            print(f"soak: report {args.out}, log {log}, {len(soak.seen)} invariant violation(s)", flush=True)
        soak.teardown()
    return 1 if soak.seen else 0


if __name__ == "__main__":
    sys.exit(main())
