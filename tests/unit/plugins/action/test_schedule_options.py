"""The schedule action's pure part: module options to the engine's request, and back to words."""
from __future__ import annotations

import importlib
import re

import pytest

from ansible_collections.berth.fleet.plugins.action.capacity import ActionModule as CapacityAction
from ansible_collections.berth.fleet.plugins.action.schedule import ActionModule
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
    Flavor,
    HostState,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import (
    FILTERS,
    WEIGHERS,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
from ansible_collections.berth.fleet.plugins.plugin_utils._argspec import module_documentation
from ansible_collections.berth.fleet.plugins.plugin_utils._decision_text import failure_message
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import Fleet
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import (
    ledger_group,
    scheduling_request,
    server_group_value,
    spec_options,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.schedule import placement_rows
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

FLAVOR = Flavor(name="small", vcpus=1, memory_mb=2048, root_gb=10)


def decide(states, flavor, count, options):
    return schedule([HostState.from_dict(state) for state in states],
                    RequestSpec(flavor=flavor, count=count, **options))


def host(name, **fields):
    state = {"host": name, "vcpus_total": 8, "vcpus_used": 0, "total_usable_ram_mb": 16384,
             "free_ram_mb": 15872, "total_usable_disk_gb": 100, "free_disk_mb": 102400}
    state.update(fields)
    return state


def test_every_weigher_multiplier_is_a_module_option_under_nova_name():
    spec = ActionModule.ARGUMENT_SPEC
    for option in ("ram_weight_multiplier", "cpu_weight_multiplier", "disk_weight_multiplier",
                   "io_ops_weight_multiplier", "num_instances_weight_multiplier",
                   "soft_affinity_weight_multiplier", "soft_anti_affinity_weight_multiplier",
                   "metrics_weight_multiplier", "build_failure_weight_multiplier",
                   "hypervisor_version_weight_multiplier", "image_props_weight_multiplier"):
        assert spec[option] == {"type": "float"}


def test_request_options_pass_set_options_and_gather_multipliers():
    args = {key: None for key in ActionModule.ARGUMENT_SPEC}
    args.update(availability_zone="az1", cpu_weight_multiplier=2.0, max_io_ops_per_host=4,
                server_group={"name": "web", "policy": "anti-affinity", "hosts": ["hv1"]})
    settings = Settings.from_args(args)
    options = spec_options(scheduling_request(args, FLAVOR, settings), settings)
    assert options["availability_zone"] == "az1"
    assert options["max_io_ops_per_host"] == 4
    assert options["weight_multipliers"] == {"cpu_weight_multiplier": 2.0}
    assert options["server_group"].members == {"hv1": 1}
    assert options["flavor"] is FLAVOR and "name" not in options
    # Every option is the engine's: the request spec takes them as they are.
    assert RequestSpec(**options).weight_multipliers == {"cpu_weight_multiplier": 2.0}


@pytest.mark.parametrize("value, field", [
    ({"name": "web"}, "server_group.policy"),
    (["web"], "server_group"),
])
def test_server_group_option_errors_name_the_field(value, field):
    with pytest.raises(InputError) as error:
        server_group_value(value)
    assert error.value.field == field


def test_a_group_name_is_left_to_the_ledger_and_refused_without_it():
    assert server_group_value("web") == "web"
    with pytest.raises(InputError, match="needs the ledger") as error:
        ledger_group("web", None)
    assert error.value.field == "server_group"


def test_failure_message_names_every_host_on_a_small_fleet():
    decision = decide([host("hv1", free_ram_mb=1000), host("hv2", service_up=False)], FLAVOR, 1,
                      {})
    assert failure_message(decision) == (
        "no valid host: 0/2 hosts are available for instance 1 of 1: 1 insufficient RAM "
        "(needs 2048 MB, most free 1000 MB), 1 down. hv1: insufficient RAM: needs 2048 MB, free "
        "1000 MB (used 15384 of limit 16384 MB); hv2: host down")


def test_failure_message_on_a_compact_explanation_names_the_closest_misses():
    states = [host(f"hv{n}", free_ram_mb=1000 + n) for n in range(3)]
    decision = decide(states, FLAVOR, 1, {"explain": "compact"})
    assert failure_message(decision).endswith(
        "closest misses: hv2: insufficient RAM: needs 2048 MB, free 1002 MB (used 15382 of limit "
        "16384 MB); hv1: insufficient RAM: needs 2048 MB, free 1001 MB (used 15383 of limit "
        "16384 MB); hv0: insufficient RAM: needs 2048 MB, free 1000 MB (used 15384 of limit "
        "16384 MB)")


# --- DOCUMENTATION and argument specs: one set of options, every filter and weigher named ------

def documented_options(module_name):
    """The options ansible-doc shows: the module's own and its doc fragments'."""
    module = importlib.import_module(f"ansible_collections.berth.fleet.plugins.modules.{module_name}")
    return module_documentation(module.__file__)["options"]


@pytest.mark.parametrize("module_name, spec", [
    ("schedule", ActionModule.ARGUMENT_SPEC),
    ("capacity", CapacityAction.ARGUMENT_SPEC),
])
def test_documentation_and_argument_spec_list_the_same_options(module_name, spec):
    documented = documented_options(module_name)
    assert sorted(documented) == sorted(spec)
    for name, option in spec.items():
        doc = documented[name]
        assert doc["type"] == option["type"], name
        assert doc.get("elements") == option.get("elements"), name
        if "default" in option and option["default"] is not None:
            assert doc.get("default") == option["default"], name


def test_documentation_names_every_filter_and_weigher_with_its_options():
    documented = documented_options("schedule")
    filters_text = " ".join(documented["enabled_filters"]["description"])
    weighers_text = " ".join(documented["weighers"]["description"])
    for name in FILTERS:
        assert f"C({name})" in filters_text, name
    for name, weigher in WEIGHERS.items():
        assert f"C({name})" in weighers_text, name
        assert f"O({weigher.multiplier_option})" in weighers_text, name
        assert weigher.multiplier_option in documented, name
    # every option a filter's text points at is an option of the module (the fragment
    # berth.fleet.scheduler, which the moves extend too, names the request's options qualified)
    for text in (filters_text, weighers_text):
        for option in re.findall(r"O\((?:berth\.fleet\.schedule#module:)?([a-z_]+)", text):
            assert option in documented, option


# Nova's filters and weighers (nova/scheduler/filters, weights) that Berth leaves out; the
# documentation says why each does not fit libvirt domains as Berth defines them.
NOT_PROVIDED = {"CrossCellWeigher"}


def test_documented_filters_and_weighers_are_the_registry_and_the_ones_left_out():
    documented = documented_options("schedule")
    items = [*documented["enabled_filters"]["description"], *documented["weighers"]["description"]]
    named = set(re.findall(r"C\(([A-Za-z]+(?:Filter|Weigher|Isolation))\)", " ".join(items)))
    # Nothing documented that the registry does not hold (a renamed or removed filter)...
    assert named - set(FILTERS) - set(WEIGHERS) == NOT_PROVIDED
    # ...and the ones left out are said to be so.
    left_out = " ".join(item for item in items if item.startswith("Not provided"))
    assert {name for name in NOT_PROVIDED if f"C({name})" in left_out} == NOT_PROVIDED
    # Each filter's own per-host option (its limit) is named in the filter's own item.
    for name, host_filter in FILTERS.items():
        for number in host_filter.host_numbers.values():
            if number.option is not None:
                [item] = [item for item in documented["enabled_filters"]["description"]
                          if f"C({name})" in item]
                assert f"O({number.option})" in item, (name, number.option)


def test_placements_carry_what_the_instance_records_project_and_canonical_image_properties():
    # The ledger writes them on the instance row (NOTES-13.md); AggregateMultiTenancyIsolation
    # and ImagePropertiesWeigher read them back.
    states = [HostState.from_dict(host("hv1", supported_instances=[["x86_64", "kvm", "hvm"]]))]
    spec = RequestSpec(flavor=FLAVOR, project_id="team-a",
                       image_properties={"hw_architecture": "AMD64", "os_distro": "debian"})
    decision = schedule(states, spec)
    assert decision.ok, decision.summary
    fleet = Fleet(HostTable.from_states(states), [None], {})
    placements = placement_rows(["web-1"], decision, fleet, None, FLAVOR.to_dict(), spec)
    assert (placements[0]["host"], placements[0]["project_id"], placements[0]["image_properties"]) == (
        "hv1", "team-a", {"hw_architecture": "x86_64", "os_distro": "debian"})
