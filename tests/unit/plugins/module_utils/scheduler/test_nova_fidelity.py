"""Issue #13's cases: small inputs on which Berth used to decide otherwise than Nova.

Each test's name states what Nova does (its code in openstack/nova nova/scheduler/, Newton for
the Ram/Core/Disk filters); the expected values are worked out by hand in the comments.
"""
from __future__ import annotations

import pytest
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import (
    FILTERS,
    WEIGHERS,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import (
    weigh_hosts,
)

from ._builders import aggregate, make_flavor, make_host, make_spec, verdict


def passes(filter_name, host, spec):
    return verdict(filter_name, host, spec) is None


def order_and_weights(hosts, weigher_names, **spec_fields):
    weighed = weigh_hosts(hosts, [WEIGHERS[name]() for name in weigher_names],
                          make_spec(**spec_fields))
    return [(item.host_state.host, pytest.approx(item.weight)) for item in weighed]


# 1. ComputeCapabilitiesFilter ------------------------------------------------------------------

def test_capabilities_filter_ignores_an_unscoped_spec_naming_no_host_attribute_as_nova_does():
    # "ssd=true" is for AggregateInstanceExtraSpecsFilter; Nova's capabilities filter skips an
    # unscoped key that is no attribute of the host state.
    spec = make_spec(make_flavor(extra_specs={"ssd": "true"}))
    assert passes("ComputeCapabilitiesFilter", make_host(), spec)


def test_capabilities_filter_ignores_an_unscoped_availability_zone_as_nova_host_state_has_none():
    # Nova's HostState has no availability_zone (a zone is aggregate metadata), so an unscoped
    # "availability_zone" spec is AggregateInstanceExtraSpecsFilter's alone; Berth's host state
    # has the field, which must not make the capabilities filter read it (hv1's own field is
    # empty: its zone comes from its aggregate).
    spec = make_spec(make_flavor(extra_specs={"availability_zone": "az1"}),
                     enabled_filters=["ComputeCapabilitiesFilter",
                                      "AggregateInstanceExtraSpecsFilter"])
    hosts = [make_host("hv1", aggregates=[aggregate("a", availability_zone="az1")]),
             make_host("hv2", aggregates=[aggregate("b", availability_zone="az2")])]
    assert passes("ComputeCapabilitiesFilter", hosts[0], spec)
    decision = schedule(hosts, spec)
    assert [placement.host for placement in decision.placements] == ["hv1"], decision.summary
    assert [(r.host, r.filter) for r in decision.rejections] == [
        ("hv2", "AggregateInstanceExtraSpecsFilter")]


def test_capabilities_filter_still_checks_an_unscoped_spec_naming_a_host_attribute_as_nova_does():
    spec = make_spec(make_flavor(extra_specs={"hypervisor_type": "s== Xen"}))
    rejection = FILTERS["ComputeCapabilitiesFilter"]().host_passes(
        make_host(hypervisor_type="QEMU"), spec)
    assert (rejection.reason, rejection.detail) == (
        "capabilities", "hypervisor_type QEMU does not match 's== Xen'")


def test_unscoped_aggregate_extra_spec_places_with_the_default_filters_as_nova_does():
    # Nova's documented way to write aggregate extra specs: hv2's aggregate says ssd=true, and
    # the default filters plus AggregateInstanceExtraSpecsFilter must place on it.
    flavor = make_flavor(extra_specs={"ssd": "true"})
    hosts = [make_host("hv1"), make_host("hv2", aggregates=[aggregate("fast", ssd="true")])]
    spec = make_spec(flavor, enabled_filters=["ComputeFilter", "ComputeCapabilitiesFilter",
                                              "AggregateInstanceExtraSpecsFilter"])
    decision = schedule(hosts, spec)
    assert decision.ok, decision.summary
    assert [placement.host for placement in decision.placements] == ["hv2"]


# 2. AggregateTypeAffinityFilter ----------------------------------------------------------------

def test_type_affinity_passes_when_any_aggregate_lists_the_flavor_as_nova_does():
    host = make_host(aggregates=[aggregate("small", instance_type="m1.small"),
                                 aggregate("large", instance_type="m1.large, m1.xlarge")])
    assert passes("AggregateTypeAffinityFilter", host, make_spec(make_flavor(name="m1.small")))
    assert passes("AggregateTypeAffinityFilter", host, make_spec(make_flavor(name="m1.xlarge")))
    rejection = FILTERS["AggregateTypeAffinityFilter"]().host_passes(
        host, make_spec(make_flavor(name="m1.tiny")))
    assert rejection.reason == "aggregate_instance_type"


# 3. NumInstancesWeigher ------------------------------------------------------------------------

def test_num_instances_weigher_normalises_min_max_over_the_candidates_as_nova_does():
    # 4, 6, 8 instances: min-max gives 0, 0.5, 1 (not 4/8, 6/8, 8/8); multiplier -1.0.
    hosts = [make_host(f"hv{number}", num_instances=count)
             for number, count in ((1, 4), (2, 6), (3, 8))]
    assert order_and_weights(hosts, ["NumInstancesWeigher"], weight_multipliers={
        "num_instances_weight_multiplier": -1.0}) == [("hv1", 0.0), ("hv2", -0.5), ("hv3", -1.0)]


def test_num_instances_weigher_min_max_changes_the_pick_as_in_nova():
    # RAM 15872 and 11110.4 (0.7 of it): 1.0 and 0.7. Instances 10 and 9, multiplier -1.0:
    #   min-max 1.0 and 0.0 -> hv1 1.0 - 1.0 = 0.0, hv2 0.7 - 0.0 = 0.7: hv2 wins.
    #   (with a lower bound of 0: 1.0 and 0.9 -> hv1 0.0, hv2 -0.2: hv1 would win)
    hosts = [make_host("hv1", num_instances=10),
             make_host("hv2", num_instances=9, free_ram_mb=11110)]
    weighed = order_and_weights(hosts, ["RAMWeigher", "NumInstancesWeigher"], weight_multipliers={
        "num_instances_weight_multiplier": -1.0})
    assert [host for host, _weight in weighed] == ["hv2", "hv1"]


# 4. BuildFailureWeigher ------------------------------------------------------------------------

def test_build_failure_weigher_negates_the_multiplier_not_the_count_as_nova_does():
    # failed_builds 0, 0, 1; hv2's aggregate sets the multiplier to 1.0, the others keep 1e6.
    # Nova: raw 0, 0, 1 -> normalised 0, 0, 1, times -1e6, -1.0, -1e6: 0, 0, -1e6. RAM decides
    # between hv1 (8000/16000 = 0.5) and hv2 (1.0): hv2 first.
    hosts = [make_host("hv1", free_ram_mb=8000),
             make_host("hv2", free_ram_mb=16000,
                       aggregates=[aggregate("a", build_failure_weight_multiplier="1.0")]),
             make_host("hv3", free_ram_mb=16000, failed_builds=1)]
    assert order_and_weights(hosts, ["RAMWeigher", "BuildFailureWeigher"]) == [
        ("hv2", 1.0), ("hv1", 0.5), ("hv3", 1.0 - 1000000.0)]
    details = weigh_hosts(hosts, [WEIGHERS["BuildFailureWeigher"]()], make_spec())
    assert [(item.host_state.host, item.weights[0].raw, item.weights[0].multiplier)
            for item in details] == [("hv1", 0, -1000000.0), ("hv2", 0, -1.0),
                                     ("hv3", 1, -1000000.0)]


# 5. ImagePropertiesFilter ----------------------------------------------------------------------

@pytest.mark.parametrize("properties, supported", [
    ({"hw_architecture": "x86_32"}, ["i686", "xen", "xen"]),      # Xen's old name
    ({"hw_architecture": "i486"}, ["i686", "qemu", "hvm"]),
    ({"architecture": "I586"}, ["i686", "qemu", "hvm"]),
    ({"hw_architecture": "AMD64"}, ["x86_64", "kvm", "hvm"]),
    ({"img_hv_type": "xapi"}, ["x86_64", "xen", "hvm"]),
    ({"hw_vm_mode": "hv"}, ["x86_64", "kvm", "hvm"]),
    ({"vm_mode": "pv"}, ["x86_64", "xen", "xen"]),
    ({"hw_vm_mode": "baremetal"}, ["x86_64", "kvm", "hvm"]),
], ids=str)
def test_image_properties_are_canonicalised_before_comparing_as_nova_does(properties, supported):
    host = make_host(supported_instances=[supported])
    assert passes("ImagePropertiesFilter", host, make_spec(image_properties=properties))


def test_an_unknown_image_architecture_is_refused_with_the_allowed_values():
    with pytest.raises(SchedulerInputError, match="aarch64") as error:
        make_spec(image_properties={"hw_architecture": "arm64"})
    assert error.value.field == "image_properties.hw_architecture"


# 6. Comma-separated aggregate metadata ---------------------------------------------------------

def test_availability_zone_metadata_is_split_at_commas_as_nova_does():
    host = make_host(aggregates=[aggregate("a", availability_zone="az1, az2")])
    assert passes("AvailabilityZoneFilter", host, make_spec(availability_zone="az2"))
    assert passes("AvailabilityZoneFilter", host, make_spec(availability_zone="az1"))
    assert not passes("AvailabilityZoneFilter", host, make_spec(availability_zone="az3"))
    # the inventory copies an aggregate's zone into the host's own field: split as well
    own = make_host(availability_zone="az1,az2")
    assert passes("AvailabilityZoneFilter", own, make_spec(availability_zone="az2"))


def test_aggregate_extra_spec_metadata_is_split_at_commas_as_nova_does():
    host = make_host(aggregates=[aggregate("a", storage="ssd,nvme")])
    spec = make_spec(make_flavor(extra_specs={"aggregate_instance_extra_specs:storage": "nvme"}))
    assert passes("AggregateInstanceExtraSpecsFilter", host, spec)


# 7. JsonFilter ---------------------------------------------------------------------------------

@pytest.mark.parametrize("query", ["[]", [], '["and", [], [">=", "$free_ram_mb", 1]]'])
def test_json_filter_passes_every_host_on_an_empty_query_as_nova_does(query):
    spec = make_spec(scheduler_hints={"query": query})
    assert passes("JsonFilter", make_host(), spec)


# 8. MetricsWeigher with required ---------------------------------------------------------------

def test_metrics_weigher_with_required_fails_naming_the_host_and_metric_as_nova_does():
    hosts = [make_host("hv1", metrics={"cpu.percent": 10}), make_host("hv2", metrics={})]
    spec = make_spec(weighers=["MetricsWeigher"], metrics_weight_setting=["cpu.percent=1"])
    with pytest.raises(SchedulerInputError, match="hv2.*cpu.percent") as error:
        schedule(hosts, spec)
    assert error.value.field == "hosts[hv2].metrics"
    assert spec.metrics_required is True  # Nova's default, which the request above left as is


def test_metrics_weigher_without_required_weighs_a_missing_metric_as_unavailable():
    hosts = [make_host("hv1", metrics={}), make_host("hv2", metrics={"cpu.percent": 10})]
    spec = make_spec(weighers=["MetricsWeigher"], metrics_weight_setting=["cpu.percent=1"],
                     metrics_required=False)
    decision = schedule(hosts, spec)
    assert [placement.host for placement in decision.placements] == ["hv2"]
    assert [(runner["host"], runner["weight"]) for runner in decision.placements[0].runners_up] == [("hv1", 0.0)]


# 9. RetryFilter --------------------------------------------------------------------------------

def test_retry_filter_compares_host_and_node_pairs_as_nova_does():
    spec = make_spec(retry_hosts=[["hv0", "node-a"]])
    assert not passes("RetryFilter", make_host("hv0", nodename="node-a"), spec)
    assert passes("RetryFilter", make_host("hv0", nodename="node-b"), spec)


# Aggregate numbers -----------------------------------------------------------------------------

def test_a_non_numeric_aggregate_value_falls_back_to_the_default_as_nova_does():
    # Nova's validate_num_values raises on "lots", and the filter then takes the host's own
    # ratio (4.0), not the minimum of the numeric values (2.0).
    host = make_host(vcpus_total=8, aggregates=[aggregate("a", cpu_allocation_ratio="2.0"),
                                                aggregate("b", cpu_allocation_ratio="lots")])
    assert passes("AggregateCoreFilter", host, make_spec())
    assert host.limits["vcpu"] == 32.0
