"""The code that runs on hypervisors keeps to their Python (3.9, tests/config.yml)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
ON_HYPERVISORS = sorted(str(p) for p in (REPO / "plugins" / "module_utils").rglob("*.py")) + [
    str(REPO / "plugins" / "modules" / "hypervisor_facts.py")]


# scripts/setup links an installed Python 3.9 here (python3.9 on PATH, or pyenv's); CI runs
# setup first, so a missing one fails this test instead of skipping it.
PYTHON39 = REPO / ".cache" / "python3.9"


def python39() -> str:
    """The interpreter at PYTHON39, checked to be 3.9; the test fails saying how to get one."""
    check = subprocess.run([str(PYTHON39), "-c", "import sys; print(sys.version_info[:2] == (3, 9))"],
                           capture_output=True, text=True, check=False) if PYTHON39.exists() else None
    if check is None or check.stdout.strip() != "True":
        pytest.fail(f"no Python 3.9 at {PYTHON39}: scripts/setup links one from python3.9 on PATH or "
                    f"pyenv's installed 3.9 (pyenv install 3.9, then scripts/setup)")
    return str(PYTHON39)


def test_module_side_compiles_and_runs_on_python39(tmp_path):
    script = f"""
import py_compile, sys
for path in {ON_HYPERVISORS!r}:
    py_compile.compile(path, cfile={str(tmp_path / 'x.pyc')!r}, doraise=True)
sys.path.insert(0, {str(REPO / '.cache' / 'collections')!r})
from ansible_collections.berth.fleet.plugins.module_utils import host_facts, proc_stats
facts = {{"nodename": "n", "uuid": "u", "vcpus_total": 4, "hypervisor_type": "QEMU",
         "hypervisor_version": 1, "libvirt_version": 1, "cpu_info": {{}}, "numa_topology": {{"cells": []}},
         "supported_instances": [], "memory": proc_stats.meminfo(), "memory_source": "proc",
         "metrics": proc_stats.loadavg(), "uri_uuid": "x", "storage_pool": "default",
         "pools": [{{"name": "default", "capacity_mb": 2048}}], "domains": []}}
state = host_facts.host_state("hv", facts, {{}})
print(state["free_disk_mb"], state["availability_zone"])
"""
    proc = subprocess.run([python39(), "-c", script], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["2048", "nova"]
