from __future__ import annotations

from ansible_collections.berth.fleet.plugins.filter.table import table


def test_columns_are_aligned_and_missing_values_blank():
    rows = [{"name": "web-1", "host": "hv1", "vcpus": 1}, {"name": "web-10", "host": None, "vcpus": 16}]
    assert table(rows, [["instance", "name"], ["hypervisor", "host"], ["vCPUs", "vcpus"]]) == [
        "instance  hypervisor  vCPUs",
        "web-1     hv1         1",
        "web-10                16",
    ]
