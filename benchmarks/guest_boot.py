#!/usr/bin/env python3
"""Benchmark: seconds from `virsh start` to the lab guest's boot marker, BIOS against UEFI.

    .venv/bin/python benchmarks/guest_boot.py [--rounds 2]

One lab hypervisor (lab/fleet.py); each round defines and starts the lab guest (direct kernel
boot, no disk, type qemu) once with SeaBIOS and once with OVMF, its domain XML rendered by
berth.fleet.instance from the role's template, and waits for BERTH-GUEST-BOOTED on the serial
log. Prints the times and writes them to --out (benchmarks/results/guest_boot.md); needs root
(the lab) and Debian's ovmf package.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "lab"), str(REPO / ".cache" / "collections")]

import check  # noqa: E402  (lab/check.py)
import fleet  # noqa: E402  (lab/fleet.py)
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import DomainTemplate  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils._guest import Guest  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils.request import Boot, Request  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor  # noqa: E402

POOL = "/var/lib/libvirt/images"


def domain_xml(lab_dir: str, name: str, instance_uuid: str, firmware: str) -> str:
    template = DomainTemplate(str(REPO / "roles" / "instance" / "templates" / "domain.xml.j2"))
    request = Request(flavor=Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=0),
                      boot=Boot(f"{lab_dir}/guest/vmlinuz", f"{lab_dir}/guest/initrd.img", "console=ttyS0"),
                      guest=Guest.from_options({"firmware": firmware}))
    made = {"disk": {"path": ""}, "seed": None,
            "nvram": {"path": f"{POOL}/berth-{instance_uuid}-nvram.fd"} if firmware == "uefi" else None}
    xml = template.render(request, name, instance_uuid, made, "qemu", fleet.QEMU_LOG_DIR)
    # The timing is the firmware's and the kernel's: no root disk to make.
    start = xml.index("    <disk type='file' device='disk'>")
    return xml[:start] + xml[xml.index("</disk>", start) + len("</disk>\n"):]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "guest_boot.md"))
    args = parser.parse_args()
    load_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    lab_dir = tempfile.mkdtemp(prefix="berth-boot-", dir="/tmp")
    seconds: dict[str, list[float | None]] = {"bios": [], "uefi": []}
    try:
        [host] = fleet.up(lab_dir, hosts=1)
        for _round in range(args.rounds):
            for firmware in seconds:
                name, instance_uuid = f"boot-{firmware}", str(uuid.uuid4())
                path = Path(lab_dir) / f"{name}.xml"
                path.write_text(domain_xml(lab_dir, name, instance_uuid, firmware))
                fleet.virsh(host["uri"], "define", str(path))
                started = time.monotonic()
                fleet.virsh(host["uri"], "start", name)
                log = fleet.log_dir(lab_dir, "hv1") / f"{name}.serial.log"
                booted = check.wait_for_marker(log, instance_uuid, 300)
                seconds[firmware].append(round(time.monotonic() - started, 1) if booted else None)
                fleet.virsh(host["uri"], "destroy", name)
                fleet.virsh(host["uri"], "undefine", "--nvram", name)
                log.unlink()
    finally:
        fleet.down(lab_dir)
    lines = [
        "# Guest boot: SeaBIOS against UEFI (OVMF)", "",
        "Seconds from `virsh start` to the lab guest's boot marker on its serial console (direct kernel",
        "boot, no disk, QEMU TCG: `type=qemu`, as nested KVM here is too slow for a kernel: ../shared/TESTBED.md), the domain XML rendered by",
        "berth.fleet.instance from the role's template; UEFI with its per-instance NVRAM volume.", "",
        f"Reproduce: `.venv/bin/python benchmarks/guest_boot.py --rounds {args.rounds}` (root, after scripts/setup).",
        "", f"Machine: {os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}. "
        f"Load average before: {load_before}; after: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}.", "",
        "| firmware | rounds | median s | min-max s | did not boot |", "|---|---:|---:|---:|---:|",
    ]
    for firmware, times in seconds.items():
        print(f"{firmware}: start to boot marker, s: {times}")
        booted = [value for value in times if value is not None]
        spread = f"{min(booted)}-{max(booted)}" if booted else "-"
        median = f"{statistics.median(booted):.1f}" if booted else "-"
        lines.append(f"| {firmware} | {len(times)} | {median} | {spread} | {len(times) - len(booted)} |")
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"guest_boot: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
