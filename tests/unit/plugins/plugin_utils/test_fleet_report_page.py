"""The fleet report's page: states, bars from the engine's formulas, escaping, the stamp that keeps
a second run unchanged; and its read of a real ledger (SQLite and PostgreSQL)."""

from __future__ import annotations

import base64
import hashlib
import re

import markupsafe
import pytest

from ansible_collections.berth.fleet.plugins.action.fleet_report import _checked_path
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
    Flavor,
    HostState,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
from ansible_collections.berth.fleet.plugins.plugin_utils import _fleet_report as report
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger

TINY = Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1)
USAGE = {
    "vcpus_total": 4, "vcpus_used": 6, "cpu_allocation_ratio": 4.0,
    "total_usable_ram_mb": 16384, "free_ram_mb": 8192, "ram_allocation_ratio": 1.5, "reserved_host_memory_mb": 512,
    "total_usable_disk_gb": 100, "free_disk_mb": 100 * 1024, "disk_allocation_ratio": 1.0, "reserved_host_disk_mb": 0,
    "num_instances": 3, "num_io_ops": 0, "failed_builds": 0,
}


def hypervisor(name="hv1", status="up", age_s=10.0, reason=None, disabled=False, disabled_reason=None, **usage):
    return {
        "uuid": f"uuid-{name}", "host": name, "nodename": name, "sync_status": status, "sync_age_s": age_s,
        "status_reason": reason, "synced_at": "2025-01-02T03:04:05.678901", "disabled": disabled,
        "disabled_reason": disabled_reason, "availability_zone": "nova", "aggregates": [],
        "unmanaged": [], "usage": {**USAGE, **usage},
    }


def view(hypervisors, instances=(), server_groups=(), decisions=()):
    return {"hypervisors": list(hypervisors), "instances": list(instances), "server_groups": list(server_groups),
            "decisions": list(decisions)}


def page_of(*hypervisors, **parts):
    return report.render(report.page_model(view(hypervisors, **parts), 600, "sqlite:///l.sqlite3"))


@pytest.mark.parametrize("row, expected", [
    (hypervisor(), ("up", None)),
    (hypervisor(age_s=601.0), ("stale", "not synced for over 600 s (service_down_time)")),
    (hypervisor(age_s=600.0), ("up", None)),
    (hypervisor(status="down", age_s=9999.0, reason="connection refused"), ("down", "connection refused")),
    (hypervisor(status="missing", reason="missing: in no inventory"), ("missing", "missing: in no inventory")),
], ids=["fresh", "older-than-service-down-time", "exactly-service-down-time", "down-not-stale", "missing"])
def test_state_is_the_sync_status_then_staleness_as_service_down_time_decides(row, expected):
    assert report.host_status(row, 600) == expected


def test_bars_are_the_resource_filters_numbers_track_the_limit_fill_the_used():
    vcpu, ram, disk = report.resource_bars(USAGE)
    # CoreFilter: limit 4 x 4 = 16, used 6 (more than the 4 CPUs: overcommitted, not over the limit).
    assert (vcpu["used"], vcpu["limit"], vcpu["claimed_pct"], vcpu["capacity_pct"], vcpu["over"]) == \
        ("6", "16", "37.5", "25", False)
    # RamFilter: limit 16384 x 1.5 = 24576 MB; used = total - free = 8192 MB, 512 of them reserved.
    assert (ram["used"], ram["limit"], ram["unit"]) == ("8", "24", "GiB")
    assert ram["reserved_pct"] == "2.08" and ram["claimed_pct"] == "31.25"
    assert ram["capacity_pct"] == "66.67"
    assert ram["title"] == "claimed 7.5, reserved 0.5; limit = capacity 16 × ratio 1.5"
    # Ratio 1: the capacity is the limit, no tick.
    assert (disk["claimed_pct"], disk["capacity_pct"]) == ("0", None)


def test_a_host_over_its_limit_is_marked_over_and_its_fill_stops_at_the_track():
    _vcpu, ram, _disk = report.resource_bars({**USAGE, "ram_allocation_ratio": 1.0, "free_ram_mb": -2048})
    assert ram["over"] and ram["used"] == "18" and ram["limit"] == "16"
    assert float(ram["reserved_pct"]) + float(ram["claimed_pct"]) == pytest.approx(100)


def test_a_host_whose_builds_failed_says_how_many_and_one_without_says_nothing():
    page = page_of(hypervisor("hv1", failed_builds=2), hypervisor("hv2"))
    assert page.count("failed build") == 1
    assert "2 failed builds since its last successful one" in page


def test_names_and_reasons_from_users_and_hypervisors_are_text_never_markup():
    page = page_of(
        hypervisor("<b>bold</b>", disabled=True, disabled_reason="<script>alert(1)</script>"),
        hypervisor("hv2", status="down", reason='"><img src=x onerror=alert(2)>'),
        instances=[{"uuid": "i1", "name": "web-1", "hypervisor_uuid": "uuid-hv2", "host": "hv2", "state": "ACTIVE",
                    "flavor": "<i>f</i>", "failure_reason": None}],
        server_groups=[{"name": "g<u>1</u>", "policy": "anti-affinity", "rules": {}, "hosts": ["hv2"],
                        "members": ["i1"]}],
    )
    body = page[page.index("<body>"):]
    for text in ("<b>bold</b>", "<script>alert(1)</script>", '"><img src=x onerror=alert(2)>', "<i>f</i>",
                 "g<u>1</u>"):
        assert text not in body
        assert str(markupsafe.escape(text)) in body
    # The page's own script is the only one, and its policy lets nothing else run.
    assert body.count("<script>") == 1
    assert f"script-src 'sha256-{report.script_hash()}'" in page


def test_the_policy_hash_is_the_hash_of_the_script_the_page_carries():
    page = page_of(hypervisor())
    [script] = re.findall(r"<script>(.*?)</script>", page, re.DOTALL)
    assert base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() == report.script_hash()


def test_the_same_fleet_renders_the_same_page_and_the_stamp_comes_off_again():
    first = page_of(hypervisor(), hypervisor("hv2"))
    assert page_of(hypervisor(), hypervisor("hv2")) == first
    written = report.stamped(first, "2025-01-02 03:04:05")
    assert "generated <!--berth:generated-->2025-01-02 03:04:05<!--/berth:generated--> UTC" in written
    assert report.unstamped(written) == first
    # A stamp cannot be forged by a name: escaped text has no comment in it.
    assert "&lt;!--berth:generated--&gt;" in page_of(hypervisor("<!--berth:generated-->"))
    assert page_of(hypervisor(), hypervisor("hv3")) != first


def test_summary_counts_states_with_disabled_beside_them_and_lists_the_most_full():
    model = report.page_model(view([
        hypervisor("hv1", free_ram_mb=16384),
        hypervisor("hv2", age_s=1e6, disabled=True, disabled_reason="maintenance"),
        hypervisor("hv3", status="down", reason="refused", free_ram_mb=0),
    ]), 600, "x")
    assert model["state_counts"] == [("up", 1), ("stale", 1), ("down", 1), ("missing", 0), ("disabled", 1)]
    # hv3 uses all its 16384 MB of a 24576 MB limit (67%); hv2 8192 (33%); hv1 has vCPUs only (37.5%).
    assert [host["name"] for host in model["most_full"]] == ["hv3", "hv1", "hv2"]
    assert [host["filter_states"] for host in model["hosts"]] == ["up", "stale disabled", "down"]
    # The fleet's bars sum the hypervisors that are up: hv1 alone.
    assert [(total["used"], total["limit"]) for total in model["totals"]] == [("6", "16"), ("0", "24"), ("0", "100")]


def test_checked_path_refuses_a_directory_and_a_missing_directory_naming_the_field(tmp_path):
    assert _checked_path(str(tmp_path / "fleet.html")) == str(tmp_path / "fleet.html")
    for path in (tmp_path, tmp_path / "nowhere" / "fleet.html"):
        with pytest.raises(InputError) as caught:
            _checked_path(str(path))
        assert caught.value.field == "path"


@pytest.fixture
def ledger(ledger_url):
    opened = Ledger(ledger_url).open()
    yield opened
    opened.close()


def state(name, uuid, up=True, down_reason=None):
    return {
        "host": name, "nodename": name, "uuid": uuid, "service_up": up, "down_reason": down_reason,
        "disabled": False, "vcpus_total": 4, "vcpus_used": 0, "total_usable_ram_mb": 4096, "free_ram_mb": 3584,
        "total_usable_disk_gb": 100, "free_disk_mb": 100 * 1024, "num_instances": 0, "num_io_ops": 0,
        "cpu_allocation_ratio": 4.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
        "reserved_host_memory_mb": 512, "reserved_host_disk_mb": 0, "domains": [],
    }


def test_a_real_ledger_read_in_one_snapshot_gives_every_part_of_the_page(ledger):
    ledger.tracker_sync([state("hv1", "u1"), state("hv2", "u2"), state("hv3", "u3")])
    ledger.tracker_sync([state("hv3", "u3", up=False, down_reason="connection refused")])
    ledger.set_disabled("hv2", True, "disk <swap> & reboot")
    ledger.create_server_group("web", "anti-affinity")
    spec = RequestSpec(flavor=TINY, count=2)
    hosts = [HostState.from_dict(row) for row in (state("hv1", "u1"), state("hv2", "u2"))]
    decision = schedule(hosts, spec)
    ledger.record_decision("web", "test", {"flavor": TINY.to_dict(), "count": 2}, [], decision.to_dict(), "claimed")
    ledger.claim([{"name": "web-1", "host": "hv1", "hypervisor_uuid": "u1"},
                  {"name": "web-2", "host": "hv2", "hypervisor_uuid": "u2"}], TINY, "test", server_group="web")

    fleet = ledger.fleet_view(decisions_limit=5)
    model = report.page_model(fleet, 600, "ledger")
    hosts = {host["name"]: host for host in model["hosts"]}
    assert (hosts["hv1"]["state"], hosts["hv2"]["disabled_reason"]) == ("up", "disk <swap> & reboot")
    assert (hosts["hv3"]["state"], hosts["hv3"]["why"]) == ("down", "connection refused")
    assert [instance["name"] for instance in hosts["hv1"]["instances"]] == ["web-1"]
    assert hosts["hv1"]["instances"][0]["server_group"] == "web"
    # RAM: 512 reserved + 512 claimed of 4096 MB.
    assert (hosts["hv1"]["bars"][1]["used"], hosts["hv1"]["bars"][1]["limit"]) == ("1", "4")
    assert model["server_groups"][0]["members"] == [
        {"name": "web-1", "host": "hv1", "state": "BUILDING"}, {"name": "web-2", "host": "hv2", "state": "BUILDING"}]
    [recorded] = model["decisions"]
    assert recorded["summary"] == "placed 2 instances on hv1, hv2"
    assert [placement["host"] for placement in recorded["placements"]] == ["hv1", "hv2"]
    assert recorded["placements"][0]["weights"]
    page = report.render(model)
    assert "disk &lt;swap&gt; &amp; reboot" in page and "placed 2 instances on hv1, hv2" in page
