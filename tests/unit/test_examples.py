"""The shipped example inventory source is valid as written."""

from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.berth.fleet.plugins.module_utils.host_facts import (
    connection_uri,
    host_aggregates,
    validate_aggregates,
    validate_hypervisors,
)

REPO = Path(__file__).resolve().parents[2]


def test_awx_example_source_is_valid():
    source = yaml.safe_load((REPO / "examples" / "awx" / "fleet.berth.yml").read_text())
    assert source["plugin"] == "berth.fleet.hypervisors"
    hypervisors = validate_hypervisors(source["hypervisors"], source["uri_template"])
    aggregates = validate_aggregates(source["aggregates"], hypervisors)
    assert hypervisors["kvm01"]["uri"] == "qemu+ssh://kvm01.example.com/system"
    assert connection_uri("kvm04", hypervisors["kvm04"]["uri"], ssh_user="berth", ssh_keyfile="/run/key") == (
        "qemu+ssh://berth@kvm04.mgmt.example.com/system?keyfile=/run/key&no_tty=1")
    assert host_aggregates("kvm04", aggregates)[1] == "az2"
    assert [agg["name"] for agg in host_aggregates("kvm02", aggregates)[0]] == ["rack_a", "ssd"]


def test_awx_launch_survey_asks_for_launch_options_and_its_defaults_validate():
    import json

    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    from ansible_collections.berth.fleet.plugins.action.server import ActionModule
    from ansible_collections.berth.fleet.plugins.plugin_utils._argspec import decode_json_options

    survey = json.loads((REPO / "examples" / "awx" / "launch-survey.json").read_text())
    spec = ActionModule.ARGUMENT_SPEC
    questions = {question["variable"]: question for question in survey["spec"]}
    # launch.yml takes server_name as the server's name; every other answer is an option of its name.
    assert questions["server_name"]["required"] and set(questions) - {"server_name"} <= set(spec)
    # What AWX passes: every answer as given (a blank optional one as ""), the JSON ones as text.
    answers = {variable: question["default"] for variable, question in questions.items()}
    answers["name"] = answers.pop("server_name") or "web"
    args = decode_json_options(answers, spec)
    assert args["networks"] == [{"type": "network", "name": "default"}] and args["metadata"] == {}
    assert "server_group" not in args and args["user_data"] == ""
    result = ArgumentSpecValidator(spec).validate(args)
    assert not result.error_messages, result.error_messages


def test_the_awx_launch_survey_asks_for_requester_options_only():
    """A survey's answers are a requester's: an operator setting there would be ignored with a
    warning, and its question would mislead (docs/docsite/rst/awx.rst)."""
    import json

    from ansible_collections.berth.fleet.plugins.plugin_utils.settings import REQUESTER_OPTIONS

    survey = json.loads((REPO / "examples" / "awx" / "launch-survey.json").read_text())
    # launch.yml takes server_name as the instances' name.
    variables = {"name" if question["variable"] == "server_name" else question["variable"]
                 for question in survey["spec"]}
    assert variables <= set(REQUESTER_OPTIONS), variables - set(REQUESTER_OPTIONS)
