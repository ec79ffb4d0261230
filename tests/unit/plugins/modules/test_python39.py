"""The code that runs on hypervisors keeps to their Python (3.9, tests/config.yml)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
ON_HYPERVISORS = sorted(str(p) for p in (REPO / "plugins" / "module_utils").rglob("*.py")) + [
    str(REPO / "plugins" / "modules" / "hypervisor_facts.py")]


def python39() -> str | None:
    candidates = [os.environ.get("BERTH_PYTHON39"), shutil.which("python3.9"),
                  *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python3.9")))]
    for candidate in filter(None, candidates):
        if subprocess.run([candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 9)"],
                          capture_output=True, check=False).returncode == 0:
            return candidate
    return None


@pytest.mark.skipif(python39() is None, reason="no Python 3.9 interpreter here (set BERTH_PYTHON39)")
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
