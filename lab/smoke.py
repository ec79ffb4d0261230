#!/usr/bin/env python3
"""End-to-end proof that the lab fleet is real, with timings.

    python3 lab/smoke.py [--dir DIR] [--hosts 3] [--host hv2] [--cold]

Brings the fleet up, boots the lab guest (type qemu, 128 MiB, direct kernel boot, no disk, no
network, file serial console) on one hypervisor, waits for its marker line in the host-side
serial log, checks that only that hypervisor lists the domain, runs up again (warm, must be a
no-op), brings everything down and checks that no libvirtd or QEMU of the lab is left.
--cold first deletes the guest and QEMU capabilities caches, to time a first-ever up.
Exit status 0 on success.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet  # noqa: E402

MARKER = "BERTH-GUEST-BOOTED"


def domain_xml(name: str, kernel: str, initrd: str, instance: str) -> str:
    dom = ET.Element("domain", type="qemu")
    ET.SubElement(dom, "name").text = name
    ET.SubElement(dom, "memory", unit="MiB").text = "128"
    ET.SubElement(dom, "vcpu").text = "1"
    os_ = ET.SubElement(dom, "os")
    ET.SubElement(os_, "type", arch="x86_64", machine="pc").text = "hvm"
    ET.SubElement(os_, "kernel").text = kernel
    ET.SubElement(os_, "initrd").text = initrd
    ET.SubElement(os_, "cmdline").text = f"console=ttyS0 berth.instance={instance}"
    devices = ET.SubElement(dom, "devices")
    serial = ET.SubElement(devices, "serial", type="file")
    ET.SubElement(serial, "source", path=f"{fleet.QEMU_LOG_DIR}/{name}-serial.log")
    ET.SubElement(serial, "target", port="0")
    return ET.tostring(dom, encoding="unicode")


def lab_processes(base: Path) -> list[str]:
    """Live (not zombie) libvirtd processes of this lab dir and any qemu-system process."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        argv = fleet._proc_cmdline(pid)
        if not argv or not fleet._alive(pid):
            continue
        exe = os.path.basename(argv[0])
        if (exe == "libvirtd" and any(a.startswith(str(base) + "/") for a in argv)) or (
            "qemu-system" in exe
        ):
            found.append(f"{pid} {' '.join(argv)[:120]}")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir")
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--host", default="hv2", help="hypervisor that boots the guest")
    ap.add_argument("--cold", action="store_true", help="delete guest and capabilities caches")
    args = ap.parse_args()
    base = fleet._dir(args.dir)
    timings = {}
    ok = True

    fleet.down(base)
    if args.cold:
        shutil.rmtree(base / "guest", ignore_errors=True)
        shutil.rmtree(base / fleet.CAPS_CACHE, ignore_errors=True)
    t = time.monotonic()
    records = fleet.up(base, args.hosts)
    timings["up (daemons down" + (", no caches)" if args.cold else ", caches kept)")] = \
        time.monotonic() - t
    pids = {r["name"]: r["pid"] for r in records}

    t = time.monotonic()
    from guest import build
    g = build(base)
    timings["guest build (cached now)"] = time.monotonic() - t

    name, instance = "berth-smoke", "abc123"
    u = fleet.uri(base, args.host)
    serial = fleet.log_dir(base, args.host) / f"{name}-serial.log"
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as fh:
        fh.write(domain_xml(name, g["kernel"], g["initrd"], instance))
    try:
        fleet.virsh(u, "define", fh.name)
    finally:
        os.unlink(fh.name)
    t = time.monotonic()
    fleet.virsh(u, "start", name)
    timings["virsh start"] = time.monotonic() - t
    want = f"{MARKER} instance={instance}"
    deadline = t + 30
    seen = False
    while time.monotonic() < deadline:
        if serial.is_file() and want in serial.read_text(errors="replace"):
            seen = True
            break
        time.sleep(0.1)
    timings["start -> marker in serial log"] = time.monotonic() - t
    print(f"marker {'seen' if seen else 'NOT seen'} in {serial}")
    ok &= seen

    for r in records:
        doms = fleet._domains(r["uri"])
        print(f"{r['name']}: domains {doms}")
        ok &= (name in doms) == (r["name"] == args.host)

    t = time.monotonic()
    again = fleet.up(base, args.hosts)
    timings["up (warm, all running)"] = time.monotonic() - t
    same = {r["name"]: r["pid"] for r in again} == pids
    print(f"warm up kept the same daemons: {same}")
    ok &= same

    t = time.monotonic()
    fleet.down(base)
    timings["down"] = time.monotonic() - t
    time.sleep(0.2)
    left = lab_processes(base)
    print(f"processes left after down: {left or 'none'}")
    ok &= not left

    for what, secs in timings.items():
        print(f"  {what:<34} {secs:6.2f} s")
    print("SMOKE OK" if ok else "SMOKE FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
