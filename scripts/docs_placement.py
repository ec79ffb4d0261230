#!/usr/bin/env python3
"""Writes docs/docsite/rst/placement.rst, the guide to every placement filter and weigher.

Nothing in it is written by hand, so it cannot drift from the code: the filters and weighers
and their order come from the engine's registry (plugins/module_utils/scheduler/registry.py),
what each one does from its class (docstring, defaults, multiplier, whether it runs once per
request) and from berth.fleet.schedule's DOCUMENTATION with its fragments (the items of
``enabled_filters`` and ``weighers`` that name it, and the options they read, with their types and defaults).
tests/unit/test_docs.py fails when the committed page differs from what this writes.

    .venv/bin/python scripts/docs_placement.py          # rewrite the page
    .venv/bin/python scripts/docs_placement.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path

import yaml
from antsibull_docs_parser import dom, parser, rst

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "docsite" / "rst" / "placement.rst"
SCHEDULE = REPO / "plugins" / "modules" / "schedule.py"
MODULE = "berth.fleet.schedule"

# An item of the module's filter or weigher list describes the plugins it names before its
# first " - ": "C(RamFilter), C(CoreFilter), C(DiskFilter) - Nova's Newton formulas ...".
_ITEM_HEAD = re.compile(r"^((?:C\([A-Za-z]+\)(?:, | and )?)+)(?: \([^)]*\))? - ")
_NAMES = re.compile(r"C\(([A-Za-z]+)\)")
# O(name) and O(name=value), option references of the module itself, plain or qualified (the
# fragment berth.fleet.scheduler, which other modules extend too, names schedule's request options
# as O(berth.fleet.schedule#module:name)).
_OPTION_REFERENCE = re.compile(r"O\((?:berth\.fleet\.schedule#module:)?([a-z0-9_]+)(?:=[^)]*)?\)")


def _import(name: str):
    """A module of the collection, through the link scripts/setup makes in .cache/collections."""
    sys.path.insert(0, str(REPO / ".cache" / "collections"))
    return importlib.import_module(f"ansible_collections.berth.fleet.plugins.{name}")


def _registry():
    return _import("module_utils.scheduler.registry")


def _documentation() -> dict:
    """berth.fleet.schedule's DOCUMENTATION with its fragments (the scheduler's settings are
    berth.fleet.scheduler's), as ansible-doc shows it."""
    return _import("plugin_utils._argspec").module_documentation(str(SCHEDULE))


def _markup(text: str) -> str:
    """Ansible markup (C(), O(), V(), M() ...) as the RST the antsibull Sphinx extension reads."""
    context = parser.Context(current_plugin=dom.PluginIdentifier(fqcn=MODULE, type="module"))
    return rst.to_rst(parser.parse(text, context), current_plugin=context.current_plugin)


def _plain(text: str) -> str:
    """A docstring paragraph as RST text: joined lines, RST's inline markup characters escaped."""
    text = " ".join(text.split())
    return re.sub(r"([\\*`|_])", r"\\\1", text)


def _summary(cls) -> str:
    return _plain((cls.__doc__ or "").strip().split("\n\n")[0])


def _items_by_name(items: list[str]) -> tuple[dict[str, str], list[str]]:
    """The module's list items keyed by each plugin they describe, and the general ones."""
    described: dict[str, str] = {}
    general = []
    for item in items:
        head = _ITEM_HEAD.match(item)
        if head is None:
            general.append(item)
            continue
        for name in _NAMES.findall(head.group(1)):
            described[name] = item
    return described, general


def _default(option: dict) -> str:
    if "default" not in option:
        return ""
    value = option["default"]
    shown = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
    return f", default :ansval:`{_plain(shown)}`"


def _option_lines(names: list[str], options: dict, overrides: dict[str, str]) -> list[str]:
    lines = []
    for name in names:
        if name not in options:
            raise SystemExit(f"{SCHEDULE}: the engine reads the option {name!r}, which "
                             "DOCUMENTATION does not describe")
        option = options[name]
        default = overrides.get(name, _default(option))
        lines.append(f"  - :ansopt:`{MODULE}#module:{_plain(name)}` ({option['type']}{default})")
    return lines


def _referenced_options(item: str, options: dict) -> list[str]:
    found = []
    for name in _OPTION_REFERENCE.findall(item):
        if name in options and name not in found:
            found.append(name)
    return found


def _section(title: str, underline: str) -> list[str]:
    return [title, underline * len(title), ""]


def render() -> str:
    registry = _registry()
    request_spec = _import("module_utils.scheduler.request_spec")
    documentation = _documentation()
    options = documentation["options"]
    filter_items, filter_general = _items_by_name(options["enabled_filters"]["description"])
    weigher_items, weigher_general = _items_by_name(options["weighers"]["description"])
    missing = ([name for name in registry.FILTERS if name not in filter_items]
               + [name for name in registry.WEIGHERS if name not in weigher_items])
    unknown = [name for name in list(filter_items) + list(weigher_items)
               if name not in registry.FILTERS and name not in registry.WEIGHERS]
    if missing or unknown:
        raise SystemExit(f"{SCHEDULE}: DOCUMENTATION describes no item for {missing}, "
                         f"and items for {unknown} that the registry does not have")

    out = [
        ".. Generated by scripts/docs_placement.py from the engine's registry and",
        "   berth.fleet.schedule's DOCUMENTATION; do not edit (tests/unit/test_docs.py checks it).",
        "",
        ".. _ansible_collections.berth.fleet.docsite.placement:",
        "",
        *_section("Placement: every filter and weigher", "="),
        "A launch decides where each instance goes as Nova's FilterScheduler does: the enabled",
        "filters remove the hosts that cannot take it, the weighers score the rest, and the best",
        "host is taken and its resources consumed before the next instance is placed. This page",
        "lists every filter and weigher the engine has, in the order of its registry, with the",
        f"options of :ref:`{MODULE} <ansible_collections.{MODULE}_module>` each one reads.",
        "In a launch the filter list is the inventory variable ``berth_enabled_filters`` and",
        "the weigher list ``berth_weighers``; the other options are the module's.",
        "",
        *_section("Filters", "-"),
    ]
    out += [f"- {_markup(item)}" for item in filter_general] + [""]
    for name, cls in registry.FILTERS.items():
        instance = cls()
        referenced = _referenced_options(filter_items[name], options)
        for number in getattr(cls, "host_numbers", {}).values():
            if number.option and number.option not in referenced:
                referenced.append(number.option)
        out += _section(name, "^")
        out += [_summary(cls), "", _markup(filter_items[name]), ""]
        out.append(f"- Enabled by default: {'yes' if name in request_spec.DEFAULT_FILTERS else 'no'}.")
        out.append("- Checks: " + ("the first instance of a request only (host facts that cannot "
                                   "change between its instances)." if instance.run_filter_once_per_request
                                   else "every instance of a request."))
        if referenced:
            out += ["- Options:", "", *_option_lines(referenced, options, {}), ""]
        out.append("")
    out += _section("Weighers", "-")
    out += [f"- {_markup(item)}" for item in weigher_general] + [""]
    for name, cls in registry.WEIGHERS.items():
        referenced = [cls.multiplier_option] + [
            option for option in _referenced_options(weigher_items[name], options)
            if option != cls.multiplier_option]
        multiplier_default = f", default :ansval:`{cls.default_multiplier}`"
        out += _section(name, "^")
        out += [_summary(cls), "", _markup(weigher_items[name]), ""]
        bound = ("from a fixed lower bound of 0" if cls.minval == 0 else
                 "min-max over the candidates" if cls.minval is None else
                 f"from a fixed lower bound of {cls.minval}")
        out.append(f"- Normalised {bound}.")
        if cls.multiplier_sign != 1:
            out.append("- The multiplier is negated before use, as Nova does for this weigher.")
        out += ["- Options (the first is its multiplier, which an aggregate's metadata of the "
                "same name overrides for its hosts):", "",
                *_option_lines(referenced, options, {cls.multiplier_option: multiplier_default}), "", ""]
    return "\n".join(out).rstrip() + "\n"


def main() -> int:
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--check", action="store_true", help="fail if the page is out of date")
    check = arguments.parse_args().check
    page = render()
    if check:
        if PAGE.read_text() != page:
            print(f"{PAGE.relative_to(REPO)} is out of date: run .venv/bin/python "
                  "scripts/docs_placement.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
