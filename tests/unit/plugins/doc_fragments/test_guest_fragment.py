"""The guest options' documentation is their table's (issue 33): the doc fragment berth.fleet.guest
is written from GUEST_OPTIONS by scripts/guest_fragment, and what ansible-doc shows of a module
that extends it says, option by option, what the table declares."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml

from ansible_collections.berth.fleet.plugins.doc_fragments.guest import ModuleDocFragment
from ansible_collections.berth.fleet.plugins.module_utils._guest import GUEST_OPTIONS, guest_documentation

REPO = Path(__file__).resolve().parents[4]


def test_the_fragment_is_the_table_s_documentation():
    assert yaml.safe_load(ModuleDocFragment.DOCUMENTATION) == {"options": guest_documentation()}, (
        "plugins/doc_fragments/guest.py and GUEST_OPTIONS disagree: run .venv/bin/python scripts/guest_fragment")


def test_ansible_doc_shows_each_option_as_the_table_declares_it():
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    shown = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-doc"), "--json", "berth.fleet.server"], cwd=REPO,
                           env=env, capture_output=True, text=True, check=True, timeout=120)
    options = json.loads(shown.stdout)["berth.fleet.server"]["doc"]["options"]
    for option in GUEST_OPTIONS:
        documented = options[option.name]
        assert documented["type"] == option.type, option.name
        assert documented.get("choices", []) == list(option.choices), option.name
        assert documented["description"][:len(option.description)] == list(option.description), option.name
        if option.image_property:
            assert f"C({option.image_property})" in documented["description"][-1], option.name
