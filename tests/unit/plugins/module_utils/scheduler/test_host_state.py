from __future__ import annotations

import pytest
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
    DEFAULT_RATIOS,
    DEFAULT_RESERVED,
    Flavor,
    HostState,
)

from ._builders import make_flavor, make_host

FLAVOR_DATA = {"vcpus": 2, "memory_mb": 4096, "root_gb": 40}

HOST_DATA = {
    "host": "hv1",
    "nodename": "hv1.lab",
    "uuid": "0b6c1e0a-0000-4000-8000-000000000001",
    "service_up": True,
    "disabled": False,
    "vcpus_total": 16,
    "vcpus_used": 4,
    "total_usable_ram_mb": 65536,
    "free_ram_mb": 40960,
    "total_usable_disk_gb": 500,
    "free_disk_mb": 300000,
    "num_instances": 3,
    "num_io_ops": 1,
}


# --- Flavor -------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "overrides, field, message",
    [
        ({"vcpus": 0}, "flavor.vcpus", "flavor.vcpus must be a positive integer, got 0"),
        ({"vcpus": -1}, "flavor.vcpus", "flavor.vcpus must be a positive integer, got -1"),
        ({"vcpus": 1.0}, "flavor.vcpus", "flavor.vcpus must be a positive integer, got 1.0"),
        ({"vcpus": True}, "flavor.vcpus", "flavor.vcpus must be a positive integer, got True"),
        ({"vcpus": "2"}, "flavor.vcpus", "flavor.vcpus must be a positive integer, got '2'"),
        ({"vcpus": None}, "flavor.vcpus", "flavor.vcpus must be a positive integer, got None"),
        ({"memory_mb": -1}, "flavor.memory_mb",
         "flavor.memory_mb must be a positive integer, got -1"),
        ({"root_gb": -1}, "flavor.root_gb",
         "flavor.root_gb must be a non-negative integer, got -1"),
        ({"ephemeral_gb": 1.5}, "flavor.ephemeral_gb",
         "flavor.ephemeral_gb must be a non-negative integer, got 1.5"),
        ({"swap": None}, "flavor.swap", "flavor.swap must be a non-negative integer, got None"),
        ({"ram": 512}, "flavor.ram", "flavor has an unknown key 'ram'; allowed: name, vcpus, "
         "memory_mb, root_gb, ephemeral_gb, swap, extra_specs, description"),
        ({"extra_specs": ["hw:cpu_policy"]}, "flavor.extra_specs",
         "flavor.extra_specs must be a mapping with string keys, got ['hw:cpu_policy']"),
    ],
    ids=["vcpus-zero", "vcpus-negative", "vcpus-float", "vcpus-bool", "vcpus-string",
         "vcpus-none", "memory-negative", "root-negative", "ephemeral-float", "swap-none",
         "unknown-key", "extra-specs-list"],
)
def test_flavor_from_dict_refuses_bad_values(overrides, field, message):
    with pytest.raises(SchedulerInputError) as caught:
        Flavor.from_dict({**FLAVOR_DATA, **overrides}, name="m1.medium")
    assert caught.value.field == field
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "data, name, field",
    [
        ({"memory_mb": 512, "root_gb": 1}, "m1.tiny", "flavor.vcpus"),
        ({"vcpus": 1, "memory_mb": 512}, "m1.tiny", "flavor.root_gb"),
        (FLAVOR_DATA, None, "flavor.name"),
        ("m1.small", None, "flavor"),
    ],
    ids=["missing-vcpus", "missing-root-gb", "no-name-anywhere", "not-a-mapping"],
)
def test_flavor_from_dict_names_missing_fields(data, name, field):
    with pytest.raises(SchedulerInputError) as caught:
        Flavor.from_dict(data, name=name)
    assert caught.value.field == field


def test_flavor_from_dict_takes_name_argument_over_key_and_drops_description():
    flavor = Flavor.from_dict(
        {**FLAVOR_DATA, "name": "inline", "description": "medium", "ephemeral_gb": 10,
         "swap": 1024, "extra_specs": {"hw:cpu_policy": "dedicated"}},
        name="m1.medium",
    )
    assert flavor == Flavor(name="m1.medium", vcpus=2, memory_mb=4096, root_gb=40,
                            ephemeral_gb=10, swap=1024,
                            extra_specs={"hw:cpu_policy": "dedicated"})
    assert Flavor.from_dict({**FLAVOR_DATA, "name": "inline"}).name == "inline"


@pytest.mark.parametrize(
    "root_gb, ephemeral_gb, swap, expected_mb",
    [(20, 0, 0, 20480), (10, 5, 0, 15360), (10, 5, 512, 15872), (0, 0, 256, 256)],
    ids=["root-only", "root-and-ephemeral", "with-swap-in-mb", "swap-only"],
)
def test_flavor_requested_disk_mb(root_gb, ephemeral_gb, swap, expected_mb):
    flavor = make_flavor(root_gb=root_gb, ephemeral_gb=ephemeral_gb, swap=swap)
    assert flavor.requested_disk_mb == expected_mb


def test_flavor_to_dict():
    assert make_flavor(swap=512).to_dict() == {
        "name": "test", "vcpus": 1, "memory_mb": 2048, "root_gb": 20, "ephemeral_gb": 0,
        "swap": 512, "extra_specs": {},
    }


# --- HostState ----------------------------------------------------------------------------

def test_host_from_dict_fills_defaults_and_ignores_unknown_keys():
    host = HostState.from_dict({
        **HOST_DATA,
        "aggregates": [{"name": "ssd", "metadata": {}}],
        "metrics": {"load1": 0.5},
        "limits": {"memory_mb": 1.0},
    })
    assert host.host == "hv1"
    assert host.nodename == "hv1.lab"
    assert host.free_ram_mb == 40960
    assert host.cpu_allocation_ratio == 4.0
    assert host.ram_allocation_ratio == 1.0
    assert host.disk_allocation_ratio == 1.0
    assert host.reserved_host_memory_mb == 512
    assert host.reserved_host_disk_mb == 0
    assert host.limits == {}
    assert DEFAULT_RATIOS == {"cpu_allocation_ratio": 4.0, "ram_allocation_ratio": 1.0,
                              "disk_allocation_ratio": 1.0}
    assert DEFAULT_RESERVED == {"reserved_host_memory_mb": 512, "reserved_host_disk_mb": 0}


def test_host_from_dict_keeps_per_host_ratios_and_defaults_nodename_to_host():
    data = {key: value for key, value in HOST_DATA.items() if key != "nodename"}
    host = HostState.from_dict({**data, "cpu_allocation_ratio": 16, "ram_allocation_ratio": 1.5,
                                "reserved_host_memory_mb": 2048})
    assert host.nodename == "hv1"
    assert host.cpu_allocation_ratio == 16
    assert host.ram_allocation_ratio == 1.5
    assert host.reserved_host_memory_mb == 2048


@pytest.mark.parametrize(
    "changes, field, message",
    [
        ({"host": None}, "hosts[?].host", "hosts[?].host must be a non-empty string, got None"),
        ({"host": ""}, "hosts[?].host", "hosts[?].host must be a non-empty string, got ''"),
        ({"free_ram_mb": "12"}, "hosts[hv1].free_ram_mb",
         "hosts[hv1].free_ram_mb must be an integer, got '12'"),
        ({"free_ram_mb": 1.0}, "hosts[hv1].free_ram_mb",
         "hosts[hv1].free_ram_mb must be an integer, got 1.0"),
        ({"vcpus_total": -1}, "hosts[hv1].vcpus_total",
         "hosts[hv1].vcpus_total must be a non-negative integer, got -1"),
        ({"vcpus_used": True}, "hosts[hv1].vcpus_used",
         "hosts[hv1].vcpus_used must be a non-negative integer, got True"),
        ({"cpu_allocation_ratio": 0}, "hosts[hv1].cpu_allocation_ratio",
         "hosts[hv1].cpu_allocation_ratio must be a number greater than 0, got 0"),
        ({"ram_allocation_ratio": "1.5"}, "hosts[hv1].ram_allocation_ratio",
         "hosts[hv1].ram_allocation_ratio must be a number greater than 0, got '1.5'"),
        ({"service_up": "yes"}, "hosts[hv1].service_up",
         "hosts[hv1].service_up must be true or false, got 'yes'"),
        ({"disabled_reason": 3}, "hosts[hv1].disabled_reason",
         "hosts[hv1].disabled_reason must be a string or null, got 3"),
        ({"free_disk_mb": None}, "hosts[hv1].free_disk_mb",
         "hosts[hv1].free_disk_mb must be an integer, got None"),
    ],
    ids=["host-none", "host-empty", "free-ram-string", "free-ram-float", "vcpus-negative",
         "vcpus-used-bool", "ratio-zero", "ratio-string", "service-up-string",
         "reason-not-string", "free-disk-none"],
)
def test_host_from_dict_refuses_bad_values(changes, field, message):
    with pytest.raises(SchedulerInputError) as caught:
        HostState.from_dict({**HOST_DATA, **changes})
    assert caught.value.field == field
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "missing", ["host", "vcpus_total", "vcpus_used", "total_usable_ram_mb", "free_ram_mb",
                "total_usable_disk_gb", "free_disk_mb"],
)
def test_host_from_dict_requires_resource_numbers(missing):
    data = {key: value for key, value in HOST_DATA.items() if key != missing}
    with pytest.raises(SchedulerInputError) as caught:
        HostState.from_dict(data)
    expected = "hosts[?].host" if missing == "host" else f"hosts[hv1].{missing}"
    assert caught.value.field == expected


def test_host_free_amounts_may_be_negative():
    host = HostState.from_dict({**HOST_DATA, "free_ram_mb": -1000, "free_disk_mb": -5})
    assert (host.free_ram_mb, host.free_disk_mb) == (-1000, -5)


def test_consume_takes_the_flavor_off_as_nova_does():
    host = make_host(vcpus_used=2, free_ram_mb=10000, free_disk_mb=50000, num_instances=1,
                     num_io_ops=0)
    host.consume(make_flavor(vcpus=2, memory_mb=4096, root_gb=10, ephemeral_gb=5, swap=512))
    # Swap is asked for by DiskFilter but not taken off: 1024 × (10 + 5) = 15360 only.
    assert host.free_ram_mb == 10000 - 4096
    assert host.free_disk_mb == 50000 - 15360
    assert host.vcpus_used == 4
    assert host.num_instances == 2
    assert host.num_io_ops == 1
    assert host.total_usable_ram_mb == 16384
    assert host.vcpus_total == 8


def test_consume_may_drive_free_ram_negative():
    host = make_host(free_ram_mb=1000)
    host.consume(make_flavor(memory_mb=2048))
    assert host.free_ram_mb == -1048


def test_copy_is_independent():
    host = make_host()
    host.limits["memory_mb"] = 16384.0
    twin = host.copy()
    twin.limits["memory_mb"] = 1.0
    twin.consume(make_flavor())
    assert host.limits == {"memory_mb": 16384.0}
    assert host.free_ram_mb == 15872
    assert twin.free_ram_mb == 15872 - 2048


def test_to_dict_round_trips_through_from_dict():
    host = HostState.from_dict(HOST_DATA)
    data = host.to_dict()
    assert data["host"] == "hv1"
    assert data["limits"] == {}
    assert data["down_reason"] is None
    assert HostState.from_dict(data) == host


def test_a_hypervisor_fact_nested_past_python_s_stack_reads_as_missing():
    # A hostile hypervisor's text inside cpu_info: json.loads would raise RecursionError.
    host = make_host(cpu_info={"features": "[" * 100000 + "]" * 100000})
    assert host.fact(["cpu_info", "features", "x"]) is None
