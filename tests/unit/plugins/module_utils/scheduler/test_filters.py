from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.compute import (
    ComputeFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.core import CoreFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.disk import DiskFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.ram import RamFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import FILTERS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
    DEFAULT_FILTERS,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import Rejection

from ._builders import make_flavor, make_host, make_spec


def ram_rejection(reason, **numbers):
    return Rejection(host="hv1", filter="RamFilter", reason=reason, unit="MB", resource="ram",
                     **numbers)


# Each row: host fields, requested memory_mb, expected rejection (None = passes),
# expected limits afterwards. Numbers worked out in the comments.
RAM_CASES = [
    # limit 16384 × 1.0; used 16384 − 15872 = 512; 15872 left ≥ 4096
    ({"total_usable_ram_mb": 16384, "free_ram_mb": 15872}, 4096, None, {"memory_mb": 16384}),
    # limit − used = 8192 − 4096 = 4096 == requested: passes
    ({"total_usable_ram_mb": 8192, "free_ram_mb": 4096}, 4096, None, {"memory_mb": 8192}),
    # one MB short: used 4097, 4095 left
    ({"total_usable_ram_mb": 8192, "free_ram_mb": 4095}, 4096,
     ram_rejection("insufficient_ram", requested=4096, used=4097, limit=8192, free=4095), {}),
    # nothing running, but reserved 512 is already off free: used 512, 7680 left < 8192
    ({"total_usable_ram_mb": 8192, "free_ram_mb": 7680}, 8192,
     ram_rejection("insufficient_ram", requested=8192, used=512, limit=8192, free=7680), {}),
    ({"total_usable_ram_mb": 8192, "free_ram_mb": 7680}, 7680, None, {"memory_mb": 8192}),
    # ratio 1.5: limit 24576; used 16384 + 1000 = 17384; 7192 left ≥ 4096
    ({"total_usable_ram_mb": 16384, "free_ram_mb": -1000, "ram_allocation_ratio": 1.5}, 4096,
     None, {"memory_mb": 24576}),
    # ratio 1.5, used 21384: 3192 left
    ({"total_usable_ram_mb": 16384, "free_ram_mb": -5000, "ram_allocation_ratio": 1.5}, 4096,
     ram_rejection("insufficient_ram", requested=4096, used=21384, limit=24576, free=3192), {}),
    # a 4096 MB instance on a 2048 MB host, even though 2048 × 10 would leave room
    ({"total_usable_ram_mb": 2048, "free_ram_mb": 2048, "ram_allocation_ratio": 10.0}, 4096,
     ram_rejection("larger_than_host", requested=4096, limit=2048), {}),
    # the instance as large as the host itself is allowed
    ({"total_usable_ram_mb": 4096, "free_ram_mb": 4096, "ram_allocation_ratio": 1.0}, 4096,
     None, {"memory_mb": 4096}),
]
RAM_IDS = ["fits", "exactly-fits", "one-mb-short", "reserved-counts-as-used",
           "reserved-exactly-fits", "overcommit-negative-free-passes",
           "overcommit-negative-free-rejects", "larger-than-host-despite-ratio",
           "as-large-as-host"]


@pytest.mark.parametrize("host_fields, memory_mb, expected, limits", RAM_CASES, ids=RAM_IDS)
def test_ram_filter(host_fields, memory_mb, expected, limits):
    host = make_host(**host_fields)
    assert RamFilter().host_passes(host, make_spec(make_flavor(memory_mb=memory_mb))) == expected
    assert host.limits == limits


def core_rejection(reason, **numbers):
    return Rejection(host="hv1", filter="CoreFilter", reason=reason, unit="vCPUs",
                     resource="vcpus", **numbers)


CORE_CASES = [
    # limit 4 × 4.0 = 16
    ({"vcpus_total": 4, "vcpus_used": 0}, 2, None, {"vcpu": 16}),
    ({"vcpus_total": 4, "vcpus_used": 14}, 2, None, {"vcpu": 16}),
    ({"vcpus_total": 4, "vcpus_used": 14}, 3,
     core_rejection("insufficient_vcpus", requested=3, used=14, limit=16, free=2), {}),
    # 8 vCPUs on a 4-CPU host, whatever the ratio
    ({"vcpus_total": 4, "vcpus_used": 0, "cpu_allocation_ratio": 16.0}, 8,
     core_rejection("larger_than_host", requested=8, limit=4), {}),
    # no CPU count: Nova lets it through and records no limit
    ({"vcpus_total": 0, "vcpus_used": 100}, 64, None, {}),
    ({"vcpus_total": 8, "vcpus_used": 8, "cpu_allocation_ratio": 1.0}, 1,
     core_rejection("insufficient_vcpus", requested=1, used=8, limit=8, free=0), {}),
    # limit 3 × 1.5 = 4.5; 1.5 left < 2
    ({"vcpus_total": 3, "vcpus_used": 3, "cpu_allocation_ratio": 1.5}, 2,
     core_rejection("insufficient_vcpus", requested=2, used=3, limit=4.5, free=1.5), {}),
]
CORE_IDS = ["fits", "exactly-fits", "one-short", "larger-than-host-despite-ratio",
            "vcpus-total-unknown-fails-open", "no-overcommit-full", "fractional-limit"]


@pytest.mark.parametrize("host_fields, vcpus, expected, limits", CORE_CASES, ids=CORE_IDS)
def test_core_filter(host_fields, vcpus, expected, limits):
    host = make_host(**host_fields)
    assert CoreFilter().host_passes(host, make_spec(make_flavor(vcpus=vcpus))) == expected
    assert host.limits == limits


def disk_rejection(reason, **numbers):
    return Rejection(host="hv1", filter="DiskFilter", reason=reason, unit="MB", resource="disk",
                     **numbers)


DISK_CASES = [
    # requested 1024 × (10 + 5) + 512 = 15872; limit 20480; used 20480 − 16000 = 4480
    ({"total_usable_disk_gb": 20, "free_disk_mb": 16000},
     {"root_gb": 10, "ephemeral_gb": 5, "swap": 512}, None, {"disk_gb": 20}),
    # the swap tips it over: 15871 left
    ({"total_usable_disk_gb": 20, "free_disk_mb": 15871},
     {"root_gb": 10, "ephemeral_gb": 5, "swap": 512},
     disk_rejection("insufficient_disk", requested=15872, used=4609, limit=20480, free=15871),
     {}),
    ({"total_usable_disk_gb": 20, "free_disk_mb": 20480}, {"root_gb": 20}, None,
     {"disk_gb": 20}),
    # 15361 MB asked of a 15 GB (15360 MB) pool, ratio notwithstanding
    ({"total_usable_disk_gb": 15, "free_disk_mb": 15360, "disk_allocation_ratio": 2.0},
     {"root_gb": 10, "ephemeral_gb": 5, "swap": 1},
     disk_rejection("larger_than_host", requested=15361, limit=15360), {}),
    # ratio 2.0: limit 204800; used 102400 + 5000 = 107400; 97400 left; limit 200 GB
    ({"total_usable_disk_gb": 100, "free_disk_mb": -5000, "disk_allocation_ratio": 2.0},
     {"root_gb": 20}, None, {"disk_gb": 200}),
]
DISK_IDS = ["ephemeral-and-swap-fit", "swap-tips-over", "exactly-fits-root-only",
            "larger-than-host-despite-ratio", "overcommit-negative-free"]


@pytest.mark.parametrize("host_fields, flavor_fields, expected, limits", DISK_CASES,
                         ids=DISK_IDS)
def test_disk_filter(host_fields, flavor_fields, expected, limits):
    host = make_host(**host_fields)
    assert DiskFilter().host_passes(host, make_spec(make_flavor(**flavor_fields))) == expected
    assert host.limits == limits


def compute_rejection(reason, detail):
    return Rejection(host="hv1", filter="ComputeFilter", reason=reason, detail=detail)


COMPUTE_CASES = [
    ({}, None),
    ({"service_up": False, "down_reason": "libvirt: connection timed out"},
     compute_rejection("host_down", "libvirt: connection timed out")),
    ({"service_up": False}, compute_rejection("host_down", None)),
    ({"disabled": True, "disabled_reason": "maintenance"},
     compute_rejection("host_disabled", "maintenance")),
    # Nova looks at disabled first
    ({"disabled": True, "disabled_reason": "maintenance", "service_up": False,
      "down_reason": "unreachable"}, compute_rejection("host_disabled", "maintenance")),
]
COMPUTE_IDS = ["up-and-enabled", "down-with-reason", "down-without-reason", "disabled",
               "disabled-and-down"]


@pytest.mark.parametrize("host_fields, expected", COMPUTE_CASES, ids=COMPUTE_IDS)
def test_compute_filter(host_fields, expected):
    host = make_host(**host_fields)
    assert ComputeFilter().host_passes(host, make_spec()) == expected
    assert host.limits == {}


@pytest.mark.parametrize(
    "host_filter, index, runs",
    [(ComputeFilter(), 0, True), (ComputeFilter(), 1, False), (RamFilter(), 0, True),
     (RamFilter(), 5, True)],
    ids=["compute-first", "compute-later", "ram-first", "ram-later"],
)
def test_once_per_request_filters_run_for_the_first_instance_only(host_filter, index, runs):
    assert host_filter.run_filter_for_index(index) is runs


MESSAGE_CASES = [
    (Rejection("hv1", "RamFilter", "insufficient_ram", requested=4096, used=12288,
               limit=15788.0, free=3500.0, unit="MB", resource="ram"),
     "insufficient RAM: needs 4096 MB, free 3500 MB (used 12288 of limit 15788 MB)"),
    (Rejection("hv1", "CoreFilter", "insufficient_vcpus", requested=2, used=3, limit=4.5,
               free=1.5, unit="vCPUs", resource="vcpus"),
     "insufficient vCPUs: needs 2 vCPUs, free 1.5 vCPUs (used 3 of limit 4.5 vCPUs)"),
    (Rejection("hv1", "DiskFilter", "insufficient_disk", requested=15872, used=4609,
               limit=20480.0, free=15871.0, unit="MB", resource="disk"),
     "insufficient disk: needs 15872 MB, free 15871 MB (used 4609 of limit 20480 MB)"),
    (Rejection("hv1", "CoreFilter", "larger_than_host", requested=8, limit=4, unit="vCPUs",
               resource="vcpus"),
     "larger than the host: needs 8 vCPUs, host has 4"),
    (Rejection("hv1", "RamFilter", "larger_than_host", requested=4096, limit=2048, unit="MB",
               resource="ram"),
     "larger than the host: needs 4096 MB RAM, host has 2048 MB"),
    (Rejection("hv1", "DiskFilter", "larger_than_host", requested=15361, limit=15360,
               unit="MB", resource="disk"),
     "larger than the host: needs 15361 MB disk, host has 15360 MB"),
    (Rejection("hv1", "ComputeFilter", "host_down", detail="no answer in 30 s"),
     "host down: no answer in 30 s"),
    (Rejection("hv1", "ComputeFilter", "host_disabled"), "host disabled"),
    (Rejection("hv1", "ignore_hosts", "ignored"), "ignored: listed in ignore_hosts"),
    (Rejection("hv1", "force_nodes", "not_forced"), "not forced: not listed in force_nodes"),
]
MESSAGE_IDS = ["insufficient-ram", "insufficient-vcpus-fractional", "insufficient-disk",
               "larger-vcpus", "larger-ram", "larger-disk", "down", "disabled-no-reason",
               "ignored", "not-forced"]


@pytest.mark.parametrize("rejection, message", MESSAGE_CASES, ids=MESSAGE_IDS)
def test_rejection_message(rejection, message):
    assert rejection.message() == message
    assert rejection.to_dict()["message"] == message


def test_registry_names_match_the_classes():
    for name, filter_class in FILTERS.items():
        assert issubclass(filter_class, BaseHostFilter)
        assert filter_class.name == name
    # DESIGN.md: Newton's defaults with CoreFilter added, and Berth's image and network
    # filters (no-ops unless a launch names an image volume or networks) and host rule filter
    # (a no-op until the operator writes a hard rule).
    assert DEFAULT_FILTERS == [
        "ComputeFilter", "AvailabilityZoneFilter", "RamFilter", "CoreFilter", "DiskFilter",
        "ComputeCapabilitiesFilter", "ImagePropertiesFilter", "ServerGroupAntiAffinityFilter",
        "ServerGroupAffinityFilter", "PoolImageFilter", "NetworkFilter", "HostRuleFilter",
    ]
