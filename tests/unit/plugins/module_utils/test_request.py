from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import instance_names, resolve_flavor

FLAVORS = {"m1.tiny": {"vcpus": 1, "memory_mb": 512, "root_gb": 1}}


def test_names_are_indexed_from_one():
    assert instance_names("web", 3) == ["web-1", "web-2", "web-3"]
    assert instance_names("db", 1) == ["db-1"]


@pytest.mark.parametrize(
    "name, count, field",
    [
        ("Web", 1, "name"),
        ("web_1", 1, "name"),
        ("-web", 1, "name"),
        ("a" * 62, 1, "name"),  # a-61 would be 64 characters with "-1"
        ("we<b", 1, "name"),
        ("web", 0, "count"),
        ("web", -2, "count"),
        ("web", 1001, "count"),
        ("web", "3", "count"),
        ("web", True, "count"),
    ],
    ids=["upper", "underscore", "leading-dash", "too-long", "angle", "zero", "negative", "absurd", "string", "bool"],
)
def test_bad_names_and_counts_name_the_field(name, count, field):
    with pytest.raises(InputError) as info:
        instance_names(name, count)
    assert info.value.field == field
    assert field in str(info.value)


def test_flavor_by_name_and_inline():
    assert resolve_flavor("m1.tiny", FLAVORS).memory_mb == 512
    inline = resolve_flavor({"name": "custom", "vcpus": 2, "memory_mb": 1024, "root_gb": 5}, FLAVORS)
    assert (inline.name, inline.vcpus, inline.requested_disk_mb) == ("custom", 2, 5 * 1024)


def test_unknown_flavor_lists_the_known_ones():
    with pytest.raises(InputError, match=r"unknown flavor 'm1\.huge' \(known flavors: m1\.tiny\)"):
        resolve_flavor("m1.huge", FLAVORS)


@pytest.mark.parametrize("memory_mb", [0, -512, 1.5, "512", None], ids=["zero", "negative", "fraction", "string", "none"])
def test_inline_flavor_sizes_are_checked(memory_mb):
    with pytest.raises(InputError) as info:
        resolve_flavor({"vcpus": 1, "memory_mb": memory_mb, "root_gb": 1}, FLAVORS)
    assert info.value.field == "flavor.memory_mb"
