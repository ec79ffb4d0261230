"""HA instances in the ledger (migration 0013): the flag written with the claim, listed in
restart order, changed by berth.fleet.instance_ha's write; and the failover headroom a launch is
checked against before its claim, on a real ledger (SQLite and PostgreSQL).

The fleet: hv1..hv3 with 2048 MB each, 512 MB reserved (1536 MB of room) and 2 vCPUs at ratio 1.0.
"""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError, LedgerError
from ansible_collections.berth.fleet.plugins.module_utils.request import Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_rules import HostRule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils._headroom import launch_check, ledger_headroom
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

MEDIUM = Flavor(name="medium", vcpus=1, memory_mb=1024, root_gb=1)


def host(number):
    return {
        "host": f"hv{number}", "nodename": f"hv{number}", "uuid": f"hv-{number}", "service_up": True,
        "disabled": False, "vcpus_total": 2, "vcpus_used": 0, "total_usable_ram_mb": 2048, "free_ram_mb": 1536,
        "total_usable_disk_gb": 100, "free_disk_mb": 100 * 1024, "num_instances": 0, "num_io_ops": 0,
        "cpu_allocation_ratio": 1.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
        "reserved_host_memory_mb": 512, "reserved_host_disk_mb": 0, "domains": [],
        "uri": f"qemu+ssh://root@hv{number}.example/system",
    }


def on(name, number):
    return {"name": name, "host": f"hv{number}", "hypervisor_uuid": f"hv-{number}"}


@pytest.fixture
def fleet(ledger):
    """hv1 and hv2 hold an HA instance each; hv3 is empty: room to restart either, not both."""
    ledger.sync_hypervisors([host(1), host(2), host(3)])
    record = Request(flavor=MEDIUM).to_record()
    ledger.claim([on("db-1", 1)], MEDIUM, "test", request=record, ha=True, ha_priority=10)
    ledger.claim([on("web-1", 2)], MEDIUM, "test", request=record, ha=True)
    return ledger


def test_the_flag_is_written_with_the_claim_and_listed_in_restart_order(fleet):
    fleet.claim([on("scratch-1", 3)], Flavor(name="tiny", vcpus=1, memory_mb=256, root_gb=1), "test")
    assert [(row["name"], row["ha"], row["ha_priority"]) for row in fleet.ha_instances()] == [
        ("db-1", True, 10), ("web-1", True, 0)]
    assert {row["name"]: row["ha"] for row in fleet.instances()}["scratch-1"] is False


def test_set_instance_ha_changes_writes_nothing_in_a_dry_run_and_is_idempotent(fleet):
    before, after = fleet.set_instance_ha("web-1", None, 50, dry_run=True)
    assert (before["ha_priority"], after["ha_priority"]) == (0, 50)
    assert [row["name"] for row in fleet.ha_instances()] == ["db-1", "web-1"]
    fleet.set_instance_ha("web-1", None, 50)
    assert [row["name"] for row in fleet.ha_instances()] == ["web-1", "db-1"]
    before, after = fleet.set_instance_ha("web-1", True, 50)
    assert before == after
    fleet.set_instance_ha("db-1", False, None)
    assert [row["name"] for row in fleet.ha_instances()] == ["web-1"]
    with pytest.raises(LedgerError, match="no instance named 'nope'"):
        fleet.set_instance_ha("nope", True, None)


def test_the_spare_host_holds_one_loss_and_capacity_says_so(fleet):
    headroom = ledger_headroom(fleet, Settings(failover_hosts=1))
    assert headroom.held and headroom.ha_instances == 2
    assert {loss.failed: loss.placed for loss in headroom.single} == {("hv1",): {"db-1": "hv3"},
                                                                      ("hv2",): {"web-1": "hv3"}}
    two = ledger_headroom(fleet, Settings(failover_hosts=2))
    assert not two.held and [loss.failed for loss in two.unabsorbed] == [("hv1", "hv2")]
    # The higher priority is restarted first and takes hv3.
    assert two.unabsorbed[0].placed == {"db-1": "hv3"} and list(two.unabsorbed[0].unplaced) == ["web-1"]


def test_a_launch_onto_the_spare_room_is_refused_naming_the_losses_then_warned(fleet):
    request = Request(flavor=MEDIUM)
    refusal, warnings, after = launch_check(fleet, Settings(failover_hosts=1), [on("app-1", 3)], request, None)
    assert refusal.startswith("the failover headroom (berth_failover_hosts=1) would be broken: with app-1 on hv3, "
                              "the loss of hv1 could not be absorbed: db-1 (")
    assert "the loss of hv2 could not be absorbed: web-1 (" in refusal and "Nothing was claimed" in refusal
    assert warnings == [] and after.single_hosts_unabsorbed == ["hv1", "hv2"]
    refusal, warnings, _after = launch_check(fleet, Settings(failover_hosts=1, failover_enforce="warn"),
                                             [on("app-1", 3)], request, None)
    assert refusal is None and "launched anyway" in warnings[0]
    # Where it leaves the room (a small instance beside the HA ones), nothing is said.
    small = Request(flavor=Flavor(name="tiny", vcpus=1, memory_mb=256, root_gb=1))
    assert launch_check(fleet, Settings(failover_hosts=1), [on("app-1", 1)], small, None)[:2] == (None, [])


def test_an_ha_launch_counts_its_own_instance(fleet):
    # An HA instance on hv3 must itself be restartable: hv1 and hv2 have 512 MB each, so not.
    refusal, _warnings, after = launch_check(fleet, Settings(failover_hosts=1), [on("ha-1", 3)],
                                             Request(flavor=MEDIUM, ha=True), None)
    assert "the loss of hv3 could not be absorbed: ha-1 (" in refusal


def test_a_headroom_broken_already_only_warns_a_launch_that_breaks_it_no_further(fleet):
    fleet.claim([on("other-1", 3)], MEDIUM, "test")  # hv3's room taken outside the check
    refusal, warnings, _after = launch_check(fleet, Settings(failover_hosts=1), [on("app-1", 1)],
                                             Request(flavor=Flavor(name="tiny", vcpus=1, memory_mb=256, root_gb=1)),
                                             None)
    assert refusal is None and warnings[0].startswith("the failover headroom (berth_failover_hosts=1) is broken "
                                                      "already, and this launch breaks it no further")


def test_a_bad_setting_is_refused_naming_it(fleet):
    with pytest.raises(InputError, match="failover_enforce"):
        launch_check(fleet, Settings(failover_hosts=1, failover_enforce="maybe"), [on("a-1", 3)],
                     Request(flavor=MEDIUM), None)


def test_a_launch_is_refused_before_its_claim_and_launches_without_the_setting(fleet):
    from ansible_collections.berth.fleet.plugins.plugin_utils.operations.schedule import Schedule

    request = Request(flavor=MEDIUM)
    refused = Schedule(request, Settings(failover_hosts=1), ["app-1"], "app", fleet, {}, False).run()
    # The scheduler chose hv3 (the most free RAM), the only room the HA instances have.
    assert refused["failed"] and refused["msg"].startswith("the failover headroom (berth_failover_hosts=1) would be "
                                                           "broken: with app-1 on hv3, the loss of hv1")
    assert refused["headroom"]["single_hosts_unabsorbed"] == ["hv1", "hv2"]
    assert [row["name"] for row in fleet.instances()] == ["db-1", "web-1"]
    launched = Schedule(request, Settings(), ["app-1"], "app", fleet, {}, False).run()
    assert not launched.get("failed") and "headroom" not in launched
    assert [row["name"] for row in fleet.instances()] == ["app-1", "db-1", "web-1"]


@pytest.mark.parametrize("options, field", [
    ({"ha": "yes"}, "ha"), ({"ha_priority": -1}, "ha_priority"), ({"ha_priority": 1001}, "ha_priority"),
    ({"ha_priority": True}, "ha_priority"), ({"ha_priority": "5"}, "ha_priority")])
def test_the_launch_options_are_checked_once_with_the_request_naming_the_field(options, field):
    from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import check_request

    with pytest.raises(InputError) as refused:
        check_request({"flavor": {"vcpus": 1, "memory_mb": 256, "root_gb": 1}, **options}, Settings())
    assert refused.value.field == field and "ha" in str(refused.value)


def test_the_launch_options_are_kept_by_the_request_and_not_in_its_record():
    from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import check_request

    request = check_request({"flavor": {"vcpus": 1, "memory_mb": 256, "root_gb": 1}, "ha": True, "ha_priority": 7},
                            Settings())
    assert (request.ha, request.ha_priority) == (True, 7)
    assert "ha" not in request.to_record() and "ha_priority" not in request.to_record()


def test_per_aggregate_headroom_reads_the_aggregates_from_the_ledger(ledger):
    # hv1 and hv2 in prod, hv3 in lab: prod keeps 1, so hv1's loss is checked (db-1 to hv3) and
    # the lab host's is not; a launch taking hv3's room is refused for prod's sake.
    ledger.sync_hypervisors([{**host(1), "aggregates": [{"name": "prod", "metadata": {}}]},
                             {**host(2), "aggregates": [{"name": "prod", "metadata": {}}]},
                             {**host(3), "aggregates": [{"name": "lab", "metadata": {}}]}])
    record = Request(flavor=MEDIUM).to_record()
    ledger.claim([on("db-1", 1)], MEDIUM, "test", request=record, ha=True)
    ledger.claim([on("lab-1", 3)], Flavor(name="tiny", vcpus=1, memory_mb=256, root_gb=1), "test",
                 request=record, ha=True)
    settings = Settings(failover_hosts={"prod": 1})
    headroom = ledger_headroom(ledger, settings)
    assert headroom.held and [loss.failed for loss in headroom.single] == [("hv1",)]
    refusal, _warnings, _after = launch_check(ledger, settings, [on("app-1", 2), on("app-2", 3)],
                                              Request(flavor=MEDIUM), None)
    assert refusal.startswith("the failover headroom (berth_failover_hosts={'prod': 1}) would be broken")
    assert "the loss of hv1 could not be absorbed: db-1" in refusal


def test_the_roles_launch_marks_its_instances_ha_and_refuses_a_bad_priority(fleet):
    # berth.fleet.schedule's options, as the roles' launch gives them: the claim writes the flag.
    from ansible_collections.berth.fleet.plugins.action.schedule import ActionModule
    from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import scheduling_request
    from ansible_collections.berth.fleet.plugins.plugin_utils.operations.schedule import Schedule

    args = {key: None for key in ActionModule.ARGUMENT_SPEC}
    args.update(ha=True, ha_priority=700)
    settings = Settings.from_args(args)
    request = scheduling_request(args, Flavor(name="tiny", vcpus=1, memory_mb=256, root_gb=1), settings)
    assert not Schedule(request, settings, ["svc-1"], "svc", fleet, {}, False).run().get("failed")
    assert [(row["name"], row["ha_priority"]) for row in fleet.ha_instances()] == [
        ("svc-1", 700), ("db-1", 10), ("web-1", 0)]
    with pytest.raises(InputError, match="ha_priority must be an integer from 0 to 1000"):
        scheduling_request({**args, "ha_priority": 5000}, MEDIUM, settings)


def test_a_host_rule_that_leaves_an_ha_instance_no_host_breaks_the_headroom(fleet):
    """The restart of db-1 is planned under the host rules, as its evacuation would be held to
    them: a must rule on an aggregate no host is in leaves it nowhere to go when hv1 is lost."""
    assert ledger_headroom(fleet, Settings(failover_hosts=1)).held
    fleet.put_host_rule(HostRule(name="db-pinned", kind="must", aggregate="rack1", instance_name="db-*"))
    headroom = ledger_headroom(fleet, Settings(failover_hosts=1))
    assert not headroom.held and headroom.single_hosts_unabsorbed == ["hv1"]
    [loss] = headroom.unabsorbed
    assert list(loss.unplaced) == ["db-1"] and "against host rule db-pinned" in loss.unplaced["db-1"]
