"""The ansible-core releases Berth claims (meta/runtime.yml) are the ones it is tested on: the
newest, which requirements.txt pins for .venv, and the oldest, which `scripts/setup --oldest`
installs; each role's min_ansible_version is the same lower bound."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]


def _requires_ansible() -> SpecifierSet:
    return SpecifierSet(yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())["requires_ansible"])


def _pinned_newest() -> Version:
    return Version(re.search(r"^ansible-core==([^\s#]+)", (REPO / "requirements.txt").read_text(), re.M).group(1))


def _pinned_oldest() -> Version:
    return Version(re.search(r"^oldest_ansible_core=(\S+)", (REPO / "scripts" / "setup").read_text(), re.M).group(1))


def test_both_tested_releases_are_claimed_and_span_the_claim():
    claimed = _requires_ansible()
    assert _pinned_newest() in claimed and _pinned_oldest() in claimed
    lower = next(spec.version for spec in claimed if spec.operator == ">=")
    upper = next(spec.version for spec in claimed if spec.operator == "<")
    # The oldest tested is the first claimed minor; the newest tested is the last claimed minor.
    assert Version(lower).release[:2] == _pinned_oldest().release[:2]
    assert Version(upper).release[:2] == (_pinned_newest().major, _pinned_newest().minor + 1)


def test_each_role_names_the_same_lower_bound():
    lower = next(spec.version for spec in _requires_ansible() if spec.operator == ">=")
    for meta in sorted(REPO.glob("roles/*/meta/main.yml")):
        assert str(yaml.safe_load(meta.read_text())["galaxy_info"]["min_ansible_version"]) == lower, meta
