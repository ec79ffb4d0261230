"""Nova's CPU set syntax for cpu_dedicated_set and cpu_shared_set: parsing, overlap, host CPUs."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.cpu_sets import (
    check_cpu_sets,
    format_cpu_set,
    host_cpu_sets,
    parse_cpu_set,
)
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError

FIELD = "hypervisors.hv1.cpu_dedicated_set"


@pytest.mark.parametrize("text, cpus", [
    ("0", [0]),
    ("0-3", [0, 1, 2, 3]),
    ("0-3,^2,8", [0, 1, 3, 8]),
    ("^2,0-3", [0, 1, 3]),            # an exclusion applies wherever it stands
    ("4-7,^5-6", [4, 7]),
    (" 1 , 3 ", [1, 3]),
    ("2,2,1-2", [1, 2]),
    ("8191", [8191]),
], ids=["one", "range", "nova-example", "exclusion-first", "range-excluded", "spaces", "repeats", "largest"])
def test_parses(text, cpus):
    assert parse_cpu_set(FIELD, text) == cpus


@pytest.mark.parametrize("text, words", [
    ("", "must be a CPU set"),
    (3, "must be a CPU set"),
    (None, "must be a CPU set"),
    ("a-b", "'a-b' is not a CPU id"),
    ("1,,2", "'' is not a CPU id"),
    ("-1", "'-1' is not a CPU id"),
    ("3-1", "ends before it starts"),
    ("0-3,^0-3", "leaves no CPU"),
    ("^1", "leaves no CPU"),
    ("0-123456", "'0-123456' is not a CPU id"),
    ("0-8192", "beyond the largest id"),
    ("1;2", "is not a CPU id"),
], ids=["empty", "number", "none", "letters", "empty-item", "negative", "backwards", "all-excluded",
        "only-exclusion", "too-many-digits", "beyond-linux", "wrong-separator"])
def test_refuses_naming_the_field(text, words):
    with pytest.raises(InputError) as caught:
        parse_cpu_set(FIELD, text)
    assert caught.value.field == FIELD
    assert words in str(caught.value)


@pytest.mark.parametrize("cpus, text", [
    ([], ""), ([5], "5"), ([0, 1, 2, 5], "0-2,5"), ([3, 1, 2, 7, 8, 10], "1-3,7-8,10"),
])
def test_formats(cpus, text):
    assert format_cpu_set(cpus) == text


def test_the_sets_may_not_overlap():
    assert check_cpu_sets("hypervisors.hv1", {"cpu_dedicated_set": "2-5", "cpu_shared_set": "0-1"}) == {
        "cpu_dedicated_set": [2, 3, 4, 5], "cpu_shared_set": [0, 1]}
    assert check_cpu_sets("", {}) == {"cpu_dedicated_set": None, "cpu_shared_set": None}
    with pytest.raises(InputError) as caught:
        check_cpu_sets("hypervisors.hv1", {"cpu_dedicated_set": "2-5", "cpu_shared_set": "0-2,5"})
    assert caught.value.field == "hypervisors.hv1.cpu_shared_set"
    assert "share CPUs 2,5" in str(caught.value)
    with pytest.raises(InputError) as caught:
        check_cpu_sets("", {"cpu_shared_set": "x"})
    assert caught.value.field == "cpu_shared_set"


def test_a_host_must_have_the_cpus():
    assert host_cpu_sets("hypervisors.hv1", {"cpu_dedicated_set": "4-7"}, range(8), "hv1") == {
        "cpu_dedicated_set": [4, 5, 6, 7], "cpu_shared_set": None}
    with pytest.raises(InputError) as caught:
        host_cpu_sets("hypervisors.hv1", {"cpu_shared_set": "0-1", "cpu_dedicated_set": "6-9"}, range(8), "hv1")
    assert caught.value.field == "hypervisors.hv1.cpu_dedicated_set"
    assert "hv1 has no CPU 8-9 (its CPUs: 0-7)" in str(caught.value)
