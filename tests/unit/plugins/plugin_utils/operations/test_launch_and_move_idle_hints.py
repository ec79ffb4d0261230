"""A hint whose filter is not enabled (issue 33, item 4): a launch refuses it before anything is
decided or claimed, naming the hint and the filter to enable; a move of an instance that
recorded one, by a run whose filters lack it (filters changed since the launch, or an instance
launched before Berth refused such hints), goes ahead, warns, and its explanation says the hint
did not hold. On a real SQLite ledger."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ansible_collections.berth.fleet.plugins.action.schedule import ActionModule as ScheduleAction
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import Built
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import DIFFERENT_HOST_FILTER
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import DEFAULT_FILTERS
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import check_request
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.move import destination
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.schedule import Schedule
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

MOVE_ARGS: dict = {}
REFUSAL = ("scheduler_hints.different_host needs DifferentHostFilter, which enabled_filters lacks: "
           "add it (berth_enabled_filters) or drop the hint")
# The operator's settings with the hint's filter enabled.
WITH_DIFFERENT_HOST = Settings(scheduler={"enabled_filters": [*DEFAULT_FILTERS, DIFFERENT_HOST_FILTER]})


def hypervisor(index, memory_mb):
    name = f"hv{index}"
    return {
        "host": name, "nodename": name, "uuid": f"hv-{index}", "uri": f"qemu+ssh://{name}/system",
        "service_up": True, "disabled": False, "vcpus_total": 8, "vcpus_used": 0,
        "total_usable_ram_mb": memory_mb, "free_ram_mb": 0, "total_usable_disk_gb": 200, "free_disk_mb": 0,
        "num_instances": 0, "num_io_ops": 0, "cpu_allocation_ratio": 4.0, "ram_allocation_ratio": 1.0,
        "disk_allocation_ratio": 1.0, "reserved_host_memory_mb": 0, "reserved_host_disk_mb": 0, "domains": [],
        "supported_instances": [["x86_64", "qemu", "hvm"]], "availability_zone": None, "aggregates": [],
    }


@pytest.fixture
def ledger(tmp_path):
    """hv1 the roomiest, then hv2, then hv3: RAMWeigher spreads onto them in that order."""
    opened = Ledger(f"sqlite:///{tmp_path}/ledger.sqlite3").open()
    opened.sync_hypervisors([hypervisor(1, 16384), hypervisor(2, 12288), hypervisor(3, 8192)])
    yield opened
    opened.close()


def launch(ledger, name, check_mode=False, settings=Settings(), **given):
    """A launch as berth.fleet.server makes it: the request checked once, then scheduled."""
    request = check_request({"flavor": "m1.tiny", **given}, settings)
    result = Schedule(request, settings, [name], name, ledger, {}, check_mode).run()
    for placement in result["placements"]:
        if placement["uuid"]:
            ledger.mark_active(placement["uuid"], Built(seed=False).to_record())
    return result


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check"])
def test_a_launch_refuses_a_hint_whose_filter_is_not_enabled(ledger, check_mode):
    [first] = launch(ledger, "web-1")["placements"]
    with pytest.raises(InputError) as refused:
        launch(ledger, "web-2", check_mode, scheduler_hints={"different_host": [first["uuid"]]})
    assert refused.value.field == "scheduler_hints.different_host"
    assert str(refused.value) == REFUSAL
    # Nothing decided, nothing claimed.
    assert ledger.instances(["web-2"]) == []
    assert ledger.decisions("web-2") == []
    assert [claim["instance_uuid"] for claim in ledger.claims()] == [first["uuid"]]


def test_a_launch_names_every_idle_hint_and_what_each_lacks(ledger):
    with pytest.raises(InputError) as refused:
        launch(ledger, "web-1", scheduler_hints={"query": '[">=", "$free_ram_mb", 1024]', "cidr": "/16"})
    assert refused.value.field == "scheduler_hints.query"
    assert str(refused.value) == (
        "scheduler_hints.query needs JsonFilter, which enabled_filters lacks: add it (berth_enabled_filters) "
        "or drop the hint; scheduler_hints.cidr needs scheduler_hints.build_near_host_ip, the address it is a "
        "prefix of: give it or drop the hint")


def test_a_what_if_without_the_ledger_refuses_it_too():
    """berth.fleet.schedule's action (launch.yml's first task) on given host states."""
    hosts = [{**hypervisor(1, 8192), "free_ram_mb": 8192, "free_disk_mb": 204800}]
    options = {name: spec.get("default") for name, spec in ScheduleAction.ARGUMENT_SPEC.items()}
    options.update(name="web", flavor="m1.tiny", hosts=hosts, ledger=False, scheduler_hints={"same_host": ["u1"]})
    action = SimpleNamespace(_task=SimpleNamespace(check_mode=False))
    with pytest.raises(InputError, match=r"^scheduler_hints.same_host needs SameHostFilter, which enabled_filters "
                                         r"lacks: add it \(berth_enabled_filters\) or drop the hint$"):
        ScheduleAction.run_berth(action, options, {})  # type: ignore[arg-type]


def test_with_its_filter_enabled_the_hint_holds(ledger):
    [first] = launch(ledger, "web-1")["placements"]
    assert first["host"] == "hv1"
    result = launch(ledger, "web-2", settings=WITH_DIFFERENT_HOST, scheduler_hints={"different_host": [first["uuid"]]})
    assert [placement["host"] for placement in result["placements"]] == ["hv2"]


def test_a_move_with_a_recorded_idle_hint_goes_ahead_and_says_it_did_not_hold(ledger):
    """web-2 was launched to avoid web-1's host (hv1). Moved by a run whose filters read the hint,
    it goes to hv3; by a run whose filters lack DifferentHostFilter (the operator's settings now,
    whatever the launch's were), it may go to the roomier hv1, and the move says why."""
    [first] = launch(ledger, "web-1")["placements"]
    launch(ledger, "web-2", settings=WITH_DIFFERENT_HOST, scheduler_hints={"different_host": [first["uuid"]]})
    [instance] = ledger.instances(["web-2"])
    assert instance["host"] == "hv2"
    held = destination(MOVE_ARGS, WITH_DIFFERENT_HOST, {}, ledger, instance)
    assert (held["host"], held["warnings"]) == ("hv3", [])
    assert "hints not held" not in held["why"]

    moved = destination(MOVE_ARGS, Settings(), {}, ledger, instance)
    assert moved["host"] == "hv1"
    assert moved["warnings"] == [
        "web-2's recorded scheduler_hints.different_host needs DifferentHostFilter, which enabled_filters lacks: "
        "this move does not hold it"]
    assert moved["why"] == (
        "chosen by the scheduler: placed 1 instance on hv1; hints not held: scheduler_hints.different_host "
        "needs DifferentHostFilter, which enabled_filters lacks")
    # Filters written into the record (as schema 1 kept the launch's) are not the move's.
    recorded = {**instance, "request": {**instance["request"], "enabled_filters": WITH_DIFFERENT_HOST.scheduler[
        "enabled_filters"]}}
    assert destination(MOVE_ARGS, Settings(), {}, ledger, recorded)["host"] == "hv1"
