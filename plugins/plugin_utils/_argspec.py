"""An action's argument spec, derived from its module's DOCUMENTATION, so that what ansible-doc
says a module takes and what the action accepts cannot differ. Private to the collection.

Berth's modules are action plugins (plugins/action/NAME.py) whose documentation lives in a
module file of the same name (plugins/modules/NAME.py). ``module_argument_spec`` reads that
file's DOCUMENTATION (with its berth.fleet doc fragments), as ansible-doc does, and turns each
option into what Ansible's ArgumentSpecValidator takes with module_utils/_documented_spec.py's
converter (which hypervisor_facts, a module that runs on the hypervisor, uses there). It runs
once per action, when the action plugin is imported (Ansible's main process imports it before
forking the task's worker), so a task pays nothing.
"""

from __future__ import annotations

import ast
import importlib
import os
from typing import Any

import yaml

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils._documented_spec import argument_spec

_COLLECTION = "berth.fleet"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where PyYAML was built with it


def module_documentation(module_path: str) -> dict[str, Any]:
    """The DOCUMENTATION of a module file, its doc fragments' options merged in as ansible-doc
    merges them (the module's own keys win over a fragment's, option by option)."""
    with open(module_path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), module_path)
    text = next((node.value.value for node in tree.body if isinstance(node, ast.Assign)
                 and any(isinstance(target, ast.Name) and target.id == "DOCUMENTATION" for target in node.targets)),
                None)
    if not isinstance(text, str):
        raise ValueError(f"{module_path} has no DOCUMENTATION string")
    doc = yaml.load(text, Loader=_LOADER)
    options = doc.setdefault("options", {})
    for name in doc.get("extends_documentation_fragment") or []:
        for option, fragment_option in (fragment_documentation(name).get("options") or {}).items():
            options[option] = {**fragment_option, **options.get(option, {})}
    return doc


def fragment_documentation(name: str) -> dict[str, Any]:
    """The DOCUMENTATION of one of this collection's doc fragments (``berth.fleet.NAME``)."""
    collection, _dot, short = name.rpartition(".")
    if collection != _COLLECTION:
        raise ValueError(f"doc fragment {name} is not one of {_COLLECTION}'s")
    fragment = importlib.import_module(f"ansible_collections.berth.fleet.plugins.doc_fragments.{short}")
    return yaml.load(fragment.ModuleDocFragment.DOCUMENTATION, Loader=_LOADER) or {}


def module_argument_spec(action_path: str) -> dict[str, Any]:
    """The argument spec of the action plugin at ``action_path`` (plugins/action/NAME.py), from
    plugins/modules/NAME.py."""
    plugins = os.path.dirname(os.path.dirname(os.path.abspath(action_path)))
    module_path = os.path.join(plugins, "modules", os.path.basename(action_path))
    return argument_spec(module_documentation(module_path)["options"])


# Options of type raw that take text, never a structure: a cloud-config or script is passed as it is,
# whatever its first character.
TEXT_OPTIONS = frozenset({"user_data"})
_STRUCTURED_TYPES = ("dict", "list", "raw")


def decode_json_options(args: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """``args`` with each dict, list or structured raw option that is given as a JSON string (an
    AWX survey passes text only: ``{"type": "user"}``, ``[{"type": "user"}]``) decoded, so that
    it behaves as the dict or list; a blank string is no value at all (an optional survey answer
    left empty), so the option's default applies; other values unchanged. A string that does not
    start with ``{`` or ``[`` is left to the option itself: a flavor or image name, ``hv1,hv2`` for
    a list. Text that is not JSON, or nests deeper than limits.NESTING_DEPTH, is an InputError
    naming the option."""
    decoded = dict(args)
    for option, value in args.items():
        entry = spec.get(option)
        if entry is None or entry["type"] not in _STRUCTURED_TYPES or option in TEXT_OPTIONS \
                or not isinstance(value, str):
            continue
        if not value.strip():
            del decoded[option]
            continue
        if not value.lstrip().startswith(("{", "[")):
            continue
        # Through the bounded loader: 30,000 brackets fit in a survey's answer, and json.loads
        # recurses once per bracket.
        decoded[option] = limits.load_json(option, value, f"{_JSON_FORMS[entry['type']]}, or not as a string")
    return decoded


_JSON_FORMS = {"dict": 'a JSON object ({"key": "value"})', "list": 'a JSON list (["a", "b"])',
               "raw": 'a JSON object or list ({"key": "value"}, [{"key": "value"}])'}
