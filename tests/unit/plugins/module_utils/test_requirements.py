"""A missing third-party library is named by the package to pip install, on every path that
needs one: each case runs in a fresh Python whose imports of that library fail."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")

# A sitecustomize module: Python imports it at start-up, so every import of a library named in
# BERTH_TEST_BLOCKED fails, in this Python and in any it starts (Ansible's workers).
BLOCKER = textwrap.dedent("""
    import os
    import sys

    BLOCKED = set(os.environ["BERTH_TEST_BLOCKED"].split(","))


    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None


    sys.meta_path.insert(0, Blocker())
""")

PREFIX = "ansible_collections.berth.fleet.plugins"
CASES = [
    pytest.param("sqlalchemy", f"import {PREFIX}.plugin_utils.ledger", "SQLAlchemy", id="sqlalchemy"),
    pytest.param("alembic", f"import {PREFIX}.plugin_utils.ledger", "alembic", id="alembic"),
    pytest.param("psycopg", f"from {PREFIX}.plugin_utils.ledger import Ledger\n"
                 "Ledger('postgresql+psycopg://berth:secret@localhost/berth').open(create=True)",
                 "psycopg[binary]", id="psycopg"),
    pytest.param("pycdlib", f"from {PREFIX}.plugin_utils.nocloud import seed_iso\n"
                 "seed_iso('0b5c8a7e-6d1f-4b8e-9d43-2f1c7a9e8b10', 'web-1', '#cloud-config')",
                 "pycdlib", id="pycdlib"),
    pytest.param("libvirt", f"from {PREFIX}.module_utils.libvirt_host import require_libvirt\n"
                 "require_libvirt()", "libvirt-python", id="libvirt"),
]


@pytest.fixture
def blocked_env(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)

    def env(library: str) -> dict[str, str]:
        return {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "BERTH_TEST_BLOCKED": library,
                "PYTHONPATH": f"{tmp_path}:{REPO / '.cache' / 'collections'}"}
    return env


@pytest.mark.parametrize(("library", "code", "package"), CASES)
def test_a_missing_library_is_named_by_its_package(blocked_env, library, code, package):
    script = textwrap.dedent(f"""
        from {PREFIX}.module_utils._requirements import MissingLibraryError
        try:
            {textwrap.indent(code, " " * 12).strip()}
        except MissingLibraryError as error:
            print("MISSING", error.package)
            print(error)
    """)
    run = subprocess.run([sys.executable, "-c", script], env=blocked_env(library),
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert f"MISSING {package}\n" in run.stdout
    assert f"pip install '{package}'" in run.stdout
    assert "secret" not in run.stdout


@pytest.mark.parametrize(("engine", "answer"), [
    ("auto", "PLACED hv1"), ("plain", "PLACED hv1"), ("vectorized", "pip install 'numpy'")])
def test_without_numpy_the_plain_engine_decides_and_vectorized_names_the_package(blocked_env, engine, answer):
    """NumPy only speeds decisions up: without it the plain path decides the same, and only an
    explicit engine=vectorized fails, naming the package."""
    script = textwrap.dedent(f"""
        from {PREFIX}.module_utils.scheduler.driver import schedule
        from {PREFIX}.module_utils.scheduler.errors import SchedulerInputError
        from {PREFIX}.module_utils.scheduler.host_state import Flavor, HostState
        from {PREFIX}.module_utils.scheduler.request_spec import RequestSpec
        host = HostState.from_dict({{"host": "hv1", "vcpus_total": 4, "vcpus_used": 0, "total_usable_ram_mb": 8192,
                                     "free_ram_mb": 8192, "total_usable_disk_gb": 100, "free_disk_mb": 102400}})
        spec = RequestSpec(flavor=Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1), count=1,
                           engine={engine!r})
        try:
            print("PLACED", schedule([host], spec).placements[0].host)
        except SchedulerInputError as error:
            print(error)
    """)
    run = subprocess.run([sys.executable, "-c", script], env=blocked_env("numpy"),
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert answer in run.stdout


def test_a_playbook_without_sqlalchemy_says_which_package(blocked_env, tmp_path):
    """Not Ansible's "Unexpected Exception, this is probably a bug: No module named ...": the
    run stops where the first ledger task is loaded, naming the package."""
    playbook = tmp_path / "capacity.yml"
    playbook.write_text(textwrap.dedent(f"""
        - name: Ask the ledger
          hosts: localhost
          gather_facts: false
          tasks:
            - name: Capacity
              berth.fleet.capacity:
                flavor: m1.tiny
                ledger_url: sqlite:///{tmp_path}/ledger.sqlite3
    """))
    run = subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", "localhost,", str(playbook)], cwd=REPO,
                         env={**blocked_env("sqlalchemy"), "PATH": f"{ANSIBLE_PLAYBOOK.parent}:/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=300, check=False)
    output = run.stdout + run.stderr
    assert run.returncode != 0
    assert "pip install 'SQLAlchemy'" in output
    assert "Unexpected Exception" not in output
