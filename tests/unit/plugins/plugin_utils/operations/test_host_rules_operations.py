"""Host rules through the operations, on a real SQLite ledger: a labelled launch goes where its
rules say and its decision names them, the label is recorded, and a move (migrate, drain,
evacuate: move.destination) is held to the same rules, including one written after the launch."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_rules import HostRule
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import move_request
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger, instance_flavor
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import check_request
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.move import destination
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.schedule import Schedule
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

SETTINGS = Settings(service_down_time=600, source="ledger")
# The aggregates of each host; hv4 has the most room, so without rules it is chosen.
AGGREGATES = {"hv1": ["ssd"], "hv2": ["ssd", "old"], "hv3": [], "hv4": ["old"]}


def hypervisor(name):
    index = int(name[2:])
    return {
        "host": name, "nodename": name, "uuid": f"hv-{index}", "uri": f"qemu+ssh://{name}/system",
        "service_up": True, "disabled": False, "vcpus_total": 8, "vcpus_used": 0,
        "total_usable_ram_mb": 4096 * index, "free_ram_mb": 0, "total_usable_disk_gb": 200, "free_disk_mb": 0,
        "num_instances": 0, "num_io_ops": 0, "cpu_allocation_ratio": 2.0, "ram_allocation_ratio": 1.0,
        "disk_allocation_ratio": 1.0, "reserved_host_memory_mb": 0, "reserved_host_disk_mb": 0, "domains": [],
        "supported_instances": [["x86_64", "qemu", "hvm"]],
        "aggregates": [{"name": aggregate, "metadata": {}} for aggregate in AGGREGATES[name]],
    }


@pytest.fixture
def ledger(tmp_path):
    opened = Ledger(f"sqlite:///{tmp_path}/ledger.sqlite3").open()
    opened.sync_hypervisors([hypervisor(name) for name in AGGREGATES])
    yield opened
    opened.close()


def launch(ledger, name, **options):
    request = check_request({"flavor": "m1.tiny", **options}, SETTINGS)
    result = Schedule(request, SETTINGS, [f"{name}-1"], name, ledger, {}, False).run()
    [placed] = result["placements"]
    ledger.mark_active(placed["uuid"])
    [instance] = ledger.instances([f"{name}-1"])
    return instance, result


def test_a_labelled_launch_goes_where_its_rules_say_and_its_decision_names_them(ledger):
    ledger.put_host_rule(HostRule(name="db-on-ssd", kind="must", aggregate="ssd", instance_label="db"))
    ledger.put_host_rule(HostRule(name="db-not-old", kind="must_not", aggregate="old", instance_label="db"))
    free, _result = launch(ledger, "web")
    assert free["host"] == "hv4"  # no rule selects it: the most free RAM
    held, result = launch(ledger, "db", labels=["db"])
    assert held["host"] == "hv1" and held["request"]["labels"] == ["db"]
    rejections = {item["host"]: item["message"] for item in result["decision"]["rejections"]}
    assert rejections == {"hv2": "host rule: db-not-old says its instances must not be in aggregate old",
                          "hv3": "host rule: db-on-ssd says its instances must be in aggregate ssd",
                          "hv4": "host rule: db-not-old says its instances must not be in aggregate old"}


def test_a_move_is_held_to_the_rules_that_select_its_recorded_label(ledger):
    instance, _result = launch(ledger, "db", labels=["db"])
    assert instance["host"] == "hv4"
    # Written after the launch: the move keeps it.
    ledger.put_host_rule(HostRule(name="db-on-ssd", kind="must", aggregate="ssd", instance_label="db"))
    target = destination({}, SETTINGS, {}, ledger, instance)
    assert target["host"] == "hv2"  # of the ssd hosts, the one with more room
    spec, _why = move_request(instance, instance_flavor(instance), SETTINGS, ["hv4"], None, ledger.scheduler_rules())
    assert [rule.name for rule in spec.host_rules] == ["db-on-ssd"]
    ledger.put_host_rule(HostRule(name="db-not-old", kind="must_not", aggregate="old", instance_label="db"))
    assert destination({}, SETTINGS, {}, ledger, instance)["host"] == "hv1"
    ledger.set_disabled("hv1", True, "maintenance")
    with pytest.raises(BerthError, match="cannot migrate db-1: no valid host: .*against host rule"):
        destination({}, SETTINGS, {}, ledger, instance)


def test_a_soft_rule_leads_a_move_but_never_blocks_it(ledger):
    instance, _result = launch(ledger, "app", labels=["app"])
    ledger.put_host_rule(HostRule(name="app-ssd", kind="should", aggregate="ssd", instance_label="app", weight=1.0))
    # The weigher's multiplier above the RAM weigher's: the preference wins over free RAM.
    settings = Settings(service_down_time=600, source="ledger",
                        scheduler={"host_rule_weight_multiplier": 5.0})
    assert destination({}, settings, {}, ledger, instance)["host"] == "hv2"
    for name in ("hv1", "hv2"):
        ledger.set_disabled(name, True, "maintenance")
    assert destination({}, settings, {}, ledger, instance)["host"] == "hv3"
