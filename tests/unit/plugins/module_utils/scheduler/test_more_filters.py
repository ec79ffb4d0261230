"""One table per filter beyond the resource ones, with Nova's edge cases; expected values by hand."""
from __future__ import annotations

import pytest
from ansible_collections.berth.fleet.plugins.module_utils.scheduler import extra_specs_ops
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import FILTERS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    KIND_NEVER,
    KIND_NOT_NOW,
)

from ._builders import aggregate, make_flavor, make_host, make_spec, verdict


# --- extra_specs_ops: Nova's operator table ---------------------------------------------------

OPS_CASES = [
    ("123", "123", True), ("124", "123", False),            # no operator: string equality
    ("4096", "= 2048", True), ("1024", "= 2048", False),    # "=" is "at least"
    ("2048", "== 2048", True), ("2048.0", "== 2048", True), ("2049", "== 2048", False),
    ("1", "!= 2", True), ("2", "!= 2", False),
    ("8", ">= 8", True), ("7", ">= 8", False), ("8", "<= 8", True), ("9", "<= 8", False),
    ("abc", "s== abc", True), ("abd", "s!= abc", True), ("abc", "s!= abc", False),
    ("b", "s> a", True), ("a", "s>= a", True), ("a", "s< b", True), ("b", "s<= a", False),
    ("10", "s< 9", True),                                   # string order, not numeric
    ("avx,sse", "<in> avx", True), ("sse", "<in> avx", False),
    ("avx sse aes", "<all-in> avx aes", True), ("avx sse", "<all-in> avx aes", False),
    ("AMD", "<or> Intel <or> AMD", True), ("Hygon", "<or> Intel <or> AMD", False),
    (None, ">= 1", False), ("x", ">= 1", False),            # not a number: no match
    ("8", ">=", False),                                     # operator without operand
]


@pytest.mark.parametrize("value, requirement, matches", OPS_CASES,
                         ids=[f"{v}|{r}" for v, r, _expected in OPS_CASES])
def test_extra_specs_ops(value, requirement, matches):
    assert extra_specs_ops.match(value, requirement) is matches


# --- AvailabilityZoneFilter -------------------------------------------------------------------

AZ_CASES = [
    ({}, None, None),                                                   # no zone asked
    ({}, "nova", None),                                                 # default zone
    ({}, "az1", ("wrong_availability_zone", "nova")),
    ({"aggregates": [aggregate("a", availability_zone="az1")]}, "az1", None),
    ({"aggregates": [aggregate("a", availability_zone="az2")]}, "az1",
     ("wrong_availability_zone", "az2")),
    ({"availability_zone": "az1", "aggregates": [aggregate("a", availability_zone="az2")]},
     "az1", None),                                                      # its own field wins
    ({"aggregates": [aggregate("a", availability_zone="az2"), aggregate("b", ram="x")]}, "nova",
     ("wrong_availability_zone", "az2")),
]


@pytest.mark.parametrize("fields, zone, expected", AZ_CASES)
def test_availability_zone_filter(fields, zone, expected):
    assert verdict("AvailabilityZoneFilter", make_host(**fields),
                   make_spec(availability_zone=zone)) == expected


# --- Aggregate ratio filters: a host in several aggregates, the minimum wins -----------------

def test_aggregate_ram_filter_takes_the_smallest_ratio_of_the_host_aggregates():
    # used = 8192 − 2048 = 6144; ratio min(1.5, 1.2) = 1.2: limit 9830.4, 3686.4 left < 4096
    host = make_host(total_usable_ram_mb=8192, free_ram_mb=2048,
                     aggregates=[aggregate("a", ram_allocation_ratio="1.5"),
                                 aggregate("b", ram_allocation_ratio="1.2")])
    spec = make_spec(make_flavor(memory_mb=4096))
    rejection = FILTERS["AggregateRamFilter"]().host_passes(host, spec)
    assert (rejection.reason, rejection.limit, rejection.free) == (
        "insufficient_ram", pytest.approx(9830.4), pytest.approx(3686.4))
    # RamFilter reads the host's own 1.0: limit 8192, 2048 left
    assert FILTERS["RamFilter"]().host_passes(host, spec).limit == 8192


@pytest.mark.parametrize("metadata, expected_limit", [
    ([], 32.0),                                   # no aggregate value: the host's 4.0
    ([aggregate("a", cpu_allocation_ratio="2.0")], 16.0),
    ([aggregate("a", cpu_allocation_ratio="2.0"), aggregate("b", cpu_allocation_ratio="3")], 16.0),
    ([aggregate("a", cpu_allocation_ratio="many")], 32.0),   # not a number: ignored, as Nova
])
def test_aggregate_core_filter_limit(metadata, expected_limit):
    host = make_host(vcpus_total=8, aggregates=metadata)
    assert FILTERS["AggregateCoreFilter"]().host_passes(host, make_spec()) is None
    assert host.limits["vcpu"] == expected_limit


def test_aggregate_disk_filter_ratio():
    # 100 GiB, free 10 GiB; ratio 2.0: limit 204800, used 92160, 112640 left ≥ 20480
    host = make_host(free_disk_mb=10240, aggregates=[aggregate("a", disk_allocation_ratio="2.0")])
    assert FILTERS["AggregateDiskFilter"]().host_passes(host, make_spec()) is None
    assert FILTERS["DiskFilter"]().host_passes(host, make_spec()).reason == "insufficient_disk"


# --- AggregateInstanceExtraSpecsFilter --------------------------------------------------------

AGG_SPECS_CASES = [
    ({}, [], None),                                                        # nothing asked
    ({"hw:cpu_policy": "dedicated"}, [], None),                            # other scope
    ({"ssd": "true"}, [aggregate("a", ssd="true")], None),                 # unscoped counts
    ({"aggregate_instance_extra_specs:ssd": "true"}, [aggregate("a", ssd="true")], None),
    ({"aggregate_instance_extra_specs:ssd": "true"}, [],
     ("aggregate_extra_specs", "no aggregate sets ssd")),
    ({"aggregate_instance_extra_specs:ssd": "true"}, [aggregate("a", ssd="false")],
     ("aggregate_extra_specs", "ssd: false does not match 'true'")),
    # any of the host's aggregates may match
    ({"aggregate_instance_extra_specs:ssd": "true"},
     [aggregate("a", ssd="false"), aggregate("b", ssd="true")], None),
    ({"aggregate_instance_extra_specs:cores": ">= 8"}, [aggregate("a", cores="16")], None),
]


@pytest.mark.parametrize("extra_specs, aggregates, expected", AGG_SPECS_CASES)
def test_aggregate_instance_extra_specs_filter(extra_specs, aggregates, expected):
    spec = make_spec(make_flavor(extra_specs=extra_specs))
    assert verdict("AggregateInstanceExtraSpecsFilter", make_host(aggregates=aggregates),
                   spec) == expected


# --- ComputeCapabilitiesFilter ----------------------------------------------------------------

CAPS_CASES = [
    ({}, None),
    ({"capabilities:hypervisor_type": "QEMU"}, None),
    ({"hypervisor_type": "s== QEMU"}, None),                                # unscoped counts
    ({"capabilities:hypervisor_type": "Xen"},
     ("capabilities", "hypervisor_type QEMU does not match 'Xen'")),
    ({"capabilities:cpu_info:vendor": "<or> AMD <or> Intel"}, None),
    ({"capabilities:cpu_info:topology:cores": ">= 4"}, None),
    ({"capabilities:cpu_info:topology:cores": ">= 8"},
     ("capabilities", "cpu_info:topology:cores 4 does not match '>= 8'")),
    ({"capabilities:cpu_info:features": "<in> avx2"}, None),
    ({"capabilities:cpu_info:model": "Haswell"}, ("capabilities", "no cpu_info:model")),
    ({"capabilities:limits": "x"}, ("capabilities", "no limits")),          # not a fact
    ({"capabilities:vcpus_total": "= 8"}, None),
    ({"trust:trusted_host": "true"}, None),                                 # other scope
]


@pytest.mark.parametrize("extra_specs, expected", CAPS_CASES)
def test_compute_capabilities_filter(extra_specs, expected):
    host = make_host(hypervisor_type="QEMU", vcpus_total=8,
                     cpu_info={"vendor": "Intel", "topology": {"cores": 4},
                               "features": ["avx2", "sse4"]})
    spec = make_spec(make_flavor(extra_specs=extra_specs))
    assert verdict("ComputeCapabilitiesFilter", host, spec) == expected


# --- ImagePropertiesFilter --------------------------------------------------------------------

IMAGE_CASES = [
    ({}, [], None, True),                                           # nothing asked
    ({"hw_architecture": "x86_64"}, [], None, False),               # host lists nothing
    ({"hw_architecture": "x86_64"}, [["x86_64", "kvm", "hvm"]], None, True),
    ({"architecture": "AMD64"}, [["x86_64", "kvm", "hvm"]], None, True),    # old name, alias
    ({"hw_architecture": "aarch64"}, [["x86_64", "kvm", "hvm"]], None, False),
    ({"img_hv_type": "qemu", "hw_vm_mode": "hvm"}, [["x86_64", "QEMU", "hvm"]], None, True),
    ({"img_hv_type": "xen"}, [["x86_64", "kvm", "hvm"]], None, False),
    # the version only counts once a supported triple matched
    ({"hw_architecture": "x86_64", "img_hv_requested_version": ">= 8.0"},
     [["x86_64", "kvm", "hvm"]], 9000000, True),
    ({"hw_architecture": "x86_64", "img_hv_requested_version": ">= 8.0, < 9"},
     [["x86_64", "kvm", "hvm"]], 9000000, False),
    ({"hw_architecture": "x86_64", "img_hv_requested_version": ">= 10.0"},
     [["x86_64", "kvm", "hvm"]], None, True),                       # version unknown: passes
]


@pytest.mark.parametrize("properties, supported, version, passes", IMAGE_CASES)
def test_image_properties_filter(properties, supported, version, passes):
    host = make_host(supported_instances=supported, hypervisor_version=version)
    spec = make_spec(image_properties=properties)
    result = verdict("ImagePropertiesFilter", host, spec)
    assert (result is None) is passes
    if result is not None:
        assert result[0] == "image_properties"


def test_image_version_requirement_is_checked_before_deciding():
    with pytest.raises(SchedulerInputError) as error:
        make_spec(image_properties={"img_hv_requested_version": "newest"})
    assert error.value.field == "image_properties.img_hv_requested_version"


# --- server groups ----------------------------------------------------------------------------

GROUP_CASES = [
    # filter, group, host, expected
    ("ServerGroupAffinityFilter", None, "hv1", None),
    ("ServerGroupAffinityFilter", {"name": "g", "policy": "affinity"}, "hv1", None),  # no member yet
    ("ServerGroupAffinityFilter", {"name": "g", "policy": "affinity", "hosts": ["hv1"]}, "hv1", None),
    ("ServerGroupAffinityFilter", {"name": "g", "policy": "affinity", "hosts": ["hv2"]}, "hv1",
     ("affinity", "group g is on hv2")),
    ("ServerGroupAffinityFilter", {"name": "g", "policy": "anti-affinity", "hosts": ["hv2"]}, "hv1",
     None),                                                              # another policy
    ("ServerGroupAntiAffinityFilter", {"name": "g", "policy": "anti-affinity", "hosts": ["hv1"]},
     "hv1", ("anti_affinity", "group g")),
    ("ServerGroupAntiAffinityFilter", {"name": "g", "policy": "anti-affinity", "hosts": ["hv2"]},
     "hv1", None),
    # max_server_per_host 2: one member here leaves room for one more, two do not
    ("ServerGroupAntiAffinityFilter", {"name": "g", "policy": "anti-affinity", "hosts": ["hv1"],
                                       "rules": {"max_server_per_host": 2}}, "hv1", None),
    ("ServerGroupAntiAffinityFilter", {"name": "g", "policy": "anti-affinity", "members": {"hv1": 2},
                                       "rules": {"max_server_per_host": 2}}, "hv1",
     ("anti_affinity", "group g")),
    ("ServerGroupAntiAffinityFilter", {"name": "g", "policy": "soft-anti-affinity",
                                       "hosts": ["hv1"]}, "hv1", None),  # soft: weighers only
]


@pytest.mark.parametrize("filter_name, group, host, expected", GROUP_CASES)
def test_server_group_filters(filter_name, group, host, expected):
    assert verdict(filter_name, make_host(host), make_spec(server_group=group)) == expected


@pytest.mark.parametrize("group, field", [
    ({"name": "g", "policy": "sometimes"}, "server_group.policy"),
    ({"name": "", "policy": "affinity"}, "server_group.name"),
    ({"name": "g", "policy": "affinity", "rules": {"max_server_per_host": 0}},
     "server_group.rules.max_server_per_host"),
    ({"name": "g", "policy": "affinity", "rules": {"max": 1}}, "server_group.rules"),
    ({"name": "g", "policy": "affinity", "members": {"hv1": -1}}, "server_group.members.hv1"),
    ({"name": "g", "policy": "affinity", "uuid": "x"}, "server_group.uuid"),
])
def test_server_group_validation_names_the_field(group, field):
    with pytest.raises(SchedulerInputError) as error:
        make_spec(server_group=group)
    assert error.value.field == field


# --- hints: same host, different host, JSON query ---------------------------------------------

HINT_CASES = [
    ("SameHostFilter", {}, None),
    ("SameHostFilter", {"same_host": ["u1"]}, None),
    ("SameHostFilter", {"same_host": "u9"}, ("same_host", None)),       # a single uuid
    ("DifferentHostFilter", {"different_host": ["u9"]}, None),
    ("DifferentHostFilter", {"different_host": ["u2", "u9"]}, ("different_host", "u2")),
    ("JsonFilter", {"query": '[">=", "$free_ram_mb", 1024]'}, None),
    ("JsonFilter", {"query": '[">=", "$free_ram_mb", 99999]'},
     ("query", '[">=", "$free_ram_mb", 99999]')),
    ("JsonFilter", {"query": '["and", ["=", "$cpu_info.vendor", "Intel"], ["<", "$num_instances", 3]]'},
     None),
    ("JsonFilter", {"query": '["or", ["=", "$hypervisor_type", "Xen"], ["in", "$host", "hv0", "hv1"]]'},
     None),
    ("JsonFilter", {"query": '["not", ["=", "$host", "hv1"]]'},
     ("query", '["not", ["=", "$host", "hv1"]]')),
    # an unknown variable is dropped, leaving too few arguments: false, as in Nova
    ("JsonFilter", {"query": '["=", "$nothing", 1]'}, ("query", '["=", "$nothing", 1]')),
]


@pytest.mark.parametrize("filter_name, hints, expected", HINT_CASES)
def test_hint_filters(filter_name, hints, expected):
    host = make_host(instances=["u1", "u2"], cpu_info={"vendor": "Intel"}, num_instances=2,
                     hypervisor_type="QEMU")
    assert verdict(filter_name, host, make_spec(scheduler_hints=hints)) == expected


@pytest.mark.parametrize("hints, field", [
    ({"query": "[>= nonsense"}, "scheduler_hints.query"),
    ({"query": '["~", 1, 2]'}, "scheduler_hints.query"),
    ({"near": "hv1"}, "scheduler_hints.near"),
    ({"same_host": [1]}, "scheduler_hints.same_host"),
    ({"group": "web"}, "scheduler_hints.group"),     # names a group the request does not describe
])
def test_hint_validation_names_the_field(hints, field):
    with pytest.raises(SchedulerInputError) as error:
        make_spec(scheduler_hints=hints)
    assert error.value.field == field


# --- counts: instances and io ops, with their aggregate variants -------------------------------

COUNT_CASES = [
    ("NumInstancesFilter", {"num_instances": 49}, None),
    ("NumInstancesFilter", {"num_instances": 50}, "too_many_instances"),      # default 50
    ("AggregateNumInstancesFilter", {"num_instances": 49}, None),
    ("AggregateNumInstancesFilter",
     {"num_instances": 5, "aggregates": [aggregate("a", max_instances_per_host="10"),
                                         aggregate("b", max_instances_per_host="5")]},
     "too_many_instances"),                                                    # min(10, 5)
    ("IoOpsFilter", {"num_io_ops": 7}, None),
    ("IoOpsFilter", {"num_io_ops": 8}, "too_many_io_ops"),                     # default 8
    ("AggregateIoOpsFilter", {"num_io_ops": 2, "aggregates": [aggregate("a", max_io_ops_per_host="2")]},
     "too_many_io_ops"),
    ("AggregateIoOpsFilter", {"num_io_ops": 2, "aggregates": [aggregate("a", max_io_ops_per_host="x")]},
     None),                                                                    # not a number
]


@pytest.mark.parametrize("filter_name, fields, reason", COUNT_CASES)
def test_count_filters(filter_name, fields, reason):
    result = verdict(filter_name, make_host(**fields), make_spec())
    assert (result and result[0]) == reason


# --- AggregateTypeAffinityFilter, IsolatedHostsFilter, RetryFilter, AllHostsFilter -----------

@pytest.mark.parametrize("aggregates, flavor_name, passes", [
    ([], "m1.small", True),
    ([aggregate("a", instance_type="m1.small")], "m1.small", True),
    ([aggregate("a", instance_type="m1.tiny, m1.small")], "m1.small", True),
    ([aggregate("a", instance_type="m1.tiny")], "m1.small", False),
    # any aggregate that lists the flavor will do, as in Nova
    ([aggregate("a", instance_type="m1.small"), aggregate("b", instance_type="m1.tiny")],
     "m1.small", True),
    ([aggregate("a", instance_type="m1.large"), aggregate("b", instance_type="m1.tiny")],
     "m1.small", False),
])
def test_aggregate_type_affinity_filter(aggregates, flavor_name, passes):
    spec = make_spec(make_flavor(name=flavor_name))
    result = verdict("AggregateTypeAffinityFilter", make_host(aggregates=aggregates), spec)
    assert (result is None) is passes


ISOLATED_CASES = [
    # isolated_hosts, isolated_images, image, restrict, host, passes  (Nova's truth table)
    ([], [], "img", True, "hv1", True),
    (["hv1"], ["iso"], "iso", True, "hv1", True),
    (["hv1"], ["iso"], "iso", True, "hv2", False),
    (["hv1"], ["iso"], "img", True, "hv1", False),
    (["hv1"], ["iso"], "img", True, "hv2", True),
    (["hv1"], ["iso"], "img", False, "hv1", True),       # unrestricted: others may use it
    (["hv1"], ["iso"], "iso", False, "hv2", False),
]


@pytest.mark.parametrize("hosts, images, image, restrict, host, passes", ISOLATED_CASES)
def test_isolated_hosts_filter(hosts, images, image, restrict, host, passes):
    spec = make_spec(isolated_hosts=hosts, isolated_images=images, image_id=image,
                     restrict_isolated_hosts_to_isolated_images=restrict)
    assert (verdict("IsolatedHostsFilter", make_host(host), spec) is None) is passes


def test_retry_and_all_hosts_filters():
    spec = make_spec(retry_hosts=["hv1"])
    assert verdict("RetryFilter", make_host("hv1"), spec) == ("retried", "node hv1")
    assert verdict("RetryFilter", make_host("hv2"), spec) is None
    assert verdict("AllHostsFilter", make_host("hv1", disabled=True), spec) is None


# --- once per request, as Nova marks them; "never" told apart from "not now" -------------------

ONCE = {"ComputeFilter", "AvailabilityZoneFilter", "ComputeCapabilitiesFilter",
        "ImagePropertiesFilter", "AggregateInstanceExtraSpecsFilter", "SameHostFilter",
        "DifferentHostFilter", "JsonFilter", "AggregateTypeAffinityFilter", "IsolatedHostsFilter",
        "AllHostsFilter",
        "AggregateImagePropertiesIsolation", "AggregateMultiTenancyIsolation",
        "SimpleCIDRAffinityFilter",
        # Berth's own: a pool's images and a host's networks do not change within a request.
        "PoolImageFilter", "NetworkFilter",
        # The operator's rules and a host's aggregates do not change within a request either.
        "HostRuleFilter"}


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_run_once_per_request_as_nova_marks_it(name):
    assert FILTERS[name].run_filter_once_per_request is (name in ONCE)


@pytest.mark.parametrize("filter_name, fields, spec_fields, kind", [
    ("RamFilter", {"free_ram_mb": 100}, {}, KIND_NOT_NOW),
    ("RamFilter", {"total_usable_ram_mb": 1024, "free_ram_mb": 1024}, {}, KIND_NEVER),
    ("ServerGroupAntiAffinityFilter", {}, {"server_group": {"name": "g", "policy": "anti-affinity",
                                                            "hosts": ["hv1"]}}, KIND_NOT_NOW),
    ("AvailabilityZoneFilter", {}, {"availability_zone": "az9"}, KIND_NEVER),
    ("ComputeFilter", {"disabled": True}, {}, KIND_NEVER),
    ("ComputeFilter", {"service_up": False}, {}, KIND_NOT_NOW),
])
def test_rejection_kind(filter_name, fields, spec_fields, kind):
    rejection = FILTERS[filter_name]().host_passes(make_host(**fields), make_spec(**spec_fields))
    assert rejection.kind == kind


# --- host state fields of DESIGN.md's schema: bad input names the field -------------------------

@pytest.mark.parametrize("fields, field", [
    ({"aggregates": {"name": "a"}}, "hosts[hv1].aggregates"),
    ({"aggregates": [{"metadata": {}}]}, "hosts[hv1].aggregates"),
    ({"aggregates": [{"name": "a", "metadata": ["x"]}]}, "hosts[hv1].aggregates"),
    ({"supported_instances": [["x86_64", 1, "hvm"]]}, "hosts[hv1].supported_instances"),
    ({"metrics": [1]}, "hosts[hv1].metrics"),
    ({"cpu_info": "Intel"}, "hosts[hv1].cpu_info"),
    ({"instances": "uuid-1"}, "hosts[hv1].instances"),
    ({"hypervisor_version": "9.0"}, "hosts[hv1].hypervisor_version"),
    ({"failed_builds": -1}, "hosts[hv1].failed_builds"),
    ({"availability_zone": 3}, "hosts[hv1].availability_zone"),
])
def test_host_state_schema_errors_name_the_field(fields, field):
    with pytest.raises(SchedulerInputError) as error:
        make_host("hv1", **fields)
    assert error.value.field == field


def test_aggregate_values_keep_order_and_numbers_take_the_minimum():
    host = make_host(aggregates=[aggregate("a", ratio="2.0", zone="az1", limit="3"),
                                 aggregate("b", ratio="1.5", zone="az1,az2", limit="2.5"),
                                 aggregate("c", ratio="lots")])
    assert host.aggregate_values("zone") == ["az1", "az1,az2"]
    assert host.aggregate_metadata()["zone"] == ["az1", "az2"]
    assert host.aggregate_values("ratio") == ["2.0", "1.5", "lots"]
    # one value that is not a number: the default, as Nova's validate_num_values
    assert host.aggregate_number("ratio", 4.0) == 4.0
    host.aggregates.pop()
    assert host.aggregate_number("ratio", 4.0) == 1.5
    assert host.aggregate_number("missing", 4.0) == 4.0
    assert host.aggregate_number("limit", 8) == 2.5
    assert host.aggregate_number("limit", 8, integer=True) == 8   # int("2.5") fails in Nova too
