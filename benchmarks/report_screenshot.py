"""The screenshot of the fleet report in benchmarks/results/fleet_report.png.

    .venv/bin/python benchmarks/report_screenshot.py [--output benchmarks/results/fleet_report.png]

Runs the fleet report's browser test (tests/integration/test_fleet_report.py) with
BERTH_REPORT_SCREENSHOT set, so the picture is exactly what that test looks at: a lab fleet of
three real libvirt hypervisors (root, as the lab needs) gathered into a ledger of its own, three
instances (two in an anti-affinity group), a launch with no valid host, hv2 disabled with a
reason written in HTML, hv3 down (its daemon stopped), and a hypervisor named "<b>hv-html</b>"
whose last sync is two hours old; the page written by `ansible-playbook playbooks/report.yml` and
shot whole by headless Chromium, 1400 pixels wide. The lab and everything launched are removed
afterwards.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "fleet_report.png"))
    options = parser.parse_args()
    env = {**os.environ, "BERTH_REPORT_SCREENSHOT": str(Path(options.output).resolve())}
    test = "tests/integration/test_fleet_report.py::test_fleet_report_written_idempotently_and_read_in_a_browser"
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           test], cwd=REPO, env=env, check=False)
    if proc.returncode != 0:
        sys.exit(f"the browser test failed (rc {proc.returncode}): no screenshot taken")
    print(f"screenshot: {options.output}")


if __name__ == "__main__":
    main()
