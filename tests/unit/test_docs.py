"""The documentation site's sources: the generated placement guide is current, and every guide
is in the table of contents. scripts/docs builds the site itself (scripts/lint runs it)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import yaml

from ansible_collections.berth.fleet.plugins.module_utils.scheduler import registry, request_spec

REPO = Path(__file__).resolve().parents[2]
DOCSITE = REPO / "docs" / "docsite"


def _generator():
    spec = importlib.util.spec_from_file_location("docs_placement", REPO / "scripts" / "docs_placement.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_placement_guide_is_what_the_generator_writes():
    """Regenerate with: .venv/bin/python scripts/docs_placement.py"""
    assert (DOCSITE / "rst" / "placement.rst").read_text() == _generator().render()


def test_the_placement_guide_has_a_section_per_filter_and_weigher():
    page = (DOCSITE / "rst" / "placement.rst").read_text()
    headings = re.findall(r"^(\w+)\n\^+$", page, flags=re.MULTILINE)
    assert headings == list(registry.FILTERS) + list(registry.WEIGHERS)


def test_the_schedule_documentation_states_the_registry_default_filters():
    documentation = _generator()._documentation()
    (default_item,) = [item for item in documentation["options"]["enabled_filters"]["description"]
                       if item.startswith("Default ")]
    assert re.findall(r"C\((\w+)\)", default_item) == request_spec.DEFAULT_FILTERS


def test_every_guide_is_in_the_table_of_contents_under_its_label():
    extra_docs = yaml.safe_load((DOCSITE / "extra-docs.yml").read_text())
    listed = [name for section in extra_docs["sections"] for name in section["toctree"]]
    assert sorted(listed) == sorted(path.stem for path in (DOCSITE / "rst").glob("*.rst"))
    for name in listed:
        labels = re.findall(r"^\.\. _([^:]+):$", (DOCSITE / "rst" / f"{name}.rst").read_text(),
                            flags=re.MULTILINE)
        assert labels[0] == f"ansible_collections.berth.fleet.docsite.{name}"


def _table(page: str, heading: str) -> dict[str, str]:
    """The rows (first cell's ``name``: second cell) of the list-table under ``heading``."""
    section = page.split(f"\n{heading}\n{'-' * len(heading)}\n", 1)[1]
    section = re.split(r"\n[^\n]+\n-+\n", section, maxsplit=1)[0]
    return dict(re.findall(r"^   \* - ``([a-z_0-9]+)``\n     - (.+)$", section, flags=re.MULTILINE))


def test_the_settings_page_lists_exactly_the_operator_settings_and_the_requester_options():
    from ansible_collections.berth.fleet.plugins.plugin_utils import settings

    page = (DOCSITE / "rst" / "settings.rst").read_text()
    unescaped = {key: value.replace("\\*", "*") for key, value in _table(page, "Operator settings").items()}
    assert unescaped == settings.OPERATOR_SETTINGS
    assert _table(page, "Requester options") == settings.REQUESTER_OPTIONS
