"""berth.fleet.host_rule's options made into a rule (action/host_rule.rule_option): each bad
one refused naming the option, before the ledger is opened."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.action.host_rule import ActionModule, rule_option
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_rules import HostRule


def options(**given):
    defaults = {key: None for key in ActionModule.ARGUMENT_SPEC}
    return {**defaults, "state": "present", "name": "r", "kind": "must", "aggregate": "ssd", **given}


def test_the_options_make_the_rule():
    assert rule_option(options(instance_label="db")) == HostRule("r", "must", "ssd", instance_label="db")
    assert rule_option(options(kind="should", weight=2, instance_name="web-*")).weight == 2.0


@pytest.mark.parametrize("given, field", [
    ({"kind": None, "instance_label": "db"}, "kind"),
    ({"aggregate": None, "instance_label": "db"}, "aggregate"),
    ({}, "instance_name"),
    ({"weight": 2.0, "instance_label": "db"}, "weight"),
    ({"kind": "should", "weight": -1.0, "instance_label": "db"}, "weight"),
    ({"instance_label": "Not a label"}, "instance_label"),
    ({"instance_name": "x" * 300}, "instance_name"),
], ids=["no-kind", "no-aggregate", "no-selector", "weight-on-hard", "negative-weight", "bad-label", "long-pattern"])
def test_a_bad_option_is_refused_naming_it(given, field):
    with pytest.raises(InputError) as caught:
        rule_option(options(**given))
    assert caught.value.field == field
