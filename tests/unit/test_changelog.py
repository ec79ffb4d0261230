"""The changelog is antsibull-changelog's: fragments lint, CHANGELOG.md is generated from
changelogs/changelog.yaml, and every plugin's version_added agrees with the releases."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ANTSIBULL_CHANGELOG = Path(sys.executable).with_name("antsibull-changelog")


def _changelog(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(ANTSIBULL_CHANGELOG), *args], cwd=cwd, capture_output=True,
                          text=True, check=False)


@pytest.fixture
def project(tmp_path):
    """A copy of what antsibull-changelog reads: galaxy.yml and changelogs/ (no fragments)."""
    shutil.copy(REPO / "galaxy.yml", tmp_path)
    shutil.copytree(REPO / "changelogs", tmp_path / "changelogs",
                    ignore=shutil.ignore_patterns("*.yml", "*.yaml", ".plugin-cache.yaml"))
    for name in ("config.yaml", "changelog.yaml"):
        shutil.copy(REPO / "changelogs" / name, tmp_path / "changelogs" / name)
    return tmp_path


def test_the_repository_fragments_lint():
    result = _changelog("lint", cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_a_branch_fragment_in_the_agreed_format_lints(project):
    """What the engineers write: changelogs/fragments/<branch>.yml with lists of strings."""
    (project / "changelogs" / "fragments" / "some-branch.yml").write_text(
        "minor_changes:\n"
        "  - berth.fleet.schedule - a new option ``foo`` (https://example.invalid/1).\n"
        "bugfixes:\n"
        "  - playbooks/gather.yml - no longer fails on an empty pool.\n")
    result = _changelog("lint", cwd=project)
    assert (result.returncode, result.stdout) == (0, "")


@pytest.mark.parametrize("text, complaint", [
    ("new_features:\n  - something\n", "invalid section: new_features"),
    ("minor_changes: one string, not a list\n", "list"),
], ids=["unknown-section", "not-a-list"])
def test_a_malformed_fragment_fails_the_lint(project, text, complaint):
    (project / "changelogs" / "fragments" / "bad.yml").write_text(text)
    result = _changelog("lint", cwd=project)
    assert result.returncode != 0
    assert complaint in result.stdout


def test_changelog_yaml_is_valid():
    result = _changelog("lint-changelog-yaml", str(REPO / "changelogs" / "changelog.yaml"), cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr


def test_changelog_md_is_generated_from_changelog_yaml(tmp_path):
    """Nobody edits CHANGELOG.md by hand: `antsibull-changelog generate` gives it back as is."""
    output = tmp_path / "CHANGELOG.md"
    result = _changelog("generate", "--output", str(output), "--output-format", "md", cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert output.read_text() == (REPO / "CHANGELOG.md").read_text()


def _documented_plugins() -> dict[tuple[str, str], str]:
    """(plugin type, name) -> version_added, from each plugin's DOCUMENTATION."""
    found = {}
    for path in sorted((REPO / "plugins").glob("*/*.py")):
        plugin_type = path.parent.name
        if plugin_type in ("module_utils", "plugin_utils", "doc_fragments", "action"):
            continue
        plugin = importlib.import_module(f"ansible_collections.berth.fleet.plugins.{plugin_type}.{path.stem}")
        found[(plugin_type, path.stem)] = str(yaml.safe_load(plugin.DOCUMENTATION)["version_added"])
    return found


def test_version_added_names_the_release_that_lists_the_plugin():
    """A plugin added in a release is listed under it in changelog.yaml; any other says the
    version being developed (galaxy.yml's), so that `release` lists it as new there."""
    releases = yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text())["releases"]
    developing = str(yaml.safe_load((REPO / "galaxy.yml").read_text())["version"])
    assert developing not in releases
    listed = {}
    for version, release in releases.items():
        for module in release.get("modules", []):
            listed[("modules", module["name"])] = version
        for plugin_type, plugins in release.get("plugins", {}).items():
            for plugin in plugins:
                listed[(plugin_type, plugin["name"])] = version
    plugins = _documented_plugins()
    assert ("modules", "schedule") in plugins and ("inventory", "hypervisors") in plugins
    for key, version_added in plugins.items():
        expected = listed.get(key, developing)
        assert version_added == expected, (
            f"{key[0]}/{key[1]}: version_added {version_added}, expected {expected} "
            f"({'the release listing it' if key in listed else 'galaxy.yml, not released yet'})")
