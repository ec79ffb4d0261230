"""PCI passthrough and vGPUs: the operator's aliases, what a flavor asks, which devices a host
gives (pci.fit), PciPassthroughFilter and PCIWeigher. Nova's examples (nova/tests/unit/pci/
test_stats.py, scheduler/filters/test_pci_passthrough_filters.py, weights/test_weights_pci.py)
adapted to Berth's device lists."""

from __future__ import annotations

import dataclasses

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import SchedulerInputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.pci import (
    DeviceRequest,
    PCIRequest,
    check_aliases,
    fit,
    free_alias_devices,
    pci_request,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import weigh_hosts
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.pci import PCIWeigher

from ._builders import make_flavor, make_host, make_spec, verdict

# ---- a host: an X710 PF with two VFs on cell 1, a VF-less NIC without NUMA node, two GPUs ----


def pf(address, vfs, numa_node=1, product="1572"):
    return {"name": "pci_" + address, "address": address, "vendor_id": "8086", "product_id": product,
            "numa_node": numa_node, "dev_type": "type-PF", "mdev_types": [], "virtual_functions": vfs}


def vf(address, parent, numa_node=1, product="154c"):
    return {"name": "pci_" + address, "address": address, "vendor_id": "8086", "product_id": product,
            "numa_node": numa_node, "dev_type": "type-VF", "mdev_types": [], "parent_address": parent}


def pci(address, numa_node, vendor="10de", product="1eb8", mdev_types=()):
    return {"name": "pci_" + address, "address": address, "vendor_id": vendor, "product_id": product,
            "numa_node": numa_node, "dev_type": "type-PCI", "mdev_types": list(mdev_types)}


def mdev_type(kind, available):
    return {"type": kind, "name": kind, "device_api": "vfio-pci", "available_instances": available}


DEVICES = [
    pf("0000:3b:00.0", ["0000:3b:02.0", "0000:3b:02.1"]),
    vf("0000:3b:02.0", "0000:3b:00.0"),
    vf("0000:3b:02.1", "0000:3b:00.0"),
    pci("0000:81:00.0", 0),
    pci("0000:82:00.0", 1),
    pci("0000:05:00.0", None, vendor="8086", product="0443"),
]
ALIASES = check_aliases([
    {"name": "vf", "vendor_id": "8086", "product_id": "154c", "device_type": "type-VF"},
    {"name": "pf", "vendor_id": "8086", "product_id": "1572", "device_type": "type-PF"},
    {"name": "gpu", "vendor_id": "10de", "product_id": "1eb8", "numa_policy": "required"},
    {"name": "qat", "vendor_id": "8086", "product_id": "0443"},
])


def ask(alias, count=1, policy="legacy"):
    entries = [entry for entry in ALIASES if entry["name"] == alias]
    specs = tuple((entry["vendor_id"], entry["product_id"], entry["device_type"]) for entry in entries)
    return DeviceRequest(alias, count, specs, policy)


def addresses(result):
    devices, why = result
    assert why is None, why
    return [device["address"] for device in devices["pci"]]


def holding(*addresses_held, mdevs=()):
    return [{"pci": [{"address": address} for address in addresses_held],
             "mdevs": [{"parent": parent, "type": kind} for parent, kind in mdevs]}]


# ---- aliases --------------------------------------------------------------------------------

def test_aliases_are_checked_and_completed_as_nova_reads_them():
    assert check_aliases([
        {"name": " nic ", "vendor_id": "8086", "product_id": "154C", "device_type": "type-VF"},
        '{"name": "nic", "vendor_id": "8086", "product_id": "10ed", "device_type": "type-VF"}',
    ]) == [
        {"name": "nic", "vendor_id": "8086", "product_id": "154c", "device_type": "type-VF", "numa_policy": "legacy"},
        {"name": "nic", "vendor_id": "8086", "product_id": "10ed", "device_type": "type-VF", "numa_policy": "legacy"},
    ]
    assert check_aliases(None) == [] and check_aliases([]) == []
    # Checked again (a request's from_dict of its own to_dict), they stay as they are.
    assert check_aliases(ALIASES) == ALIASES


@pytest.mark.parametrize("value, field, words", [
    ("nic", "pci_alias", "must be a list"),
    ([{"name": "nic", "vendor_id": "8086"}], "pci_alias[0].product_id", "four hex digits"),
    ([{"name": "nic", "vendor_id": "8086", "product_id": "0x154c"}], "pci_alias[0].product_id", "four hex"),
    ([{"vendor_id": "8086", "product_id": "154c"}], "pci_alias[0].name", "must be a name"),
    ([{"name": "a:b", "vendor_id": "8086", "product_id": "154c"}], "pci_alias[0].name", "without ':'"),
    ([{"name": "nic", "vendor_id": "8086", "product_id": "154c", "device_type": "type-VDPA"}],
     "pci_alias[0].device_type", "type-PCI, type-PF, type-VF"),
    ([{"name": "nic", "vendor_id": "8086", "product_id": "154c", "capability_type": "pci"}],
     "pci_alias[0].capability_type", "unknown key"),
    ([{"name": "nic", "vendor_id": "8086", "product_id": "154c"},
      {"name": "nic", "vendor_id": "8086", "product_id": "10ed", "numa_policy": "required"}],
     "pci_alias[1].numa_policy", "entries of one name must agree"),
    ([{"name": "nic", "vendor_id": "8086", "product_id": "154c", "device_type": "type-VF"},
      {"name": "nic", "vendor_id": "8086", "product_id": "10ed"}],
     "pci_alias[1].device_type", "must each give device_type"),
    ([{"name": "nic", "vendor_id": "8086", "product_id": "154c", "device_type": "type-VF"},
      {"name": "nic", "vendor_id": "8086", "product_id": "10ed", "device_type": "type-PF"}],
     "pci_alias[1].device_type", "entries of one name must agree"),
    (["{not json"], "pci_alias[0]", "is not JSON"),
], ids=["not-a-list", "no-product", "0x-product", "no-name", "colon-in-name", "vdpa",
        "unknown-key", "policy-mismatch", "type-missing", "type-mismatch", "bad-json"])
def test_a_bad_alias_is_refused_naming_its_field(value, field, words):
    with pytest.raises(SchedulerInputError) as caught:
        check_aliases(value)
    assert caught.value.field == field and words in str(caught.value)


# ---- requests -------------------------------------------------------------------------------

def test_a_flavor_asks_for_devices_by_alias_and_vgpus_and_the_flavor_policy_wins():
    flavor = make_flavor(extra_specs={"pci_passthrough:alias": "vf:2, qat:1", "resources:VGPU": "1",
                                      "hw:pci_numa_affinity_policy": "preferred"})
    request = pci_request(flavor, {}, ALIASES, ["nvidia-35"])
    assert request == PCIRequest(devices=(dataclasses.replace(ask("vf", 2), numa_policy="preferred"),
                                          dataclasses.replace(ask("qat"), numa_policy="preferred")),
                                 vgpus=1, mdev_types=("nvidia-35",))
    assert request.describe() == ("2 x alias vf (8086:154c type-VF), 1 x alias qat (8086:0443), "
                                  "1 x vGPU (mdev type nvidia-35)")
    # Without a policy of the flavor or image, each alias keeps its own.
    assert pci_request(make_flavor(extra_specs={"pci_passthrough:alias": "gpu:1"}), {}, ALIASES).devices[0] \
        .numa_policy == "required"
    assert pci_request(make_flavor(extra_specs={"pci_passthrough:alias": "gpu:1"}),
                       {"hw_pci_numa_affinity_policy": "legacy"}, ALIASES).devices[0].numa_policy == "legacy"
    assert pci_request(make_flavor(), {}, ALIASES) is None
    assert pci_request(make_flavor(extra_specs={"resources:VGPU": "0"}), {}, []) is None


@pytest.mark.parametrize("extra_specs, image, field, words", [
    ({"pci_passthrough:alias": "nic:1"}, {}, "flavor.extra_specs.pci_passthrough:alias",
     "names PCI alias 'nic', which is not defined; defined: gpu, pf, qat, vf"),
    ({"pci_passthrough:alias": "vf"}, {}, "flavor.extra_specs.pci_passthrough:alias", "alias:count items"),
    ({"pci_passthrough:alias": "vf:0"}, {}, "flavor.extra_specs.pci_passthrough:alias", "a count is 1 to 64"),
    ({"pci_passthrough:alias": "vf:-1"}, {}, "flavor.extra_specs.pci_passthrough:alias", "alias:count items"),
    ({"pci_passthrough:alias": "vf:two"}, {}, "flavor.extra_specs.pci_passthrough:alias", "alias:count items"),
    ({"pci_passthrough:alias": "vf:1,"}, {}, "flavor.extra_specs.pci_passthrough:alias", "alias:count items"),
    ({"resources:VGPU": "-1"}, {}, "flavor.extra_specs.resources:VGPU", "whole number 0 to 64"),
    ({"resources:VGPU": "1.5"}, {}, "flavor.extra_specs.resources:VGPU", "whole number"),
    ({"hw:pci_numa_affinity_policy": "strict"}, {}, "flavor.extra_specs.hw:pci_numa_affinity_policy",
     "must be one of required, legacy, preferred, socket"),
    ({"hw:pci_numa_affinity_policy": "required"}, {"hw_pci_numa_affinity_policy": "preferred"},
     "image_properties.hw_pci_numa_affinity_policy", "may not change the flavor's policy"),
], ids=["unknown-alias", "no-count", "zero", "negative", "word", "trailing-comma", "vgpu-negative",
        "vgpu-fraction", "bad-policy", "image-against-flavor"])
def test_a_bad_request_is_refused_naming_the_spec(extra_specs, image, field, words):
    with pytest.raises(SchedulerInputError) as caught:
        RequestSpec(flavor=make_flavor(extra_specs=extra_specs), image_properties=image, pci_alias=ALIASES)
    assert caught.value.field == field and words in str(caught.value)


def test_without_aliases_the_refusal_says_where_they_are_set():
    with pytest.raises(SchedulerInputError, match="defined: none \\(the operator sets them in pci_alias\\)"):
        RequestSpec(flavor=make_flavor(extra_specs={"pci_passthrough:alias": "nic:1"}))


def test_the_request_spec_computes_pci_and_round_trips():
    spec = RequestSpec(flavor=make_flavor(extra_specs={"pci_passthrough:alias": "vf:1"}),
                       pci_alias=[{"name": "vf", "vendor_id": "8086", "product_id": "154C", "device_type": "type-VF"}],
                       enabled_mdev_types=["nvidia-35"])
    assert spec.pci == PCIRequest(devices=(ask("vf"),), mdev_types=("nvidia-35",))
    again = RequestSpec.from_dict(dataclasses.asdict(spec))
    assert again == spec and again.pci == spec.pci
    with pytest.raises(SchedulerInputError, match="enabled_mdev_types must be a list of strings"):
        RequestSpec(flavor=make_flavor(), enabled_mdev_types="nvidia-35")


# ---- fit: matching, PF/VF exclusivity, other instances' devices -------------------------------

@pytest.mark.parametrize("request_, held, expected", [
    # Lowest address first.
    (PCIRequest(devices=(ask("vf", 2),)), [], ["0000:3b:02.0", "0000:3b:02.1"]),
    (PCIRequest(devices=(ask("vf"),)), holding("0000:3b:02.0"), ["0000:3b:02.1"]),
    (PCIRequest(devices=(ask("pf"),)), [], ["0000:3b:00.0"]),
    # Two aliases of one request: each device once.
    (PCIRequest(devices=(ask("gpu"), ask("gpu"))), [], ["0000:81:00.0", "0000:82:00.0"]),
    (PCIRequest(devices=(ask("vf"), ask("qat"))), [], ["0000:3b:02.0", "0000:05:00.0"]),
], ids=["two-vfs", "one-vf-held", "the-pf", "alias-twice", "two-aliases"])
def test_fit_gives_matching_free_devices(request_, held, expected):
    assert addresses(fit(DEVICES, held, request_)) == expected


@pytest.mark.parametrize("request_, held, why", [
    # A VF held: its PF is not free (Nova's _handle_device_dependents).
    (PCIRequest(devices=(ask("pf"),)), holding("0000:3b:02.1"),
     "1 x alias pf (8086:1572 type-PF) asked, 0 free"),
    # The PF held: none of its VFs is.
    (PCIRequest(devices=(ask("vf"),)), holding("0000:3b:00.0"),
     "1 x alias vf (8086:154c type-VF) asked, 0 free"),
    (PCIRequest(devices=(ask("vf", 3),)), [], "3 x alias vf (8086:154c type-VF) asked, 2 free"),
    # A VF taken by this very request's first alias makes its PF busy for the second.
    (PCIRequest(devices=(ask("vf"), ask("pf"))), [], "1 x alias pf (8086:1572 type-PF) asked, 0 free"),
    (PCIRequest(devices=(ask("gpu"),)), holding("0000:81:00.0", "0000:82:00.0"),
     "1 x alias gpu (10de:1eb8) asked, 0 free"),
], ids=["pf-of-held-vf", "vf-of-held-pf", "too-few", "vf-then-pf", "all-held"])
def test_fit_names_the_short_pool(request_, held, why):
    assert fit(DEVICES, held, request_) == (None, why)


def test_an_alias_without_a_device_type_takes_no_pf():
    # As Nova's _filter_pools_for_unrequested_pfs: PFs and VFs may share ids.
    shared = [pf("0000:3b:00.0", ["0000:3b:02.0"], product="1572"), vf("0000:3b:02.0", "0000:3b:00.0", product="1572")]
    any_type = DeviceRequest("nic", 2, (("8086", "1572", None),), "legacy")
    assert fit(shared, [], PCIRequest(devices=(any_type,))) == (
        None, "2 x alias nic (8086:1572) asked, 1 free")


def test_the_assignment_has_numa_rst_shape():
    devices, why = fit(DEVICES, [], PCIRequest(devices=(ask("vf"),)))
    assert why is None
    assert devices == {"pci": [{"address": "0000:3b:02.0", "alias": "vf", "dev_type": "type-VF", "numa_node": 1}],
                       "mdevs": []}


def test_malformed_assignments_of_the_ledger_are_skipped_not_fatal():
    held = [None, {"pci": "0000:3b:02.0"}, {"pci": [{"address": 7}, "x"]}, {"mdevs": [{"parent": 1}]},
            {"pci": [{"address": "0000:3b:02.0"}]}]
    assert addresses(fit(DEVICES, held, PCIRequest(devices=(ask("vf"),)))) == ["0000:3b:02.1"]


# ---- fit with the instance's cells: Nova's three policies ----------------------------------

GPU_CELL0 = pci("0000:81:00.0", 0)
GPU_CELL1 = pci("0000:82:00.0", 1)
GPU_NO_NODE = pci("0000:83:00.0", None)


def gpus(count, policy):
    return PCIRequest(devices=(DeviceRequest("gpu", count, (("10de", "1eb8", None),), policy),))


@pytest.mark.parametrize("policy, devices, count, cells, expected", [
    ("required", [GPU_CELL0, GPU_CELL1], 1, (1,), ["0000:82:00.0"]),
    ("required", [GPU_CELL0, GPU_CELL1], 2, (0, 1), ["0000:81:00.0", "0000:82:00.0"]),
    ("legacy", [GPU_CELL0, GPU_NO_NODE], 1, (0,), ["0000:81:00.0"]),
    # Legacy: a device that says no NUMA node is as good as local when the cell has too few.
    ("legacy", [GPU_CELL1, GPU_NO_NODE], 1, (0,), ["0000:83:00.0"]),
    ("legacy", [GPU_CELL0, GPU_NO_NODE], 2, (0,), ["0000:81:00.0", "0000:83:00.0"]),
    # Preferred: local first, then no node, then anything.
    ("preferred", [GPU_CELL0, GPU_CELL1], 1, (1,), ["0000:82:00.0"]),
    ("preferred", [GPU_CELL1], 1, (0,), ["0000:82:00.0"]),
    ("preferred", [GPU_CELL0, GPU_CELL1, GPU_NO_NODE], 3, (1,), ["0000:82:00.0", "0000:83:00.0", "0000:81:00.0"]),
    # Without cells any device, lowest address first.
    ("required", [GPU_CELL1, GPU_CELL0], 1, None, ["0000:81:00.0"]),
], ids=["required-local", "required-two-cells", "legacy-local", "legacy-no-node", "legacy-both",
        "preferred-local", "preferred-remote", "preferred-order", "no-cells"])
def test_the_numa_policy_decides_which_devices_qualify(policy, devices, count, cells, expected):
    assert addresses(fit(devices, [], gpus(count, policy), cells)) == expected


@pytest.mark.parametrize("policy, devices, count, cells, why", [
    ("required", [GPU_CELL1, GPU_NO_NODE], 1, (0,),
     "1 x alias gpu (10de:1eb8) asked, 0 free on NUMA cell 0 (policy required)"),
    ("required", [GPU_CELL0], 2, (0, 1),
     "2 x alias gpu (10de:1eb8) asked, 1 free on NUMA cells 0, 1 (policy required)"),
    ("legacy", [GPU_CELL1], 1, (0,),
     "1 x alias gpu (10de:1eb8) asked, 0 free on NUMA cell 0 or without a NUMA node (policy legacy)"),
    ("preferred", [GPU_CELL1], 2, (0,), "2 x alias gpu (10de:1eb8) asked, 1 free (policy preferred)"),
], ids=["required-remote", "required-short", "legacy-remote", "preferred-short"])
def test_a_policy_that_cannot_be_met_says_where_it_looked(policy, devices, count, cells, why):
    assert fit(devices, [], gpus(count, policy), cells) == (None, why)


# ---- mediated devices -----------------------------------------------------------------------

MDEV_GPUS = [
    pci("0000:06:00.0", 0, mdev_types=[mdev_type("nvidia-35", 2), mdev_type("nvidia-36", 4)]),
    pci("0000:07:00.0", 1, mdev_types=[mdev_type("nvidia-35", 8)]),
]


@pytest.mark.parametrize("vgpus, types, held, expected", [
    (1, (), [], [("0000:06:00.0", "nvidia-35")]),
    # enabled_mdev_types's order is the operator's preference.
    (1, ("nvidia-36", "nvidia-35"), [], [("0000:06:00.0", "nvidia-36")]),
    (2, ("nvidia-35",), holding(mdevs=[("0000:06:00.0", "nvidia-35")]), [("0000:07:00.0", "nvidia-35")] * 2),
    # One device runs one type at a time: 06 serves nvidia-35 already, nvidia-36 goes elsewhere or nowhere.
    (1, ("nvidia-36",), holding(mdevs=[("0000:06:00.0", "nvidia-35")]), None),
    # Passed through whole, a GPU offers no mdevs.
    (1, (), holding("0000:06:00.0"), [("0000:07:00.0", "nvidia-35")]),
    # All from one device, as Nova's placement takes a VGPU request from one provider.
    (4, (), [], [("0000:06:00.0", "nvidia-36")] * 4),
    (9, (), [], None),
], ids=["first", "operator-order", "counted", "one-type-per-device", "passed-through", "one-device", "too-many"])
def test_vgpus_come_from_one_device_with_enough_free(vgpus, types, held, expected):
    devices, why = fit(MDEV_GPUS, held, PCIRequest(vgpus=vgpus, mdev_types=types))
    if expected is None:
        assert devices is None and why.startswith(f"{vgpus} x vGPU")
    else:
        assert why is None and [(mdev["parent"], mdev["type"]) for mdev in devices["mdevs"]] == expected


def test_a_gpu_with_mdevs_in_use_is_not_passed_through():
    request = PCIRequest(devices=(DeviceRequest("gpu", 2, (("10de", "1eb8", None),), "legacy"),))
    assert fit(MDEV_GPUS, holding(mdevs=[("0000:07:00.0", "nvidia-35")]), request) == (
        None, "2 x alias gpu (10de:1eb8) asked, 1 free")


def test_the_vgpu_shortfall_says_how_many_one_device_has():
    assert fit(MDEV_GPUS, [], PCIRequest(vgpus=9, mdev_types=("nvidia-35",))) == (
        None, "9 x vGPU (mdev type nvidia-35) asked, at most 8 free on one device")


# ---- PciPassthroughFilter -------------------------------------------------------------------

def device_spec(alias_spec, **extra):
    return make_spec(make_flavor(extra_specs={"pci_passthrough:alias": alias_spec, **extra}), pci_alias=ALIASES,
                     enabled_filters=["PciPassthroughFilter"])


def test_the_filter_passes_hosts_with_the_devices_and_says_missing_or_in_use():
    spec = device_spec("vf:2")
    assert verdict("PciPassthroughFilter", make_host(pci_devices=DEVICES), spec) is None
    assert verdict("PciPassthroughFilter", make_host(), spec) == (
        "pci_devices_missing", "2 x alias vf (8086:154c type-VF) asked, 0 free")
    assert verdict("PciPassthroughFilter", make_host(pci_devices=DEVICES, assignments=holding("0000:3b:02.0")),
                   spec) == ("pci_devices_in_use", "2 x alias vf (8086:154c type-VF) asked, 1 free")


def test_the_filter_has_nothing_to_do_without_a_device_request():
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.pci_passthrough import (
        PciPassthroughFilter,
    )
    assert PciPassthroughFilter().is_noop(make_spec(pci_alias=ALIASES))
    assert not PciPassthroughFilter().is_noop(device_spec("vf:1"))
    assert PciPassthroughFilter.host_fields == {"pci_devices", "assignments"}


def test_a_schedule_goes_to_the_host_with_the_devices_and_explains_the_others():
    hosts = [make_host("hv1"), make_host("hv2", pci_devices=DEVICES, assignments=holding("0000:3b:02.0")),
             make_host("hv3", pci_devices=DEVICES)]
    for engine in ("plain", "vectorized"):
        decision = schedule(hosts, dataclasses.replace(device_spec("vf:2"), engine=engine))
        assert [placement.host for placement in decision.placements] == ["hv3"], engine
    failed = schedule(hosts[:2], device_spec("vf:2"))
    assert not failed.ok
    assert failed.summary == (
        "0/2 hosts are available for instance 1 of 1: 1 without the requested devices "
        "(2 x alias vf (8086:154c type-VF)), 1 with the requested devices in use (2 x alias vf (8086:154c type-VF))")


# ---- PCIWeigher -----------------------------------------------------------------------------

def nics(count, start=0):
    return [vf(f"0000:3b:{index:02x}.0", "0000:3a:00.0") for index in range(start, start + count)]


def weighed(hosts, spec):
    return [(item.host_state.host, item.weight) for item in weigh_hosts(hosts, [PCIWeigher()], spec)]


def test_the_weigher_prefers_hosts_with_fewer_free_devices_as_nova():
    # Nova's test_multiplier_no_pci_empty_hosts / _non_empty_hosts / _with_pci.
    spec = make_spec(pci_alias=ALIASES, weighers=["PCIWeigher"])
    assert weighed([make_host("host1", pci_devices=nics(4)), make_host("host2")], spec)[0] == ("host2", 1.0)
    assert weighed([make_host("host1", pci_devices=nics(6)), make_host("host2", pci_devices=nics(4))],
                   spec)[0] == ("host2", 1.0)
    with_devices = device_spec("vf:4")
    ranked = weighed([make_host("host1", pci_devices=nics(5)), make_host("host2", pci_devices=nics(10)),
                      make_host("host3", pci_devices=nics(4))], with_devices)
    assert ranked[0] == ("host3", 1.0)
    # Held devices are not free.
    held = make_host("host2", pci_devices=nics(6), assignments=holding("0000:3b:00.0", "0000:3b:01.0", "0000:3b:02.0"))
    assert weighed([make_host("host1", pci_devices=nics(4)), held], spec)[0] == ("host2", 1.0)


def test_the_weigher_stops_counting_at_nova_max_devs():
    # Nova's test_multiplier_with_many_pci: 500 and 2000 devices weigh the same.
    spec = make_spec(pci_alias=ALIASES, weighers=["PCIWeigher"])
    hosts = [make_host("host1", pci_devices=nics(150)), make_host("host2", pci_devices=nics(200))]
    assert [weight for _host, weight in weighed(hosts, spec)] == [0.0, 0.0]


def test_the_weigher_multiplier_and_its_off_switch():
    hosts = [make_host("host1", pci_devices=nics(5)), make_host("host2", pci_devices=nics(10))]
    # Nova's test_multiplier_none: 0.0 turns it off.
    off = make_spec(pci_alias=ALIASES, weighers=["PCIWeigher"], weight_multipliers={"pci_weight_multiplier": 0.0})
    assert weighed(hosts, off) == [("host1", 0.0), ("host2", 0.0)]
    doubled = make_spec(pci_alias=ALIASES, weighers=["PCIWeigher"], weight_multipliers={"pci_weight_multiplier": 2.0})
    assert weighed(hosts, doubled)[0] == ("host1", 2.0)


def test_without_aliases_the_weigher_reads_nothing_and_weighs_nothing():
    spec = make_spec(weighers=["PCIWeigher"])
    assert PCIWeigher().host_fields_for(spec) == frozenset()
    assert PCIWeigher().host_fields_for(make_spec(pci_alias=ALIASES)) == {"pci_devices", "assignments"}
    assert weighed([make_host("host1", pci_devices=nics(5)), make_host("host2")], spec) == [
        ("host1", 0.0), ("host2", 0.0)]


def test_free_alias_devices_counts_what_some_alias_matches():
    # Both VFs, the QAT device and the GPUs; the PF only while an alias names its ids (as a Nova
    # [pci] device_spec of the aliases' ids would: ids, whatever the type).
    assert free_alias_devices(DEVICES, [], ALIASES) == 6
    assert free_alias_devices(DEVICES, holding("0000:3b:02.0"), ALIASES) == 4  # a VF held: its PF too
    assert free_alias_devices(DEVICES, [], [entry for entry in ALIASES if entry["name"] != "pf"]) == 5


def test_the_instances_of_one_request_never_share_a_device():
    # Each placed instance takes its devices off the host (assignment.take) before the next is placed.
    one_vf = [vf("0000:3b:02.0", "0000:3b:00.0")]
    hosts = [make_host("hv1", pci_devices=one_vf), make_host("hv2", pci_devices=one_vf),
             make_host("hv3")]
    for engine in ("plain", "vectorized"):
        spec = dataclasses.replace(device_spec("vf:1"), count=2, engine=engine)
        decision = schedule(hosts, spec)
        assert sorted(placement.host for placement in decision.placements) == ["hv1", "hv2"], engine
        assert not schedule(hosts, dataclasses.replace(spec, count=3)).ok


def test_devices_and_vgpus_of_one_request_come_from_the_whole_device_list():
    # fit sorts only the devices of the asked products when no vGPU is asked; with vGPUs, a GPU
    # that is no alias's product still gives them.
    request = PCIRequest(devices=(ask("vf"),), vgpus=1)
    devices, why = fit(DEVICES + MDEV_GPUS, [], request)
    assert why is None
    assert [device["address"] for device in devices["pci"]] == ["0000:3b:02.0"]
    assert devices["mdevs"] == [{"parent": "0000:06:00.0", "type": "nvidia-35"}]
    # A device whose ids are not text (a ledger row) matches nothing and breaks nothing.
    odd = DEVICES + [{**vf("0000:3b:02.7", "0000:3b:00.0"), "product_id": ["154c"]}]
    assert addresses(fit(odd, [], PCIRequest(devices=(ask("vf", 2),)))) == ["0000:3b:02.0", "0000:3b:02.1"]
