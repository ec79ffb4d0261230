#!/usr/bin/env python3
"""Check a launch on the lab fleet from the outside: the ledger (read with sqlite3) against what
each daemon's virsh reports, and each guest's serial console for its boot marker.

    python3 lab/check.py --name web [--dir DIR] [--timeout 120]

Exits 1 if an instance is not running where the ledger says or its kernel printed no marker.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet  # noqa: E402

MARKER = "BERTH-GUEST-BOOTED instance={uuid}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="launch name: checks <name>-1 .. <name>-N")
    parser.add_argument("--dir", help="lab dir (default: $BERTH_LAB_DIR, else <repo>/lab/state)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds to wait for each boot marker")
    args = parser.parse_args(argv)

    with sqlite3.connect(fleet.ledger_path(args.dir)) as db:
        rows = db.execute(
            "SELECT name, uuid, host, state FROM instances WHERE name LIKE ? ORDER BY name", (f"{args.name}-%",)
        ).fetchall()
    if not rows:
        print(f"check: no instances named {args.name}-N in the ledger")
        return 1
    uris = {record["name"]: record["uri"] for record in fleet.hosts(args.dir)}
    ok = True
    for name, instance_uuid, host, state in rows:
        running = fleet.virsh(uris[host], "domstate", name, check=False).strip()
        domain_uuid = fleet.virsh(uris[host], "domuuid", name, check=False).strip()
        booted = wait_for_marker(fleet.log_dir(args.dir, host) / f"{name}.serial.log", instance_uuid, args.timeout)
        good = state == "ACTIVE" and running == "running" and domain_uuid == instance_uuid and booted
        ok &= good
        print(f"check: {name}: ledger says {state} on {host}; libvirt on {host} says {running or 'no such domain'}"
              f"; guest {'booted (marker with its UUID on the serial console)' if booted else 'printed no boot marker'}"
              f" -> {'ok' if good else 'WRONG'}")
    return 0 if ok else 1


def wait_for_marker(log: Path, instance_uuid: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if log.exists() and MARKER.format(uuid=instance_uuid) in log.read_text(errors="replace"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
