"""What loading Berth's actions imports: Ansible's main process imports every action a play uses
before its workers fork, so whatever they import is in every launch's memory. Alembic (with Mako)
is imported only when a ledger needs migrating, NumPy only when the vectorized engine decides
(benchmarks/image_upload.py measures what that keeps a launch that uploads an image under), and
Python's HTTP client (http.client) only when an image is downloaded by URL, and Ansible's
(ansible.module_utils.urls, with http.cookiejar, email and cryptography's x509: about 25 ms of
every launch) not at all."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

COLLECTIONS = Path(__file__).resolve().parents[2] / ".cache" / "collections"
ACTIONS = ("server", "schedule", "migrate", "resize", "tracker_sync", "instance", "console")
# Packages, and modules of packages that are imported anyway (Ansible).
UNWANTED_PACKAGES = ("alembic", "mako", "numpy", "ortools")
UNWANTED_MODULES = ("ansible.module_utils.urls", "http.client")


@pytest.mark.parametrize("action", ACTIONS)
def test_loading_an_action_imports_no_migration_numpy_or_http_client(action):
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(COLLECTIONS)!r})
        import ansible_collections.berth.fleet.plugins.action.{action}
        print(sorted(name for name in sys.modules
                     if name.split(".")[0] in {UNWANTED_PACKAGES!r} or name in {UNWANTED_MODULES!r}))
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert run.stdout.strip() == "[]"
