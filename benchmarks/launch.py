"""Wall time to launch 1, 10 and 30 instances on a 3-hypervisor lab fleet, until every domain runs.

    .venv/bin/python benchmarks/launch.py [--counts 1,10,30] [--out benchmarks/results/launch.md]

For each count, in the same run and on the same fleet:
- Berth: `ansible-playbook playbooks/launch.yml` (inventory facts, request check, Nova-style
  scheduling with claims in the ledger, then volume + define + start per instance), split into
  scheduling, the libvirt build, and the rest (Ansible start-up, the inventory plugin's facts,
  the other tasks);
- a blind round-robin baseline in raw libvirt-python: the same volume, the same domain XML,
  define and start, host i % 3, no facts, no ledger, no Ansible;
- guest boot: from the end of Berth's launch until every guest printed its boot marker on its
  serial console (reported apart: it is QEMU's TCG emulation, not Berth).
Each round is deleted (delete.yml, not timed) before the next. Needs root (the lab).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid as uuidlib
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "lab"))
import check  # noqa: E402  (lab/check.py)
import fleet  # noqa: E402  (lab/fleet.py)
import libvirt  # noqa: E402

FLAVOR = {"name": "bench", "vcpus": 1, "memory_mb": 128, "root_gb": 1}
# 2 cores x Nova's default cpu_allocation_ratio 4.0 is 8 vCPUs a host: 30 instances need more.
CPU_ALLOCATION_RATIO = 16.0
BOOT_TIMEOUT_S = 300


def ansible_env() -> dict:
    env = dict(os.environ)
    env.update(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               ANSIBLE_CALLBACK_PLUGINS=str(REPO / "benchmarks" / "callback_plugins"),
               ANSIBLE_STDOUT_CALLBACK="berth_timing",
               PATH=f"{REPO / '.venv' / 'bin'}:{env.get('PATH', '')}")
    return env


def playbook(inventory: str, name: str, *extra: str) -> tuple[float, dict]:
    command = [str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", inventory,
               str(REPO / "playbooks" / name), *extra]
    started = time.monotonic()
    proc = subprocess.run(command, cwd=REPO, env=ansible_env(), capture_output=True, text=True,
                          timeout=1800, check=False)
    wall = time.monotonic() - started
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    if proc.returncode != 0:
        raise RuntimeError(f"{name} failed: {report['failed'] or proc.stderr}")
    return wall, report


def task_seconds(report: dict, suffix: str) -> float:
    return sum(t["seconds"] for t in report["tasks"] if t["task"].endswith(suffix))


def running_everywhere(hosts: dict, uuids: list[str]) -> bool:
    running = set()
    for record in hosts.values():
        conn = libvirt.open(record["uri"])
        running.update(d.UUIDString() for d in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_RUNNING))
        conn.close()
    return set(uuids) <= running


def baseline_xml(name: str, instance_uuid: str, disk: str, boot: dict) -> str:
    """The domain Berth defines, built here with ElementTree (no template, no metadata)."""
    dom = ET.Element("domain", type="qemu")
    ET.SubElement(dom, "name").text = name
    ET.SubElement(dom, "uuid").text = instance_uuid
    ET.SubElement(dom, "memory", unit="MiB").text = str(FLAVOR["memory_mb"])
    ET.SubElement(dom, "vcpu").text = str(FLAVOR["vcpus"])
    os_el = ET.SubElement(dom, "os")
    ET.SubElement(os_el, "type", arch="x86_64").text = "hvm"
    ET.SubElement(os_el, "kernel").text = boot["kernel"]
    ET.SubElement(os_el, "initrd").text = boot["initrd"]
    ET.SubElement(os_el, "cmdline").text = f"console=ttyS0 berth.instance={instance_uuid}"
    devices = ET.SubElement(dom, "devices")
    disk_el = ET.SubElement(devices, "disk", type="file", device="disk")
    ET.SubElement(disk_el, "driver", name="qemu", type="qcow2")
    ET.SubElement(disk_el, "source", file=disk)
    ET.SubElement(disk_el, "target", dev="vda", bus="virtio")
    serial = ET.SubElement(devices, "serial", type="file")
    ET.SubElement(serial, "source", path=f"/var/log/libvirt/qemu/{name}.serial.log")
    ET.SubElement(serial, "target", port="0")
    return ET.tostring(dom, encoding="unicode")


def baseline(hosts: dict, count: int, boot: dict) -> float:
    """Blind round-robin: volume, define, start on host i % len(hosts); returns seconds."""
    names = sorted(hosts)
    started = time.monotonic()
    conns = {host: libvirt.open(hosts[host]["uri"]) for host in names}
    made = []
    for index in range(count):
        host = names[index % len(names)]
        conn = conns[host]
        instance_uuid = str(uuidlib.uuid4())
        pool = conn.storagePoolLookupByName("default")
        vol = pool.createXML(
            f"<volume><name>rr-{instance_uuid}.qcow2</name><capacity unit='G'>{FLAVOR['root_gb']}</capacity>"
            "<target><format type='qcow2'/></target></volume>", 0)
        dom = conn.defineXML(baseline_xml(f"rr-{index + 1}", instance_uuid, vol.path(), boot))
        dom.create()
        made.append((host, dom, vol))
    seconds = time.monotonic() - started
    for _host, dom, vol in made:
        dom.destroy()
        dom.undefine()
        vol.delete(0)
    for conn in conns.values():
        conn.close()
    return seconds


def raise_cpu_ratio(inventory_dir: str) -> None:
    source = Path(inventory_dir) / "fleet.berth.yml"
    lines = []
    for line in source.read_text().splitlines():
        lines.append(line)
        if line.strip().startswith("uri:"):
            lines.append(f"    cpu_allocation_ratio: {CPU_ALLOCATION_RATIO}")
    source.write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1,10,30")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "launch.md"))
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    directory = tempfile.mkdtemp(prefix="berth-bench-", dir="/tmp")
    rows = []
    try:
        records = fleet.up(directory, hosts=3)
        hosts = {r["name"]: r for r in records}
        inventory = str(fleet.inventory_dir(directory))
        raise_cpu_ratio(inventory)
        boot = {}
        for line in (Path(inventory) / "group_vars" / "all.yml").read_text().splitlines():
            for key in ("kernel", "initrd"):
                if line.startswith(f"berth_boot_{key}:"):
                    boot[key] = line.split(":", 1)[1].strip().strip('"')
        # Warm-up, not measured: each daemon's first start probes QEMU.
        baseline(hosts, 3, boot)
        for count in counts:
            name = f"b{count}"
            wall, report = playbook(inventory, "launch.yml", "-e", json.dumps(
                {"name": name, "count": count, "flavor": FLAVOR}))
            ledger = fleet.ledger_path(directory)
            with sqlite3.connect(ledger) as db:
                placed = db.execute("SELECT uuid, host, state FROM instances WHERE name LIKE ?", (f"{name}-%",)).fetchall()
            assert len(placed) == count and {row[2] for row in placed} == {"ACTIVE"}, placed
            assert running_everywhere(hosts, [row[0] for row in placed])
            per_host = {h: sum(1 for row in placed if row[1] == h) for h in sorted(hosts)}
            boot_started = time.monotonic()
            boot_s = None
            if count <= 10:
                with sqlite3.connect(ledger) as db:
                    names = dict(db.execute("SELECT uuid, name FROM instances WHERE name LIKE ?", (f"{name}-%",)))
                ok = all(check.wait_for_marker(fleet.log_dir(directory, host) / f"{names[u]}.serial.log", u, BOOT_TIMEOUT_S)
                         for u, host, _state in placed)
                boot_s = time.monotonic() - boot_started if ok else None
            schedule_s = task_seconds(report, "Schedule the instances")
            build_s = task_seconds(report, "Build instances on their hypervisors")
            playbook(inventory, "delete.yml", "-e", f"name={name}")
            base_s = baseline(hosts, count, boot)
            rows.append({"count": count, "wall_s": wall, "schedule_s": schedule_s, "build_s": build_s,
                         "rest_s": wall - schedule_s - build_s, "baseline_s": base_s, "boot_s": boot_s,
                         "per_host": per_host})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        fleet.down(directory)
    write_report(args.out, rows)
    return 0


def write_report(path: str, rows: list[dict]) -> None:
    lines = [
        "# Launch benchmark (benchmarks/launch.py)",
        "",
        f"Machine: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        "3 lab hypervisors (real libvirtd daemons, lab/fleet.py), domain type qemu, direct kernel boot, "
        f"flavor {FLAVOR['vcpus']} vCPU / {FLAVOR['memory_mb']} MiB / {FLAVOR['root_gb']} GiB qcow2 root volume, "
        f"cpu_allocation_ratio {CPU_ALLOCATION_RATIO} (30 instances need more than Nova's 4.0 on 2 cores).",
        "",
        "Berth = `ansible-playbook playbooks/launch.yml` wall time, until every domain is running "
        "(the playbook returns after each domain's start; the benchmark then checks all are running). "
        "Baseline = blind round-robin in raw libvirt-python, same volume and domain, define + start, "
        "measured in the same run on the same fleet. Guest boot = from the end of the launch until every "
        "guest printed its boot marker (TCG emulation; measured for 1 and 10 only). The baseline builds "
        "one instance after the other, as a playbook loop does; Berth builds hosts in parallel. The "
        "1-instance round runs first, on a fresh ledger file.",
        "",
        "| instances | Berth wall s | scheduling s | libvirt build s | Ansible + facts + other tasks s "
        "| baseline s | Berth / baseline | guest boot s | per host |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        boot = f"{r['boot_s']:.1f}" if r["boot_s"] is not None else "-"
        lines.append(
            f"| {r['count']} | {r['wall_s']:.2f} | {r['schedule_s']:.2f} | {r['build_s']:.2f} | {r['rest_s']:.2f} "
            f"| {r['baseline_s']:.2f} | {r['wall_s'] / r['baseline_s']:.1f}x | {boot} "
            f"| {', '.join(f'{h} {n}' for h, n in r['per_host'].items())} |")
    lines += ["", "Reproduce: `.venv/bin/python benchmarks/launch.py` (root; about five minutes, most of it "
              "waiting for guests to boot and for 30 QEMUs to start on 2 cores).", ""]
    Path(path).write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
