"""Every dict or list option of every action also takes a JSON string (what an AWX survey gives) and
then behaves as the dict or list itself (plugin_utils/_argspec.decode_json_options, which
BerthAction.run applies before Ansible validates the arguments)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.plugin_utils._argspec import TEXT_OPTIONS, decode_json_options

REPO = Path(__file__).resolve().parents[4]
COLLECTION = "ansible_collections.berth.fleet.plugins"
# What each structured option is given in the cases below: the shapes the launch documents.
VALUES = {
    "networks": [{"type": "network", "name": "default"}, {"type": "user"}],
    "metadata": {"team": "blue", "tier": 2},
    "server_group": {"name": "web", "policy": "anti-affinity"},
    "scheduler_hints": {"different_host": ["uuid-1"], "query": "[\">=\", \"$free_ram_mb\", 1024]"},
    "flavor": {"name": "custom", "vcpus": 2, "memory_mb": 1024, "root_gb": 5},
    "image": {"name": "debian-12.qcow2", "properties": {"hw_architecture": "x86_64"}},
    "graphics": {"type": "vnc", "listen": "10.0.0.5"},
    "boot": {"kernel": "/boot/vmlinuz", "cmdline": "console=ttyS0"},
    "image_properties": {"hw_architecture": "x86_64"},
}


def structured_options():
    """(action, option, spec entry) for every dict, list and structured raw option of every action."""
    found = []
    for path in sorted((REPO / "plugins" / "action").glob("*.py")):
        spec = importlib.import_module(f"{COLLECTION}.action.{path.stem}").ActionModule.ARGUMENT_SPEC
        found += [(path.stem, option, entry) for option, entry in spec.items()
                  if entry["type"] in ("dict", "list", "raw") and option not in TEXT_OPTIONS]
    return found


OPTIONS = structured_options()


def value_for(option, entry):
    if option in VALUES:
        return VALUES[option]
    if entry["type"] == "dict":
        return {"key": "value"}
    if entry.get("elements") == "dict":
        return [{"host": "hv1"}]
    return ["hv1", "hv2"]


def validated(spec, args):
    result = ArgumentSpecValidator(spec).validate(args)
    return result.validated_parameters, [str(error) for error in result.errors]


def test_the_launch_options_a_survey_passes_are_all_covered():
    server = {option for action, option, _entry in OPTIONS if action == "server"}
    assert {"networks", "metadata", "server_group", "scheduler_hints", "flavor", "image", "force_hosts",
            "ignore_hosts", "graphics", "boot"} <= server


@pytest.mark.parametrize("action, option, entry", OPTIONS, ids=[f"{a}.{o}" for a, o, _e in OPTIONS])
def test_a_json_string_behaves_as_the_value_itself(action, option, entry):
    spec = importlib.import_module(f"{COLLECTION}.action.{action}").ActionModule.ARGUMENT_SPEC
    value = value_for(option, entry)
    as_text = json.dumps(value, indent=1 if isinstance(value, dict) else None)
    decoded = decode_json_options({option: as_text}, spec)
    assert decoded == {option: value}
    # Validated as Ansible validates the task: the same parameters, the same errors (a list option
    # with suboptions may refuse the sample: it must refuse the text the same way).
    assert validated(spec, decoded) == validated(spec, {option: value})


def test_without_decoding_ansible_would_split_a_json_list_at_its_commas():
    # Why the decoding comes before validation: the survey's text would reach the launch mangled.
    spec = {"force_hosts": {"type": "list", "elements": "str"}}
    params, errors = validated(spec, {"force_hosts": '["hv1", "hv2"]'})
    assert not errors and params["force_hosts"] != ["hv1", "hv2"]
    assert decode_json_options({"force_hosts": ' ["hv1", "hv2"]'}, spec) == {"force_hosts": ["hv1", "hv2"]}


@pytest.mark.parametrize("option, text", [
    ("flavor", "m1.small"),            # a flavor name
    ("image", "debian-12.qcow2"),      # a volume name
    ("server_group", "web"),           # a ledger group's name
    ("force_hosts", "hv1,hv2"),        # Ansible's own comma-separated list
    ("scheduler_hints", "query=x"),    # Ansible's own key=value dict
    ("user_data", '{"not": "decoded"}'),  # text, whatever it starts with
    ("count", "3"),                    # not a structured option
], ids=["flavor-name", "image-name", "group-name", "comma-list", "key-value-dict", "user-data", "int"])
def test_other_strings_are_left_to_the_option(option, text):
    spec = importlib.import_module(f"{COLLECTION}.action.server").ActionModule.ARGUMENT_SPEC
    assert decode_json_options({option: text}, spec) == {option: text}


@pytest.mark.parametrize("option", ["networks", "metadata", "server_group", "scheduler_hints", "flavor", "force_hosts"])
def test_a_blank_string_is_no_value_so_the_default_applies(option):
    # An optional survey answer left empty.
    spec = importlib.import_module(f"{COLLECTION}.action.server").ActionModule.ARGUMENT_SPEC
    assert decode_json_options({option: "  ", "user_data": ""}, spec) == {"user_data": ""}


@pytest.mark.parametrize("option, text", [
    ("networks", '[{"type": "user"}'),
    ("metadata", "{team: blue}"),
    ("scheduler_hints", '{"same_host": ["a",]}'),
], ids=["unclosed-list", "unquoted-keys", "trailing-comma"])
def test_bad_json_is_an_input_error_naming_the_field(option, text):
    spec = importlib.import_module(f"{COLLECTION}.action.server").ActionModule.ARGUMENT_SPEC
    with pytest.raises(InputError, match=rf"^{option} is not JSON \(.*\): give a JSON ") as error:
        decode_json_options({option: text}, spec)
    assert error.value.field == option


# ---- nesting: decoded through the bounded loader (module_utils/limits.py) ---------------------

def _lists(depth):
    return "[" * depth + "]" * depth


def _objects(depth):
    return '{"k": ' * (depth - 1) + "{}" + "}" * (depth - 1)


def _mixed(depth, outermost="{"):
    """Objects and lists in turn, ``outermost`` first, around a string whose brackets (and those
    of the other strings) do not count."""
    opening, closing = [], []
    for level in range(depth):
        if (level % 2 == 0) == (outermost == "["):
            opening.append('["x", ')
            closing.append("]")
        else:
            opening.append('{"b": "}]", "k": ')
            closing.append("}")
    return "".join(opening) + '"[{"' + "".join(reversed(closing))


NESTINGS = [("image", _objects), ("networks", _lists), ("scheduler_hints", _mixed),
            ("networks", lambda depth: _mixed(depth, "["))]


@pytest.mark.parametrize("option, nested", NESTINGS, ids=["objects", "lists", "mixed-object", "mixed-list"])
def test_json_text_at_the_nesting_limit_is_decoded_and_one_level_more_is_a_field_error(option, nested):
    spec = importlib.import_module(f"{COLLECTION}.action.server").ActionModule.ARGUMENT_SPEC
    limit = limits.NESTING_DEPTH.maximum
    at_limit = nested(limit)
    assert decode_json_options({option: at_limit}, spec) == {option: json.loads(at_limit)}
    limits.check_nesting(option, json.loads(at_limit))  # the depth the loader counts is the decoded one
    with pytest.raises(InputError) as error:
        decode_json_options({option: nested(limit + 1)}, spec)
    assert error.value.field == option
    assert str(error.value) == f"{option}: nests deeper than the limit of {limits.NESTING_DEPTH.describe()}"
    with pytest.raises(InputError):
        limits.check_nesting(option, json.loads(nested(limit + 1)))


@pytest.mark.parametrize("text", [_lists(30000), _objects(30000), "[" * 30000, _mixed(10000)],
                         ids=["lists", "objects", "unclosed", "mixed"])
def test_a_survey_s_answer_nested_past_python_s_stack_is_a_field_error_not_a_recursion_error(text):
    """The issue's 30,000 brackets: 60 KB, inside a survey's 65,536 characters."""
    spec = importlib.import_module(f"{COLLECTION}.action.server").ActionModule.ARGUMENT_SPEC
    with pytest.raises(InputError) as error:
        decode_json_options({"image": text}, spec)
    assert error.value.field == "image" and "nests deeper" in str(error.value)
