"""The operator's device configuration (pci_alias, enabled_mdev_types) picks which host devices a
guest may get: it reaches a request from the operator's berth_* settings and the run's own task
arguments, never from a requester's variable or the ledger's copy of a launch's request."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.action.server import ActionModule as ServerAction
from ansible_collections.berth.fleet.plugins.module_utils.request import Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import SchedulerInputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import move_request, spec_options
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import check_request
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

OPERATOR = [{"name": "nic", "vendor_id": "8086", "product_id": "154c", "device_type": "type-VF"}]
# What a requester (or a row another controller wrote) would like: the host's disk controller.
HOSTILE = [{"name": "nic", "vendor_id": "1000", "product_id": "0097"}]
FLAVOR = Flavor(name="nic1", vcpus=1, memory_mb=512, root_gb=1, extra_specs={"pci_passthrough:alias": "nic:1"})


class _Templar:
    def template(self, value):
        return value


class _Task:
    args = {"from_vars": True}


def from_vars(task_vars):
    """The options a launch (launch.yml's task) takes from ``task_vars``, and the warnings."""
    action = object.__new__(ServerAction)
    action._templar, action._task = _Templar(), _Task()
    return action._gather_arguments(task_vars)


def test_a_launch_takes_the_aliases_from_the_operator_settings_only():
    found, warnings = from_vars({"pci_alias": HOSTILE, "enabled_mdev_types": ["x"], "berth_pci_alias": OPERATOR,
                                 "flavor": "m1.tiny"})
    assert found["pci_alias"] == OPERATOR and "enabled_mdev_types" not in found
    assert [warning.split(":")[0] for warning in warnings] == [
        "the play variable pci_alias is ignored", "the play variable enabled_mdev_types is ignored"]
    # Other options still come from the launch's own variables first.
    assert found["flavor"] == "m1.tiny"
    assert "pci_alias" not in from_vars({"pci_alias": HOSTILE})[0]


def test_the_aliases_reach_the_request_but_not_the_instance_record():
    settings = Settings.from_args({"pci_alias": OPERATOR, "enabled_mdev_types": ["nvidia-35"], "project_id": "team-a"})
    request = check_request({"flavor": FLAVOR.to_dict()}, settings)
    options = spec_options(request, settings)
    assert options["pci_alias"] == OPERATOR and options["enabled_mdev_types"] == ["nvidia-35"]
    recorded = request.to_record()
    assert "pci_alias" not in recorded and "enabled_mdev_types" not in recorded
    assert recorded["project_id"] == "team-a"


# An instance's recorded request holding aliases of its own (a row another controller wrote), as
# the typed record (schema 2) and as the record before it (schema 1, with its build record).
RECORDS = {
    "schema-2": {**Request(flavor=FLAVOR, project_id="team-a").to_record(), "pci_alias": HOSTILE},
    "schema-1": {"flavor": FLAVOR.to_dict(), "pci_alias": HOSTILE, "project_id": "team-a",
                 "build": {"metadata": {}, "networks": [], "boot": {}, "guest": {}, "seed": False,
                           "domain_type": ""}},
}


@pytest.mark.parametrize("record", RECORDS.values(), ids=RECORDS.keys())
def test_a_move_uses_the_run_s_aliases_never_the_ledger_s(record):
    instance = {"request": record}
    spec, unknown = move_request(instance, FLAVOR, Settings(pci_alias=tuple(OPERATOR)), ["hv1"], None)
    assert unknown is None and spec.project_id == "team-a"
    assert spec.pci_alias[0]["vendor_id"] == "8086" and spec.pci.devices[0].specs == (("8086", "154c", "type-VF"),)
    with pytest.raises(SchedulerInputError) as caught:
        move_request(instance, FLAVOR, Settings(), ["hv1"], None)
    assert caught.value.field == "flavor.extra_specs.pci_passthrough:alias"
