"""`ansible-galaxy collection build` on this checkout gives the collection and nothing else.

The build runs on the checkout as a developer or CI has it (with .venv, .cache, test output,
the docs site's build lying about), so galaxy.yml's build_ignore is tried on real clutter.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_GALAXY = Path(sys.executable).with_name("ansible-galaxy")

# Tracked, but for development only.
NOT_SHIPPED = ("lab/", "scripts/", "benchmarks/", "tests/", ".ci/", "requirements.txt",
               "pyproject.toml", "ansible.cfg", ".ansible-lint", "docs/requirements.txt")
SHIPPED = ("LICENSE", "README.md", "CHANGELOG.md", "changelogs/changelog.yaml",
           "changelogs/config.yaml", "meta/runtime.yml", "meta/execution-environment.yml",
           "meta/ee-requirements.txt", "bindep.txt", "docs/docsite/extra-docs.yml",
           "docs/docsite/rst/concepts.rst", "docs/docsite/rst/design.rst", "docs/docsite/rst/install.rst",
           "docs/docsite/rst/placement.rst", "docs/docsite/rst/operations.rst",
           "docs/docsite/rst/awx.rst", "plugins/modules/schedule.py",
           "plugins/inventory/hypervisors.py", "roles/instance/tasks/main.yml",
           "playbooks/launch.yml", "playbooks/vars/flavors.yml")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    output = tmp_path_factory.mktemp("build")
    subprocess.run([str(ANSIBLE_GALAXY), "collection", "build", "--output-path", str(output), str(REPO)],
                   check=True, capture_output=True, text=True)
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    tarball = output / f"berth-fleet-{galaxy['version']}.tar.gz"
    with tarfile.open(tarball) as archive:
        files = {member.name for member in archive.getmembers() if member.isfile()}
        manifest = json.load(archive.extractfile("MANIFEST.json"))
        files_json = json.load(archive.extractfile("FILES.json"))
    return {"files": files, "manifest": manifest, "files_json": files_json, "galaxy": galaxy}


def _git_files() -> set[str]:
    """Tracked files and untracked ones git does not ignore: all a build may take."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                            cwd=REPO, check=True, capture_output=True, text=True).stdout
    return set(filter(None, listed.split("\0")))


def test_nothing_git_ignores_is_shipped(built):
    """.venv, .cache, tests/output, docs/build, caches: build_ignore covers what .gitignore does."""
    stray = built["files"] - {"MANIFEST.json", "FILES.json"} - _git_files()
    assert stray == set()


def test_development_files_are_not_shipped(built):
    assert [name for name in sorted(built["files"]) if name.startswith(NOT_SHIPPED)] == []


def test_neither_tests_nor_benchmarks_nor_wheels_are_shipped(built):
    """Not a file of them, nor their folders (FILES.json lists directories too)."""
    listed = [entry["name"] for entry in built["files_json"]["files"]]
    assert [name for name in listed if name.split("/")[0] in ("tests", "benchmarks")] == []
    assert [name for name in built["files"] if name.endswith(".whl")] == []


def test_the_collection_is_shipped(built):
    assert [name for name in SHIPPED if name not in built["files"]] == []


def test_no_made_up_address_in_the_metadata(built):
    """Every link Galaxy shows is a real one, or absent (the project has no public home yet)."""
    info = built["manifest"]["collection_info"]
    links = {key: info.get(key) for key in ("repository", "documentation", "homepage", "issues")}
    assert [value for value in links.values() if value and (".invalid" in value or "example." in value)] == []


def test_nothing_of_the_checkout_but_the_collection(built):
    """No tests, no build output, no wheel, no caches or virtualenvs, even if they lie about."""
    listed = [entry["name"] for entry in built["files_json"]["files"]]
    assert [name for name in listed if name.split("/")[0] in ("tests", ".cache", ".venv", "dist", "build")
            or name.endswith((".whl", ".tar.gz", ".pyc"))] == []


def test_a_design_document_plugins_cite_is_shipped(built):
    """A plugin's documentation or comment that names a page of docs/ sends the reader to a
    page the installed collection has."""
    cited = set()
    for name in built["files"]:
        if name.startswith("plugins/") and name.endswith(".py"):
            text = (REPO / name).read_text()
            cited.update(re.findall(r"docs/docsite/rst/[\w.-]+\.rst", text))
            assert "DESIGN.md" not in text, name
    assert cited and sorted(cited - built["files"]) == []


def test_manifest_carries_galaxy_yml(built):
    info = built["manifest"]["collection_info"]
    assert (info["namespace"], info["name"], info["version"]) == ("berth", "fleet", built["galaxy"]["version"])
    assert info["license"] == ["GPL-3.0-or-later"]
    assert "libvirt" in info["tags"]
