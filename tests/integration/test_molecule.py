"""`molecule test` of the role on its libvirt-backed platform (extensions/molecule/default)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_molecule_default_scenario_passes_every_step():
    env = dict(os.environ)
    env["PATH"] = f"{REPO / '.venv' / 'bin'}:{env.get('PATH', '')}"
    env["NO_COLOR"] = "1"
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "molecule"), "test"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    for step in ("create", "converge", "idempotence", "verify", "destroy"):
        assert f"{step}: Executed: Successful" in output, f"molecule step {step} did not succeed"
    # destroy left nothing: the lab directory is gone.
    assert not Path("/tmp/berth-molecule").exists()
