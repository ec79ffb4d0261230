"""The actions' argument specs come from their modules' DOCUMENTATION (plugin_utils/_argspec.py):
the examples validate, every documented option reaches the action and the action reads no
other, the ledger group lists every module with ledger_url, and the documented choices and
defaults are the engine's own."""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils._documented_spec import NO_LOG_OPTIONS
from ansible_collections.berth.fleet.plugins.module_utils._guest import GUEST_OPTION_NAMES, Guest
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
    DEFAULT_PROJECT_ID,
    DRIVERS,
    ENGINES,
    EXPLAIN_MODES,
    RequestSpec,
)
from ansible_collections.berth.fleet.plugins.plugin_utils import _argspec
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import DEFAULT_SERVICE_DOWN_TIME_S, SOURCES
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import DEFAULT_LEASE_S, POLICIES
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import SCHEDULER_SETTINGS, Settings

REPO = Path(__file__).resolve().parents[4]
ACTIONS = sorted(path.stem for path in (REPO / "plugins" / "action").glob("*.py"))
COLLECTION = "ansible_collections.berth.fleet.plugins"
# Where a value is a template in an example, something of the option's type stands in for it.
_STAND_INS = {"int": 1, "float": 1.0, "bool": True, "list": [], "dict": {}, "raw": "x", "str": "x", "path": "/x"}


def action(name):
    return importlib.import_module(f"{COLLECTION}.action.{name}").ActionModule


def documentation(name):
    return _argspec.module_documentation(str(REPO / "plugins" / "modules" / f"{name}.py"))


def test_every_action_has_a_module_file_and_its_spec_is_the_documented_one():
    for name in ACTIONS:
        assert action(name).ARGUMENT_SPEC == _argspec.argument_spec(documentation(name)["options"]), name


def test_the_fragment_s_options_merge_under_the_module_s_own():
    spec = action("hypervisor").ARGUMENT_SPEC
    assert spec["ledger_url"] == {"type": "str", "no_log": True}


@pytest.mark.parametrize("name", ACTIONS)
def test_the_module_s_examples_validate_against_the_derived_spec(name):
    spec = action(name).ARGUMENT_SPEC
    examples = yaml.safe_load(importlib.import_module(f"{COLLECTION}.modules.{name}").EXAMPLES)
    tasks = [task for task in _tasks(examples) if f"berth.fleet.{name}" in task]
    assert tasks, f"{name} has no example of berth.fleet.{name}"
    for task in tasks:
        params = {key: _STAND_INS[spec[key]["type"]] if isinstance(value, str) and "{{" in value else value
                  for key, value in (task[f"berth.fleet.{name}"] or {}).items()}
        result = ArgumentSpecValidator(spec).validate(params)
        assert result.error_messages == [], (task["name"], result.error_messages)
        limits.check_options(result.validated_parameters)


def _tasks(entries):
    """The tasks of examples that are tasks or plays (with their blocks)."""
    for entry in entries:
        nested = [entry.get(key) or [] for key in ("tasks", "pre_tasks", "post_tasks", "block", "rescue", "always")]
        if any(nested):
            for tasks in nested:
                yield from _tasks(tasks)
        else:
            yield entry


def test_no_log_options_are_those_the_documentation_says_are_never_printed():
    for name in ACTIONS:
        for option, doc in documentation(name)["options"].items():
            text = " ".join(doc["description"]) if isinstance(doc["description"], list) else doc["description"]
            assert ("Never printed" in text) == (option in NO_LOG_OPTIONS), (name, option)


# ---- what each action reads from its arguments -------------------------------------------------

class _Asking(dict):
    """An empty mapping that remembers every key it is asked for."""

    def __init__(self):
        super().__init__()
        self.asked = set()

    def get(self, key, default=None):
        self.asked.add(key)
        return default

    def __getitem__(self, key):
        self.asked.add(key)
        raise KeyError(key)

    def __contains__(self, key):
        self.asked.add(key)
        return False


def _asked(reader):
    """The option names ``reader(mapping)`` asks its mapping for, found by calling it with one."""
    mapping = _Asking()
    reader(mapping)
    return frozenset(mapping.asked)


# The readers that take a task's arguments whole and read them by a table rather than by name in
# the code (the operator's settings by Settings' fields, the guest's hardware by GUEST_OPTIONS):
# each one's options are what it asks of them.
MAPPING_READERS = {Settings.from_args.__func__: _asked(Settings.from_args),
                   Guest.from_options.__func__: _asked(Guest.from_options)}


class _Reads(ast.NodeVisitor):
    """The option names a module's code reads from its arguments' mapping (``args`` in an
    action, a helper's first parameter): ``args["x"]`` (``strict``: fails if the option is
    missing), ``args.get("x")``, and either with a loop variable over a tuple of names (literal,
    or a constant of ``module``) or over the keys of a dict constant of ``module``; and the
    options of a MAPPING_READERS method of ``module``'s classes given the mapping
    (``Settings.from_args(args)``)."""

    def __init__(self, module, mapping="args"):
        self.module = module
        self.mapping = mapping
        self.strict, self.tolerant = set(), set()
        self.bound = {}

    def _names(self, node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.Name) and node.id in self.bound:
            return self.bound[node.id]
        return set()

    def _bind(self, target, iterable):
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Attribute) \
                and iterable.func.attr in ("items", "keys") and isinstance(iterable.func.value, ast.Name) \
                and isinstance(getattr(self.module, iterable.func.value.id, None), dict):
            if isinstance(target, ast.Tuple) and target.elts:
                target = target.elts[0]  # for key, value in CONSTANT.items()
            if isinstance(target, ast.Name):
                self.bound[target.id] = set(getattr(self.module, iterable.func.value.id))
            return
        if not isinstance(target, ast.Name):
            return
        if isinstance(iterable, (ast.Tuple, ast.List)):
            values = {elt.value for elt in iterable.elts if isinstance(elt, ast.Constant)}
        elif isinstance(iterable, ast.Name) and isinstance(getattr(self.module, iterable.id, None), tuple):
            values = set(getattr(self.module, iterable.id))
        else:
            return
        self.bound[target.id] = values

    def visit_For(self, node):
        self._bind(node.target, node.iter)
        self.generic_visit(node)

    def visit_comprehension(self, node):
        self._bind(node.target, node.iter)
        self.generic_visit(node)

    def _comprehension(self, node):
        for generator in node.generators:  # bind before the element is visited
            self.visit(generator)
        self.generic_visit(node)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def _is_mapping(self, node):
        """``args``, or an operation's ``self.args``."""
        return (isinstance(node, ast.Name) and node.id == self.mapping) or (
            self.mapping == "args" and isinstance(node, ast.Attribute) and node.attr == "args"
            and isinstance(node.value, ast.Name) and node.value.id == "self")

    def visit_Subscript(self, node):
        if self._is_mapping(node.value):
            # A name written out must be there; one looped over is mostly guarded by a .get().
            (self.strict if isinstance(node.slice, ast.Constant) else self.tolerant).update(self._names(node.slice))
        self.generic_visit(node)

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get" and isinstance(func.value, ast.Name) \
                and func.value.id == self.mapping and node.args:
            self.tolerant |= self._names(node.args[0])
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and node.args \
                and self._is_mapping(node.args[0]):
            method = getattr(getattr(self.module, func.value.id, None), func.attr, None)
            self.tolerant |= MAPPING_READERS.get(getattr(method, "__func__", None), frozenset())
        # The task's own arguments before validation (self._task.args.get("from_vars")).
        if isinstance(func, ast.Attribute) and func.attr == "get" and isinstance(func.value, ast.Attribute) \
                and func.value.attr == "args" and node.args:
            self.tolerant |= self._names(node.args[0])
        self.generic_visit(node)


def _functions(tree):
    """Functions by name, and classes (an operation given the action's arguments as ``args``)."""
    return {node.name: node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


@functools.lru_cache(maxsize=None)
def _parsed(path):
    tree = ast.parse(Path(path).read_text())
    return tree, _functions(tree)


def _helper_imports(tree):
    return [(node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            and node.module.startswith((f"{COLLECTION}.plugin_utils.", f"{COLLECTION}.module_utils."))
            for alias in node.names]


def reads(name):
    """(strict, all) option names the action ``name`` reads, in its own file and in the helper
    functions of plugin_utils it calls with its arguments (followed within their module). Only
    the action's own reads count as strict: a helper is called with arguments the action made."""
    module = importlib.import_module(f"{COLLECTION}.action.{name}")
    tree = ast.parse(Path(module.__file__).read_text())
    found = _Reads(module)
    found.visit(tree)
    strict, tolerant = set(found.strict), set(found.tolerant)
    helpers = _helper_imports(tree)
    seen = set()
    while helpers:
        module_name, function = helpers.pop()
        if (module_name, function) in seen:
            continue
        seen.add((module_name, function))
        helper = importlib.import_module(module_name)
        helper_tree, functions = _parsed(helper.__file__)
        if function not in functions:
            continue
        if isinstance(functions[function], ast.ClassDef):
            parameters = ["args"]  # an operation: its methods read the arguments as ``args``
            helpers += _helper_imports(helper_tree)  # and hand them to the helpers its module imports
        elif not functions[function].args.args:
            continue
        else:
            parameters = [arg.arg for arg in functions[function].args.args]
        # A helper given the action's arguments takes them as ``args``, or as its first parameter.
        visitor = _Reads(helper, "args" if "args" in parameters else parameters[0])
        visitor.visit(functions[function])
        tolerant |= visitor.strict | visitor.tolerant
        imported = {name: module for module, name in _helper_imports(helper_tree)}
        called = [call.func.id for call in ast.walk(functions[function])
                  if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)]
        helpers += [(module_name, name) for name in called if name in functions]
        helpers += [(imported[name], name) for name in called if name in imported]
    return strict, strict | tolerant


@pytest.mark.parametrize("name", ACTIONS)
def test_every_documented_option_is_read_and_every_option_read_is_documented(name):
    options = documentation(name)["options"]
    documented = set(options)
    strict, read = reads(name)
    # migrate and resize keep the ledger option of their siblings, documented as unused: only
    # Settings.from_args, which takes every operator setting a task has, may read it.
    unused = {option for option, doc in options.items() if str(doc["description"]).startswith("Unused")}
    assert documented - read == unused - MAPPING_READERS[Settings.from_args.__func__], "documented but never read"
    assert strict - documented == set(), "read but not documented"


def test_the_reader_finds_reads_through_helpers_loops_and_tables():
    strict, read = reads("capacity")
    assert {"ledger", "ledger_url", "flavor"} <= strict
    assert {"hosts", "server_group", "scheduler_hints"} <= read - strict
    # The operator's settings, through Settings.from_args: its fields and the scheduler's settings.
    assert {"flavors_file", "source", "enabled_filters", "ram_weight_multiplier"} <= read - strict
    settings = MAPPING_READERS[Settings.from_args.__func__]
    assert set(SCHEDULER_SETTINGS) <= settings
    assert {field.name for field in dataclasses.fields(Settings)} - {"scheduler"} <= settings
    # The guest's hardware, through check_request's Guest.from_options: the GUEST_OPTIONS table.
    assert MAPPING_READERS[Guest.from_options.__func__] == set(GUEST_OPTION_NAMES)
    assert set(GUEST_OPTION_NAMES) <= reads("instance_request")[1]


# ---- the ledger group, and the documentation against the engine --------------------------------

def test_the_ledger_action_group_lists_every_module_that_takes_ledger_url():
    runtime = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())
    with_ledger = {name for name in ACTIONS if "ledger_url" in action(name).ARGUMENT_SPEC}
    assert set(runtime["action_groups"]["ledger"]) == with_ledger
    assert len(runtime["action_groups"]["ledger"]) == len(with_ledger)


def test_documented_choices_are_the_code_s():
    schedule = action("schedule").ARGUMENT_SPEC
    assert schedule["driver"]["choices"] == list(DRIVERS)
    assert schedule["engine"]["choices"] == list(ENGINES)
    assert schedule["explain"]["choices"] == list(EXPLAIN_MODES)
    for name in ("schedule", "capacity", "migrate"):
        assert action(name).ARGUMENT_SPEC["source"]["choices"] == list(SOURCES)
    assert action("server_group").ARGUMENT_SPEC["policy"]["choices"] == list(POLICIES)


def test_documented_defaults_are_the_engine_s_and_the_ledger_s():
    engine = {field.name: field.default if field.default is not dataclasses.MISSING else field.default_factory()
              for field in dataclasses.fields(RequestSpec) if field.name != "flavor" and field.init}
    engine["enabled_filters"] = engine["weighers"] = None  # the module leaves them to the engine
    for name in ("schedule", "capacity"):
        spec = action(name).ARGUMENT_SPEC
        # Every option the engine's RequestSpec takes under its own name (Nova's).
        for option in set(spec) & set(engine):
            assert spec[option].get("default") == engine[option], (name, option)
    # The scheduler's settings, in every module that takes them (a launch's, a move's).
    for name in ACTIONS:
        spec = action(name).ARGUMENT_SPEC
        for option in set(spec) & set(SCHEDULER_SETTINGS) & set(engine):
            assert spec[option].get("default") == engine[option], (name, option)
    for name in ("schedule", "capacity", "migrate", "tracker_sync"):
        assert action(name).ARGUMENT_SPEC["service_down_time"]["default"] == DEFAULT_SERVICE_DOWN_TIME_S
    for name in ("schedule", "instance"):
        assert action(name).ARGUMENT_SPEC["lease_seconds"]["default"] == DEFAULT_LEASE_S


def test_the_operator_s_settings_default_as_every_module_documents_them():
    """An operation reads every operator setting from Settings, whose default stands for a setting
    its module does not take: it must be the default each module that takes it documents."""
    defaults = Settings()
    for name in ACTIONS:
        spec = action(name).ARGUMENT_SPEC
        documented = Settings.from_args({option: spec[option].get("default") for option in spec})
        for field in dataclasses.fields(Settings):
            if spec.get(field.name, {}).get("default") is None:
                continue
            said, meant = getattr(documented, field.name), getattr(defaults, field.name)
            if field.name == "project_id":
                # None: the default project (check_request and scheduling_request say so).
                meant = meant or DEFAULT_PROJECT_ID
            assert said == meant, (name, field.name)


def test_modules_with_a_bounded_option_or_a_flavor_show_the_limits():
    bounded = set(limits.OPTION_LIMITS) | {"flavor"}
    for name in ACTIONS:
        takes = bounded & set(action(name).ARGUMENT_SPEC)
        fragments = documentation(name).get("extends_documentation_fragment") or []
        assert bool(takes) == ("berth.fleet.limits" in fragments), (name, takes)


def test_the_shipped_flavors_are_within_the_limits():
    flavors = yaml.safe_load((REPO / "playbooks" / "vars" / "flavors.yml").read_text())["berth_flavors"]
    assert flavors
    for name, sizes in flavors.items():
        # The flavor a launch takes is the file's, size for size, and each size within its limit.
        assert Flavor.from_dict(sizes, name=name).to_dict() == {"name": name, **sizes, "extra_specs": {}}
        for key, size in sizes.items():
            assert limits.FLAVOR_SIZES[key].minimum <= size <= limits.FLAVOR_SIZES[key].maximum, (name, key)
