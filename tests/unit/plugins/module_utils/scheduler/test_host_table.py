"""The engine's columnar input (HostTable), staleness, and Berth's image and network filters."""
from __future__ import annotations

import pytest
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import (
    needed_host_fields,
    schedule,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import FILTERS

from ._builders import make_host, make_spec


def columns(**extra):
    """Three hosts as the ledger reads them: one column per field."""
    table = {
        "host": ["hv1", "hv2", "hv3"], "uuid": ["u1", "u2", "u3"],
        "vcpus_total": [8, 8, 8], "vcpus_used": [0, 2, 4],
        "total_usable_ram_mb": [16384] * 3, "free_ram_mb": [15872, 8000, 4000],
        "total_usable_disk_gb": [100] * 3, "free_disk_mb": [102400] * 3,
    }
    table.update(extra)
    return table


def test_a_host_is_built_only_when_asked_for_once_and_validated():
    table = HostTable(columns(free_ram_mb=[15872, 8000, "lots"]))
    assert table.column("free_ram_mb")[1] == 8000
    first = table[0]
    assert first is table[0] and first.host == "hv1" and first.nodename == "hv1"
    # Defaults for fields without a column, as HostState's own.
    assert table.column("failed_builds") == [0, 0, 0] and table[1].sync_age_s is None
    with pytest.raises(SchedulerInputError) as error:
        table[2]  # noqa: B018 - built on use, and checked then
    assert error.value.field == "hosts[hv3].free_ram_mb"


@pytest.mark.parametrize("bad, field", [
    ({"colour": ["red"] * 3}, "hosts.colour"),
    ({"vcpus_used": [0, 1]}, "hosts.vcpus_used"),
])
def test_bad_columns_name_the_field(bad, field):
    with pytest.raises(SchedulerInputError) as error:
        HostTable(columns(**bad))
    assert error.value.field == field


@pytest.mark.parametrize("engine", ["plain", "vectorized"])
def test_columns_and_host_states_decide_alike(engine):
    table = HostTable(columns())
    states = [make_host(name, uuid=uuid, vcpus_used=used, free_ram_mb=free)
              for name, uuid, used, free in zip(["hv1", "hv2", "hv3"], ["u1", "u2", "u3"], [0, 2, 4],
                                                [15872, 8000, 4000])]
    spec = make_spec(count=2, engine=engine)
    assert schedule(table, spec).to_dict() == schedule(states, spec).to_dict()


@pytest.mark.parametrize("engine", ["plain", "vectorized"])
def test_a_host_synced_longer_ago_than_service_down_time_is_stale_and_never_picked(engine):
    table = HostTable(columns(sync_age_s=[700.4, 30.0, 30.0], free_ram_mb=[15872, 1000, 4000]))
    decision = schedule(table, make_spec(engine=engine, explain="full", service_down_time=600))
    assert [p.host for p in decision.placements] == ["hv3"]
    [stale, small] = decision.rejections
    assert (stale.host, stale.reason, stale.message()) == (
        "hv1", "host_stale", "stale: last synced 700 s ago (service_down_time 600 s)")
    assert small.host == "hv2"
    failed = schedule(HostTable(columns(sync_age_s=[700.0] * 3)), make_spec(engine=engine, service_down_time=600))
    assert failed.summary == ("0/3 hosts are available for instance 1 of 1: 3 stale (not synced for over "
                              "600 s)")


def test_live_facts_have_no_age_and_are_never_stale():
    assert FILTERS["ComputeFilter"]().host_passes(make_host(), make_spec(service_down_time=1)) is None


@pytest.mark.parametrize("engine", ["plain", "vectorized"])
def test_hosts_without_the_image_volume_or_a_network_are_passed_over_with_the_reason(engine):
    table = HostTable(columns(images=[["debian.qcow2"], [], ["debian.qcow2"]],
                              networks=[["default"], ["default", "private"], ["default", "private"]]))
    spec = make_spec(engine=engine, explain="full", image_volume="debian.qcow2",
                     requested_networks=["default", "private"])
    decision = schedule(table, spec)
    assert [p.host for p in decision.placements] == ["hv3"]
    assert [(r.host, r.message()) for r in decision.rejections] == [
        ("hv1", "network missing: private"), ("hv2", "image missing: debian.qcow2")]
    nowhere = schedule(table, make_spec(engine=engine, image_volume="alpine.raw"))
    assert nowhere.summary == ("0/3 hosts are available for instance 1 of 1: 3 without image alpine.raw in "
                               "the storage pool")


@pytest.mark.parametrize("engine", ["plain", "vectorized"])
def test_an_image_the_sync_refused_is_passed_over_with_why(engine):
    why = "image linked.qcow2 in storage pool default on hv1 is a symbolic link; Berth refuses ..."
    table = HostTable(columns(images=[[], [], ["linked.qcow2"]], refused_images=[{"linked.qcow2": why}, {}, {}]))
    decision = schedule(table, make_spec(engine=engine, explain="full", image_volume="linked.qcow2"))
    assert [p.host for p in decision.placements] == ["hv3"]
    assert [(r.host, r.reason, r.message()) for r in decision.rejections] == [
        ("hv1", "image_refused", f"image refused: {why}"), ("hv2", "image_missing", "image missing: linked.qcow2")]


def test_a_launch_without_image_or_networks_reads_neither():
    assert {"images", "networks"}.isdisjoint(needed_host_fields(make_spec(weighers=["RAMWeigher"])))
    wanted = needed_host_fields(make_spec(image_volume="x", requested_networks=["n"],
                                          image_properties={"hw_architecture": "x86_64"},
                                          metrics_weight_setting=["load=1"], weighers=["MetricsWeigher"]))
    assert {"images", "networks", "supported_instances", "metrics"} <= wanted
