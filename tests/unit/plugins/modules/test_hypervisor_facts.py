"""berth.fleet.hypervisor_facts: bad input is refused before any connection, naming the option."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.modules.hypervisor_facts import run_module

DEFAULTS = {"name": "hv1", "uri": "qemu:///system", "storage_pool": "default", "timeout": 1.0,
            "cpu_allocation_ratio": None, "ram_allocation_ratio": None, "disk_allocation_ratio": None,
            "reserved_host_memory_mb": None, "reserved_host_disk_mb": None, "aggregates": [],
            "default_availability_zone": "nova"}


@pytest.mark.parametrize(
    "params, field",
    [
        ({"ram_allocation_ratio": -1.0}, "ram_allocation_ratio"),
        ({"reserved_host_memory_mb": -5}, "reserved_host_memory_mb"),
        ({"uri": "not a uri"}, "uri"),
        ({"aggregates": [{"metadata": {}}]}, "aggregates[0]"),
        ({"aggregates": [{"name": "a", "metadata": {"cpu_allocation_ratio": "x"}}]},
         "aggregates.a.metadata.cpu_allocation_ratio"),
    ],
    ids=["ratio", "reserved", "uri", "aggregate-without-name", "aggregate-ratio"],
)
def test_bad_options_name_the_option(params, field):
    with pytest.raises(InputError) as info:
        run_module(SimpleNamespace(params={**DEFAULTS, **params}))
    assert info.value.field == field
