"""What a flavor's hw:* extra specs and an image's hw_* properties ask (numa.numa_request, on
RequestSpec.numa), with Nova's conflict rules; NUMATopologyFilter; and the extra-spec filters
leaving the hw: scope alone, as Nova's do."""
from __future__ import annotations

import dataclasses

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import SchedulerInputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.numa import GuestCell
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import FILTERS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
    DEFAULT_FILTERS,
    RequestSpec,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import REASON_NUMA

from .test_numa_fit import pinned, topology
from ._builders import aggregate, make_flavor, make_host, make_spec, verdict


def numa_of(extra_specs=None, image_properties=None, vcpus=4, memory_mb=2048):
    flavor = make_flavor(vcpus=vcpus, memory_mb=memory_mb, extra_specs=extra_specs or {})
    return make_spec(flavor, image_properties=image_properties or {}).numa


@pytest.mark.parametrize("extra_specs, image_properties", [
    ({}, {}),
    ({"hw:cpu_policy": "shared"}, {}),
    ({"hw:watchdog_action": "reset", "capabilities:cpu_info:arch": "x86_64"}, {}),
    ({}, {"hw_cpu_policy": "shared", "hw_disk_bus": "virtio"}),
], ids=["nothing", "shared", "other-specs", "image-shared"])
def test_nothing_numa_asked_is_no_request(extra_specs, image_properties):
    assert numa_of(extra_specs, image_properties) is None


def test_dedicated_implies_one_cell_with_every_vcpu_pinned():
    numa = numa_of({"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate",
                    "hw:emulator_threads_policy": "isolate"})
    assert numa.cells == (GuestCell(id=0, vcpus=(0, 1, 2, 3), dedicated_vcpus=(0, 1, 2, 3), memory_mb=2048),)
    assert (numa.cpu_policy, numa.cpu_thread_policy, numa.mem_page_size, numa.emulator_threads_policy) == (
        "dedicated", "isolate", None, "isolate")


@pytest.mark.parametrize("text, expected", [
    ("2MB", 2048), ("2MiB", 2048), ("1GB", 1048576), ("2048", 2048), ("2048KB", 2048), (2048, 2048),
    ("large", "large"), ("any", "any"), ("small", "small"),
])
def test_a_page_size_implies_one_shared_cell(text, expected):
    numa = numa_of({"hw:mem_page_size": text})
    assert numa.mem_page_size == expected
    assert numa.cpu_policy == "shared" and numa.cells[0].dedicated_vcpus == ()


def test_the_image_chooses_the_page_size_only_where_the_flavor_allows():
    assert numa_of({"hw:mem_page_size": "large"}, {"hw_mem_page_size": "1GB"}).mem_page_size == 1048576
    assert numa_of({"hw:mem_page_size": "any"}, {"hw_mem_page_size": "small"}).mem_page_size == "small"


def test_numa_nodes_split_evenly_or_by_numa_cpus_and_numa_mem():
    numa = numa_of({"hw:numa_nodes": "2"})
    assert [(cell.vcpus, cell.memory_mb) for cell in numa.cells] == [((0, 1), 1024), ((2, 3), 1024)]
    numa = numa_of({"hw:numa_nodes": 2, "hw:numa_cpus.0": "0", "hw:numa_cpus.1": "1-3",
                    "hw:numa_mem.0": "512", "hw:numa_mem.1": "1536"})
    assert [(cell.vcpus, cell.memory_mb) for cell in numa.cells] == [((0,), 512), ((1, 2, 3), 1536)]
    numa = numa_of({}, {"hw_numa_nodes": "2", "hw_numa_cpus.0": "0-2", "hw_numa_cpus.1": "3",
                        "hw_numa_mem.0": "1024", "hw_numa_mem.1": "1024"})
    assert [cell.vcpus for cell in numa.cells] == [(0, 1, 2), (3,)]


def test_mixed_splits_by_the_dedicated_mask():
    numa = numa_of({"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "^0-1"})
    assert numa.cells[0].dedicated_vcpus == (2, 3) and numa.cells[0].shared_vcpus == (0, 1)
    numa = numa_of({"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "1,3", "hw:numa_nodes": "2"})
    assert [cell.dedicated_vcpus for cell in numa.cells] == [(1,), (3,)]


def test_the_image_may_ask_pinning_where_the_flavor_says_nothing():
    assert numa_of({}, {"hw_cpu_policy": "dedicated", "hw_cpu_thread_policy": "require"}).cpu_thread_policy == "require"
    # As Nova's get_cpu_thread_policy_constraint: a flavor's prefer stands, and is no conflict.
    assert numa_of({"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "prefer"},
                   {"hw_cpu_thread_policy": "isolate"}).cpu_thread_policy == "prefer"


F, I = "flavor.extra_specs.", "image_properties."


@pytest.mark.parametrize("extra_specs, image_properties, field", [
    ({"hw:cpu_policy": "pinned"}, {}, F + "hw:cpu_policy"),
    ({}, {"hw_cpu_policy": "realtime"}, I + "hw_cpu_policy"),
    ({"hw:cpu_policy": "shared"}, {"hw_cpu_policy": "dedicated"}, I + "hw_cpu_policy"),
    ({"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "0"}, {"hw_cpu_policy": "dedicated"}, I + "hw_cpu_policy"),
    ({"hw:cpu_thread_policy": "isolate"}, {}, F + "hw:cpu_thread_policy"),
    ({"hw:cpu_policy": "shared", "hw:cpu_thread_policy": "require"}, {}, F + "hw:cpu_thread_policy"),
    ({}, {"hw_cpu_thread_policy": "isolate"}, I + "hw_cpu_thread_policy"),
    ({"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "sometimes"}, {}, F + "hw:cpu_thread_policy"),
    ({"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate"}, {"hw_cpu_thread_policy": "require"},
     I + "hw_cpu_thread_policy"),
    ({"hw:emulator_threads_policy": "isolate"}, {}, F + "hw:emulator_threads_policy"),
    ({"hw:cpu_policy": "dedicated", "hw:emulator_threads_policy": "own"}, {}, F + "hw:emulator_threads_policy"),
    ({"hw:mem_page_size": "huge"}, {}, F + "hw:mem_page_size"),
    ({"hw:mem_page_size": "2M"}, {}, F + "hw:mem_page_size"),
    ({"hw:mem_page_size": "0"}, {}, F + "hw:mem_page_size"),
    ({}, {"hw_mem_page_size": "large"}, I + "hw_mem_page_size"),
    ({"hw:mem_page_size": "small"}, {"hw_mem_page_size": "large"}, I + "hw_mem_page_size"),
    ({"hw:mem_page_size": "any"}, {"hw_mem_page_size": "big"}, I + "hw_mem_page_size"),
    ({"hw:numa_nodes": "0"}, {}, F + "hw:numa_nodes"),
    ({"hw:numa_nodes": "two"}, {}, F + "hw:numa_nodes"),
    # "²".isdigit() is true and int("²") fails: refused naming the spec, never a crash.
    ({}, {"hw_numa_nodes": "²"}, I + "hw_numa_nodes"),
    ({"hw:numa_nodes": "8"}, {}, F + "hw:numa_nodes"),
    ({"hw:numa_nodes": "3"}, {}, F + "hw:numa_nodes"),
    ({"hw:numa_nodes": "1"}, {"hw_numa_nodes": "1"}, I + "hw_numa_nodes"),
    ({"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1", "hw:numa_cpus.1": "2-3"}, {}, F + "hw:numa_mem.0"),
    # As Nova reads them, from cell 0 up to the first one missing: .2 is not read, .1 is missing.
    ({"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1", "hw:numa_cpus.2": "2-3", "hw:numa_mem.0": "1024",
      "hw:numa_mem.1": "1024"}, {}, F + "hw:numa_cpus.1"),
    ({"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1", "hw:numa_cpus.1": "2", "hw:numa_mem.0": "1024",
      "hw:numa_mem.1": "1024"}, {}, F + "hw:numa_cpus.1"),
    ({"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-2", "hw:numa_cpus.1": "2-3", "hw:numa_mem.0": "1024",
      "hw:numa_mem.1": "1024"}, {}, F + "hw:numa_cpus.1"),
    ({"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1", "hw:numa_cpus.1": "2-4", "hw:numa_mem.0": "1024",
      "hw:numa_mem.1": "1024"}, {}, F + "hw:numa_cpus.1"),
    ({"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1", "hw:numa_cpus.1": "2-3", "hw:numa_mem.0": "1024",
      "hw:numa_mem.1": "512"}, {}, F + "hw:numa_mem.1"),
    ({"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1", "hw:numa_cpus.1": "2-3", "hw:numa_mem.0": "1G",
      "hw:numa_mem.1": "1024"}, {}, F + "hw:numa_mem.0"),
    ({"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1", "hw:numa_cpus.1": "2-3", "hw:numa_mem.0": "1024",
      "hw:numa_mem.1": "2²"}, {}, F + "hw:numa_mem.1"),
    ({"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1", "hw:numa_cpus.1": "2-3", "hw:numa_mem.0": "1024",
      "hw:numa_mem.1": "1024"}, {"hw_numa_cpus.0": "0-3"}, I + "hw_numa_cpus.0"),
    ({"hw:cpu_policy": "mixed"}, {}, F + "hw:cpu_dedicated_mask"),
    ({"hw:cpu_policy": "dedicated", "hw:cpu_dedicated_mask": "0"}, {}, F + "hw:cpu_dedicated_mask"),
    ({"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "0-3"}, {}, F + "hw:cpu_dedicated_mask"),
    ({"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "2-5"}, {}, F + "hw:cpu_dedicated_mask"),
    ({"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "x"}, {}, F + "hw:cpu_dedicated_mask"),
], ids=lambda value: None)
def test_bad_or_contradictory_specs_are_refused_naming_the_spec(extra_specs, image_properties, field):
    with pytest.raises(SchedulerInputError) as caught:
        numa_of(extra_specs, image_properties, vcpus=4)
    assert caught.value.field == field, str(caught.value)


def test_messages_say_what_to_change():
    with pytest.raises(SchedulerInputError, match="needs a dedicated or mixed CPU policy"):
        numa_of({"hw:cpu_thread_policy": "isolate"})
    with pytest.raises(SchedulerInputError, match="add up to 1536 MiB, the flavor has 2048 MiB"):
        numa_of({"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1", "hw:numa_cpus.1": "2-3",
                 "hw:numa_mem.0": "1024", "hw:numa_mem.1": "512"})
    with pytest.raises(SchedulerInputError, match="leave vCPUs 3 of the flavor's 4 in no cell"):
        numa_of({"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1", "hw:numa_cpus.1": "2",
                 "hw:numa_mem.0": "1024", "hw:numa_mem.1": "1024"})


def test_the_request_is_derived_not_given():
    spec = RequestSpec.from_dict({"flavor": {"name": "pinned", "vcpus": 2, "memory_mb": 1024, "root_gb": 1,
                                             "extra_specs": {"hw:cpu_policy": "dedicated"}}})
    assert spec.numa.cpu_policy == "dedicated"
    # A request's to_dict carries it (a decision's record replays from it); given back, it is
    # remade from the flavor and image, never taken as given.
    given = RequestSpec.from_dict({"flavor": {"name": "x", "vcpus": 1, "memory_mb": 512, "root_gb": 1},
                                   "numa": {"cpu_policy": "dedicated"}})
    assert given.numa is None
    # Copies recompute it from their flavor and image.
    assert dataclasses.replace(spec, count=2).numa == spec.numa


# ---- the filter ----------------------------------------------------------------------------

def pinned_spec(vcpus=4, **extra):
    return make_spec(make_flavor(vcpus=vcpus, memory_mb=1024,
                                 extra_specs={"hw:cpu_policy": "dedicated", **extra}),
                     enabled_filters=["NUMATopologyFilter"])


def test_the_filter_is_not_a_default_and_is_a_noop_without_a_numa_request():
    assert "NUMATopologyFilter" not in DEFAULT_FILTERS  # as in Nova's default enabled_filters
    numa_filter = FILTERS["NUMATopologyFilter"]()
    assert numa_filter.is_noop(make_spec()) and not numa_filter.is_noop(pinned_spec())
    assert numa_filter.host_fields == frozenset({"numa_topology", "pci_devices", "assignments"})
    assert verdict("NUMATopologyFilter", make_host(), make_spec()) is None


def test_the_filter_passes_a_host_with_room_and_says_which_cell_was_short():
    host = make_host(numa_topology=topology())
    assert verdict("NUMATopologyFilter", host, pinned_spec()) is None
    busy = make_host(numa_topology=topology(), assignments=[pinned(0, {0: 0, 1: 1}), pinned(1, {0: 4})])
    assert verdict("NUMATopologyFilter", busy, pinned_spec()) == (
        REASON_NUMA, "no NUMA cell with 4 free dedicated CPUs: cell 0 has 2, cell 1 has 3")
    assert verdict("NUMATopologyFilter", make_host(), pinned_spec()) == (REASON_NUMA, "the host reports no NUMA cells")
    rejection = FILTERS["NUMATopologyFilter"]().host_passes(busy, pinned_spec())
    assert rejection.message() == "numa: no NUMA cell with 4 free dedicated CPUs: cell 0 has 2, cell 1 has 3"


def test_hw_scoped_extra_specs_do_not_touch_the_extra_spec_filters():
    specs = {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "prefer", "hw:mem_page_size": "2MB",
             "hw:numa_nodes": "1", "hw:emulator_threads_policy": "share"}
    spec = make_spec(make_flavor(vcpus=2, extra_specs=specs))
    host = make_host(aggregates=[aggregate("fast", ssd="true")])
    for name in ("ComputeCapabilitiesFilter", "AggregateInstanceExtraSpecsFilter"):
        assert verdict(name, host, spec) is None


@pytest.mark.parametrize("engine", ["plain", "vectorized"])
def test_both_engines_run_the_filter_host_by_host(engine):
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule

    busy = [pinned(0, {0: 0, 1: 1}), pinned(1, {0: 4})]
    hosts = [make_host(f"hv{n}", numa_topology=topology(), assignments=busy if n < 3 else []) for n in range(5)]
    spec = make_spec(make_flavor(vcpus=4, memory_mb=1024, extra_specs={"hw:cpu_policy": "dedicated"}),
                     enabled_filters=["ComputeFilter", "RamFilter", "NUMATopologyFilter"], engine=engine)
    assert [placement.host for placement in schedule(hosts, spec).placements] == ["hv3"]
    decision = schedule(hosts[:3], dataclasses.replace(spec, explain="full"))
    assert decision.summary == ("0/3 hosts are available for instance 1 of 1: "
                                "3 without NUMA cells that fit (CPUs, pages or memory)")
    assert decision.rejections[0].detail == "no NUMA cell with 4 free dedicated CPUs: cell 0 has 2, cell 1 has 3"
