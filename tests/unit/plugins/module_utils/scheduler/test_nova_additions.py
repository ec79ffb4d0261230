"""The Nova filters and weigher added by issue #13, one table each; expected values by hand."""
from __future__ import annotations

import pytest
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import WEIGHERS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import (
    weigh_hosts,
)

from ._builders import aggregate, make_flavor, make_host, make_spec, verdict


# --- AggregateImagePropertiesIsolation --------------------------------------------------------

ISOLATION_CASES = [
    # aggregates' metadata, image properties, options, expected
    ([], {"os_distro": "windows"}, {}, None),
    ([{"os_distro": "debian,alpine"}], {"os_distro": "alpine"}, {}, None),
    ([{"os_distro": "debian,alpine"}], {"os_distro": "windows"}, {},
     ("aggregate_image_properties", "os_distro: windows is not one of debian, alpine")),
    # values of several aggregates add up
    ([{"os_distro": "debian"}, {"os_distro": "windows"}], {"os_distro": "windows"}, {}, None),
    # a property the image does not set does not count, nor an empty one
    ([{"os_distro": "debian"}], {"hw_machine_type": "q35"}, {}, None),
    ([{"os_distro": "debian"}], {"os_distro": ""}, {}, None),
    # a key the image sets that is also other metadata (a ratio) is compared all the same
    ([{"hw_architecture": "x86_64"}], {"hw_architecture": "AMD64"}, {}, None),   # canonical
    ([{"hw_architecture": "x86_64"}], {"hw_architecture": "aarch64"}, {},
     ("aggregate_image_properties", "hw_architecture: aarch64 is not one of x86_64")),
    # a YAML boolean reads as Glance stores it
    ([{"secure": "true"}], {"secure": True}, {}, None),
    # with a namespace only its keys count
    ([{"os_distro": "debian", "iso.os_distro": "windows"}], {"os_distro": "alpine"},
     {"aggregate_image_properties_isolation_namespace": "iso"}, None),
    ([{"iso.os_distro": "windows"}], {"iso.os_distro": "alpine"},
     {"aggregate_image_properties_isolation_namespace": "iso"},
     ("aggregate_image_properties", "iso.os_distro: alpine is not one of windows")),
    ([{"iso:os_distro": "windows"}], {"iso:os_distro": "alpine"},
     {"aggregate_image_properties_isolation_namespace": "iso"}, None),     # not "iso."
    ([{"iso:os_distro": "windows"}], {"iso:os_distro": "alpine"},
     {"aggregate_image_properties_isolation_namespace": "iso",
      "aggregate_image_properties_isolation_separator": ":"},
     ("aggregate_image_properties", "iso:os_distro: alpine is not one of windows")),
]


@pytest.mark.parametrize("metadata, properties, options, expected", ISOLATION_CASES)
def test_aggregate_image_properties_isolation(metadata, properties, options, expected):
    host = make_host(aggregates=[aggregate(f"a{n}", **items) for n, items in enumerate(metadata)])
    spec = make_spec(image_properties=properties, **options)
    assert verdict("AggregateImagePropertiesIsolation", host, spec) == expected


# --- AggregateMultiTenancyIsolation -----------------------------------------------------------

TENANT_CASES = [
    ([], "team-a", None),
    ([{"ssd": "true"}], "team-a", None),                              # no tenant keys
    ([{"filter_tenant_id": "team-a,team-b"}], "team-b", None),
    ([{"filter_tenant_id": "team-a, team-b"}], "default",
     ("aggregate_tenant", "reserved for team-a, team-b")),
    # every key that starts with filter_tenant_id, in every aggregate, adds projects
    ([{"filter_tenant_id": "team-a"}, {"filter_tenant_id_2": "team-c"}], "team-c", None),
    ([{"filter_tenant_id": "team-a", "filter_tenant_id_x": "team-d"}], "team-d", None),
]


@pytest.mark.parametrize("metadata, project, expected", TENANT_CASES)
def test_aggregate_multitenancy_isolation(metadata, project, expected):
    host = make_host(aggregates=[aggregate(f"a{n}", **items) for n, items in enumerate(metadata)])
    assert verdict("AggregateMultiTenancyIsolation", host,
                   make_spec(project_id=project)) == expected


def test_a_launch_without_a_project_is_in_the_default_project():
    assert make_spec().project_id == "default"
    with pytest.raises(SchedulerInputError) as error:
        make_spec(project_id="")
    assert error.value.field == "project_id"


# --- MetricsFilter ----------------------------------------------------------------------------

@pytest.mark.parametrize("metrics, setting, expected", [
    ({}, [], None),                                                   # nothing weighed
    ({"cpu.percent": 5, "load": 0.5}, ["cpu.percent=1", "load=-1"], None),
    ({"cpu.percent": 5}, ["cpu.percent=1", "load=-1"], ("metrics_missing", "load")),
    ({}, ["cpu.percent=1", "load=0"], ("metrics_missing", "cpu.percent, load")),  # ratio 0 too
    ({"load": "n/a"}, ["load=1"], ("metrics_missing", "load")),        # not a number
])
def test_metrics_filter(metrics, setting, expected):
    spec = make_spec(metrics_weight_setting=setting)
    assert verdict("MetricsFilter", make_host(metrics=metrics), spec) == expected


def test_metrics_filter_spares_the_weigher_its_error():
    hosts = [make_host("hv1", metrics={"cpu.percent": 10}), make_host("hv2"),
             make_host("hv3", metrics={"cpu.percent": 30})]
    spec = make_spec(weighers=["MetricsWeigher"], metrics_weight_setting=["cpu.percent=1"],
                     enabled_filters=["MetricsFilter"])
    decision = schedule(hosts, spec)
    assert [placement.host for placement in decision.placements] == ["hv3"]
    assert [runner["host"] for runner in decision.placements[0].runners_up] == ["hv1"]
    assert decision.rejections[0].reason == "metrics_missing"


# --- SimpleCIDRAffinityFilter -----------------------------------------------------------------

CIDR_CASES = [
    ({}, "10.0.1.5", None),                                          # no hint
    ({"build_near_host_ip": "10.0.0.9"}, "10.0.0.200", None),        # default /24
    ({"build_near_host_ip": "10.0.0.9"}, "10.0.1.5",
     ("not_near", "10.0.1.5 is not in 10.0.0.0/24")),
    ({"build_near_host_ip": "10.0.0.9", "cidr": "/16"}, "10.0.1.5", None),
    ({"build_near_host_ip": "10.0.0.9", "cidr": "/32"}, "10.0.0.9", None),
    ({"build_near_host_ip": "fd00::1", "cidr": "/64"}, "fd00::abcd", None),
    ({"build_near_host_ip": "fd00::1", "cidr": "/64"}, "10.0.0.9",
     ("not_near", "10.0.0.9 is not in fd00::/64")),                  # another family
    ({"build_near_host_ip": "10.0.0.9"}, None, ("not_near", "its address is unknown")),
]


@pytest.mark.parametrize("hints, host_ip, expected", CIDR_CASES)
def test_simple_cidr_affinity_filter(hints, host_ip, expected):
    spec = make_spec(scheduler_hints=hints)
    assert verdict("SimpleCIDRAffinityFilter", make_host(host_ip=host_ip), spec) == expected


@pytest.mark.parametrize("hints, field", [
    ({"build_near_host_ip": "10.0.0.300"}, "scheduler_hints.build_near_host_ip"),
    ({"build_near_host_ip": 42}, "scheduler_hints.build_near_host_ip"),
    ({"build_near_host_ip": "10.0.0.9", "cidr": "24"}, "scheduler_hints.cidr"),
    ({"build_near_host_ip": "10.0.0.9", "cidr": "/33"}, "scheduler_hints.cidr"),
])
def test_cidr_hints_are_checked_before_deciding(hints, field):
    with pytest.raises(SchedulerInputError) as error:
        make_spec(scheduler_hints=hints)
    assert error.value.field == field


@pytest.mark.parametrize("fields, field", [
    ({"host_ip": "10.0.0.300"}, "hosts[hv1].host_ip"),
    ({"host_ip": 167772161}, "hosts[hv1].host_ip"),
    ({"instance_image_properties": {"os_distro": "debian"}},
     "hosts[hv1].instance_image_properties"),
    ({"instance_image_properties": [{1: "x"}]}, "hosts[hv1].instance_image_properties"),
])
def test_new_host_state_fields_are_checked(fields, field):
    with pytest.raises(SchedulerInputError) as error:
        make_host("hv1", **fields)
    assert error.value.field == field


# --- ImagePropertiesWeigher -------------------------------------------------------------------

def image_weights(hosts, **spec_fields):
    weighed = weigh_hosts(hosts, [WEIGHERS["ImagePropertiesWeigher"]()], make_spec(**spec_fields))
    return [(item.host_state.host, item.weights[0].raw, pytest.approx(item.weight))
            for item in weighed]


DEBIAN = {"os_distro": "debian", "hw_machine_type": "q35"}
INSTANCES = {
    # hv1: two debian/q35 instances and one alpine/q35; hv2: one debian/pc; hv3: none
    "hv1": [DEBIAN, DEBIAN, {"os_distro": "alpine", "hw_machine_type": "q35"}],
    "hv2": [{"os_distro": "debian", "hw_machine_type": "pc"}],
    "hv3": [],
}


def image_hosts():
    return [make_host(name, instance_image_properties=instances)
            for name, instances in INSTANCES.items()]


def test_image_properties_weigher_is_off_with_nova_default_multiplier():
    # raw 0 everywhere, not even read: the candidates keep their order
    assert image_weights(image_hosts(), image_properties=DEBIAN) == [
        ("hv1", 0.0, 0.0), ("hv2", 0.0, 0.0), ("hv3", 0.0, 0.0)]


def test_image_properties_weigher_counts_instances_per_shared_property():
    # requested os_distro=debian, hw_machine_type=q35; evenly weighed:
    #   hv1: debian 2 + q35 3 = 5; hv2: debian 1; hv3: 0 -> 1.0, 0.2, 0.0; multiplier 2
    assert image_weights(image_hosts(), image_properties=DEBIAN, weight_multipliers={
        "image_props_weight_multiplier": 2.0}) == [
        ("hv1", 5.0, 2.0), ("hv2", 1.0, 0.4), ("hv3", 0.0, 0.0)]
    # negative: spread away from the instances like it
    assert [host for host, _raw, _weight in image_weights(
        image_hosts(), image_properties=DEBIAN,
        weight_multipliers={"image_props_weight_multiplier": -1.0})] == ["hv3", "hv2", "hv1"]


def test_image_properties_weigher_setting_weighs_each_property_and_drops_the_others():
    # os_distro=3, hw_machine_type=-1: hv1 3 × 2 − 3 = 3; hv2 3 × 1 = 3; hv3 0
    # a property the setting does not list counts 0 (hw_vm_mode here)
    assert image_weights(image_hosts(), image_properties={**DEBIAN, "hw_vm_mode": "hvm"},
                         image_props_weight_setting=["os_distro=3", "hw_machine_type=-1"],
                         weight_multipliers={"image_props_weight_multiplier": 1.0}) == [
        ("hv1", 3.0, 1.0), ("hv2", 3.0, 1.0), ("hv3", 0.0, 0.0)]


def test_image_properties_weigher_aggregate_override_but_not_of_the_switch():
    # hv2's aggregate sets the multiplier 10: it weighs 0.2 × 10 = 2.0 and wins over hv1 (1.0)
    hosts = image_hosts()
    hosts[1].aggregates = [{"name": "a", "metadata": {"image_props_weight_multiplier": "10"}}]
    assert image_weights(hosts, image_properties=DEBIAN, weight_multipliers={
        "image_props_weight_multiplier": 1.0})[0] == ("hv2", 1.0, 2.0)
    # with the request's multiplier 0 the weigher is off, as in Nova, whatever the aggregate
    assert image_weights(hosts, image_properties=DEBIAN)[0] == ("hv1", 0.0, 0.0)


def test_image_properties_weigher_reads_instances_only_when_on():
    weigher = WEIGHERS["ImagePropertiesWeigher"]()
    assert weigher.host_fields_for(make_spec()) == frozenset()
    assert weigher.host_fields_for(make_spec(weight_multipliers={
        "image_props_weight_multiplier": 1.0})) == {"instance_image_properties"}


def test_image_properties_weigher_does_not_count_the_request_own_instances_as_nova():
    # Consuming a host does not add the new instance's properties (Nova's HostState keeps its
    # instances until the next update), so with the multiplier alone every instance goes to hv1.
    flavor = make_flavor(memory_mb=512, root_gb=1)
    decision = schedule(image_hosts(), make_spec(
        flavor, count=3, weighers=["ImagePropertiesWeigher"], image_properties=DEBIAN,
        weight_multipliers={"image_props_weight_multiplier": 1.0}))
    assert [placement.host for placement in decision.placements] == ["hv1", "hv1", "hv1"]
