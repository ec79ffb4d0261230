"""Each filter's and weigher's name is declared once, in names.py (below the filters, where the
request checks its names against it); each class takes its name from there and the registry
(above the filters) maps the names to the classes. These tests fail when the three disagree."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.scheduler import names, registry, request_spec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import BaseHostFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import BaseWeigher

SCHEDULER = Path(registry.__file__).parent
PACKAGE = "ansible_collections.berth.fleet.plugins.module_utils.scheduler"


def test_the_registry_holds_every_declared_filter_in_order():
    assert list(registry.FILTERS) == list(names.FILTER_NAMES)


def test_the_registry_holds_every_declared_weigher_in_order_with_its_multiplier():
    assert list(registry.WEIGHERS) == list(names.WEIGHER_MULTIPLIER_OPTIONS)
    assert {name: weigher.multiplier_option for name, weigher in registry.WEIGHERS.items()} == (
        names.WEIGHER_MULTIPLIER_OPTIONS)


def test_each_name_is_declared_once():
    declared = [*names.FILTER_NAMES, *names.WEIGHER_MULTIPLIER_OPTIONS]
    assert len(declared) == len(set(declared))
    options = list(names.WEIGHER_MULTIPLIER_OPTIONS.values())
    assert len(options) == len(set(options))


def test_each_class_is_registered_under_its_own_name():
    for table in (registry.FILTERS, registry.WEIGHERS):
        for name, cls in table.items():
            assert cls.name == name


def _modules(folder: str) -> list[str]:
    return sorted(path.stem for path in (SCHEDULER / folder).glob("*.py")
                  if path.stem not in ("__init__", "base"))


def _classes(folder: str, base: type) -> dict[str, type]:
    """Every filter (or weigher) class the package's files define, by qualified name."""
    found = {}
    for stem in _modules(folder):
        module = importlib.import_module(f"{PACKAGE}.{folder}.{stem}")
        for cls in vars(module).values():
            if inspect.isclass(cls) and issubclass(cls, base) and cls.__module__ == module.__name__:
                found[f"{stem}.{cls.__name__}"] = cls
    return found


@pytest.mark.parametrize("folder, base, table", [
    ("filters", BaseHostFilter, registry.FILTERS),
    ("weighers", BaseWeigher, registry.WEIGHERS),
], ids=["filters", "weighers"])
def test_every_class_of_the_package_is_registered(folder, base, table):
    """A filter file without its registry line would be dead code that a request cannot name.
    (Shared bases that no request names, such as ResourceFilter, carry no name.)"""
    unregistered = [qualified for qualified, cls in _classes(folder, base).items()
                    if cls.name and table.get(cls.name) is not cls]
    assert unregistered == []
    assert set(table.values()) <= set(_classes(folder, base).values())


@pytest.mark.parametrize("folder", ["filters", "weighers"])
def test_no_class_writes_its_name_or_multiplier_option_as_text(folder):
    """A name or multiplier option written as a string in a class would be a second
    declaration, free to drift from names.py."""
    written = []
    for stem in _modules(folder):
        tree = ast.parse((SCHEDULER / folder / f"{stem}.py").read_text())
        for node in ast.walk(tree):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)
                    and any(isinstance(target, ast.Name) and target.id in ("name", "multiplier_option")
                            for target in node.targets)):
                written.append(f"{stem}.py:{node.lineno}")
    assert written == []


def test_the_defaults_are_declared():
    assert set(request_spec.DEFAULT_FILTERS) <= set(names.FILTER_NAMES)
    assert request_spec.DEFAULT_WEIGHERS == list(names.WEIGHER_MULTIPLIER_OPTIONS)
