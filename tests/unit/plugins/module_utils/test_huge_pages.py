"""Nova's page sizes and reserved_huge_pages, parsed (test_host_facts checks them against a host's
cells, where the inventory source hands them to the host state)."""
from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.huge_pages import (
    page_size_kb,
    parse_reserved_huge_pages,
)

FIELD = "hypervisors.hv1.reserved_huge_pages"


@pytest.mark.parametrize("text, size_kb", [
    ("2048", 2048), (2048, 2048), ("2MB", 2048), ("2MiB", 2048), ("1GB", 1048576), ("1 GiB", 1048576), ("4KB", 4),
])
def test_page_sizes_as_nova_reads_them(text, size_kb):
    assert page_size_kb("size", text) == size_kb


@pytest.mark.parametrize("text", ["2M", "two", "", None, True, "0", "1.5GB", "2mb", "²"])
def test_page_sizes_nova_would_not_read_are_refused(text):
    with pytest.raises(InputError) as caught:
        page_size_kb("size", text)
    assert caught.value.field == "size"


def test_reservations_as_mappings_or_novas_strings():
    assert parse_reserved_huge_pages(FIELD, [{"node": 0, "size": "2MB", "count": 64},
                                             "node:1,size:1048576,count:2"]) == [
        {"node": 0, "size_kb": 2048, "count": 64}, {"node": 1, "size_kb": 1048576, "count": 2}]
    assert parse_reserved_huge_pages(FIELD, None) == []


@pytest.mark.parametrize("value, field", [
    ("node:0,size:2048,count:64", FIELD),
    ([{"node": 0, "size": 2048}], FIELD + "[0]"),
    (["node:0,size:2048,count:64,extra:1"], FIELD + "[0]"),
    ([{"node": -1, "size": 2048, "count": 1}], FIELD + "[0].node"),
    ([{"node": 0, "size": 2048, "count": "many"}], FIELD + "[0].count"),
    ([{"node": "²", "size": 2048, "count": 1}], FIELD + "[0].node"),
    ([{"node": 0, "size": "2M", "count": 1}], FIELD + "[0].size"),
    ([{"node": 0, "size": 2048, "count": 1}, "node:0,size:2MB,count:2"], FIELD + "[1]"),
], ids=["not-a-list", "missing-count", "extra-key", "negative-node", "count-text", "superscript-node",
        "size", "twice"])
def test_bad_reservations_name_the_item(value, field):
    with pytest.raises(InputError) as caught:
        parse_reserved_huge_pages(FIELD, value)
    assert caught.value.field == field
