"""An instance is never named as a hypervisor (issue 34, item 3): berth.fleet.instances lists
instances as inventory hosts of their names, and beside a berth.fleet.hypervisors source an
instance hv-1 (a survey's server_name=hv) would give the hypervisor hv-1 its guest's address. A
launch refuses such a name, naming the hypervisor, before anything is claimed. Through the server
and schedule operations on a real SQLite ledger with fake hypervisors; the inventory's side is in
tests/unit/plugins/inventory/test_instances.py, both through ansible-playbook on the lab fleet in
tests/integration/test_hypervisor_named_instances_lab.py."""

from __future__ import annotations

import pytest
from fake_hypervisor import FakeHypervisor, connect_to, synced_state

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import DEFAULT_TEMPLATE
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import check_request
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.schedule import Schedule
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.server import Server
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

ARGS = {"count": 1, "state": "present", "shutdown_timeout": 60, "timeout": 30, "flavor": "m1.tiny"}


@pytest.fixture
def fleet(tmp_path):
    """The hypervisors hv-1 and HV-2 in a real SQLite ledger, and a fake hypervisor for each."""
    ledger = Ledger(f"sqlite:///{tmp_path}/ledger.sqlite3").open(create=True)
    ledger.sync_hypervisors([synced_state("hv-1", "uuid-1"), synced_state("HV-2", "uuid-2")])
    yield ledger, connect_to(FakeHypervisor("hv-1"), FakeHypervisor("HV-2"))
    ledger.close()


def launch(fleet, task_vars=None, **args):
    ledger, connect = fleet
    return Server({**ARGS, **args}, Settings(), ledger, task_vars or {}, DEFAULT_TEMPLATE, check_mode=False,
                  diff=False, connect=connect).run()


def nothing_claimed(ledger):
    return ledger.instances() == [] and ledger.claims() == [] and ledger.decisions() == []


@pytest.mark.parametrize(("args", "instance", "hypervisor"), [
    ({"name": "hv"}, "hv-1", "hv-1"),  # a survey's server_name=hv, count 1
    ({"name": "hv", "count": 2}, "hv-2", "HV-2"),  # in any case: HV-2's name read as DNS reads it
    ({"name": "hv-1", "count": None}, "hv-1", "hv-1"),  # one instance, named as it is
], ids=["indexed", "another-case", "unindexed"])
def test_a_launch_named_as_a_hypervisor_is_refused_naming_it_and_claims_nothing(fleet, args, instance, hypervisor):
    with pytest.raises(InputError) as refused:
        launch(fleet, **args)
    assert refused.value.field == "name"
    assert str(refused.value).startswith(f"instance name {instance} is refused: {hypervisor} is a hypervisor of "
                                         f"the fleet")
    assert nothing_claimed(fleet[0])


def test_a_hypervisor_of_the_play_s_inventory_counts_before_the_ledger_has_synced_it(fleet):
    # source=inventory: the play's hypervisors are the fleet, whether or not a sync recorded them.
    with pytest.raises(InputError, match="instance name web-1 is refused: web-1 is a hypervisor of the fleet"):
        launch(fleet, {"groups": {"hypervisors": ["web-1", "web-9"]}}, name="web")
    assert nothing_claimed(fleet[0])


def test_localhost_is_refused_as_an_instance_name(fleet):
    with pytest.raises(InputError, match="instance name localhost is refused: localhost is the controller itself"):
        launch(fleet, name="localhost", count=None)
    assert nothing_claimed(fleet[0])


def test_the_schedule_operation_refuses_them_too_and_other_names_launch(fleet):
    ledger, _connect = fleet
    request = check_request({"flavor": "m1.tiny"}, Settings())
    with pytest.raises(InputError, match="instance name hv-1 is refused: hv-1 is a hypervisor"):
        Schedule(request, Settings(), ["hv-1"], "hv", ledger, {}, check_mode=True).run()
    assert nothing_claimed(ledger)
    # A name beside theirs is no hypervisor's.
    result = launch(fleet, name="hv", count=None)
    assert not result.get("failed"), result["msg"]
    assert [row["name"] for row in ledger.instances()] == ["hv"]
