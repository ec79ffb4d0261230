from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.berth.fleet.plugins.filter.table import table


def test_columns_are_aligned_and_missing_values_blank():
    rows = [{"name": "web-1", "host": "hv1", "vcpus": 1}, {"name": "web-10", "host": None, "vcpus": 16}]
    assert table(rows, [["instance", "name"], ["hypervisor", "host"], ["vCPUs", "vcpus"]]) == [
        "instance  hypervisor  vCPUs",
        "web-1     hv1         1",
        "web-10                16",
    ]


def test_a_list_of_keys_shows_used_over_limit_and_whole_floats_without_decimals():
    rows = [{"host": "hv1", "vcpus_used": 3, "vcpus_limit": 64.0, "ratio": 1.5}]
    assert table(rows, [["host", "host"], ["vCPUs", ["vcpus_used", "vcpus_limit"]], ["ratio", "ratio"]]) == [
        "host  vCPUs  ratio",
        "hv1   3/64   1.500",
    ]


@pytest.mark.parametrize("seconds, shown", [
    (0, "0s"), (45, "45s"), (725, "12m 5s"), (3600, "1h"), (7260, "2h 1m"), (2 * 86400 + 4 * 3600 + 5, "2d 4h"),
    (None, ""),
], ids=["zero", "seconds", "minutes", "whole-hour", "hours", "days", "unknown"])
def test_durations_show_their_two_largest_units(seconds, shown):
    assert table([{"age_s": seconds}], [["age", "age_s", "duration"]]) == ["age", shown]


def test_an_unknown_format_is_refused_naming_the_column():
    with pytest.raises(AnsibleFilterError, match="format one of duration"):
        table([], [["age", "age_s", "humane"]])
