"""A hint whose filter is not enabled (issue 33, item 4): a launch refuses it before anything is
decided or claimed, naming the hint and the filter to enable; a move of an instance that
recorded one (launched before Berth refused them, or with filters changed since) goes ahead,
warns, and its explanation says the hint did not hold. On a real SQLite ledger."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import DIFFERENT_HOST_FILTER
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import DEFAULT_FILTERS
from ansible_collections.berth.fleet.plugins.plugin_utils._placement import flavor_option
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import SCHEDULE_SPEC, half_options
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.move import destination
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.schedule import Schedule

MOVE_ARGS = {"service_down_time": 600, "source": "ledger", "hosts": None, "hypervisor_group": "hypervisors"}
REFUSAL = ("scheduler_hints.different_host needs DifferentHostFilter, which enabled_filters lacks: "
           "add it (berth_enabled_filters) or drop the hint")
BUILT = {"networks": [], "metadata": {}, "boot": {}, "guest": {}, "seed": False, "domain_type": ""}


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


def launch(ledger, name, check_mode=False, **given):
    args = half_options(SCHEDULE_SPEC, {"name": name, "flavor": "m1.tiny", **given})
    result = Schedule(args, [name], flavor_option(args), ledger, {}, check_mode).run()
    for placement in result["placements"]:
        if placement["uuid"]:
            ledger.mark_active(placement["uuid"], BUILT)
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
    hosts = [{**hypervisor(1, 8192), "free_ram_mb": 8192, "free_disk_mb": 204800}]
    args = half_options(SCHEDULE_SPEC, {"name": "web", "flavor": "m1.tiny", "hosts": hosts, "ledger": False,
                                        "scheduler_hints": {"same_host": ["u1"]}})
    with pytest.raises(InputError, match=r"^scheduler_hints.same_host needs SameHostFilter, which enabled_filters "
                                         r"lacks: add it \(berth_enabled_filters\) or drop the hint$"):
        Schedule(args, ["web"], flavor_option(args), None, {}, False).run()


def test_with_its_filter_enabled_the_hint_holds(ledger):
    [first] = launch(ledger, "web-1")["placements"]
    assert first["host"] == "hv1"
    result = launch(ledger, "web-2", scheduler_hints={"different_host": [first["uuid"]]},
                    enabled_filters=[*DEFAULT_FILTERS, DIFFERENT_HOST_FILTER])
    assert [placement["host"] for placement in result["placements"]] == ["hv2"]


def test_a_move_with_a_recorded_idle_hint_goes_ahead_and_says_it_did_not_hold(ledger):
    """web-2 was launched to avoid web-1's host (hv1). Moved with the filters it recorded, it
    goes to hv3; with a record that lacks DifferentHostFilter (as an instance launched before
    Berth refused such hints has), it may go to the roomier hv1, and the move says why."""
    [first] = launch(ledger, "web-1")["placements"]
    launch(ledger, "web-2", scheduler_hints={"different_host": [first["uuid"]]},
           enabled_filters=[*DEFAULT_FILTERS, DIFFERENT_HOST_FILTER])
    [instance] = ledger.instances(["web-2"])
    assert instance["host"] == "hv2"
    held = destination(MOVE_ARGS, {}, ledger, instance)
    assert (held["host"], held["warnings"]) == ("hv3", [])
    assert "hints not held" not in held["why"]

    older = {**instance, "request": {**instance["request"], "enabled_filters": list(DEFAULT_FILTERS)}}
    moved = destination(MOVE_ARGS, {}, ledger, older)
    assert moved["host"] == "hv1"
    assert moved["warnings"] == [
        "web-2's recorded scheduler_hints.different_host needs DifferentHostFilter, which enabled_filters lacks: "
        "this move does not hold it"]
    assert moved["why"] == (
        "chosen by the scheduler: placed 1 instance on hv1; hints not held: scheduler_hints.different_host "
        "needs DifferentHostFilter, which enabled_filters lacks")
