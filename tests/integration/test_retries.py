"""A build that fails on its host is cleaned up, its claim released, and retried on the next
alternate; nothing is left on the failed host once it is back."""

from __future__ import annotations

import fleet
import pytest
from conftest import failed_messages, hooks_env, task_result

pytestmark = pytest.mark.integration


def planned(lab, name: str) -> dict:
    """The placement a dry run predicts for <name>-1: host and alternates."""
    dry = lab.playbook("launch.yml", "-e", f"name={name}", "-e", "count=1", check=True)
    assert dry["rc"] == 0, failed_messages(dry)
    return task_result(dry, "Launch the instances")["placements"][0]


def hv_uuid(lab, host: str) -> str:
    return fleet.host_uuid(lab.dir, host)


def assert_nothing_of(lab, host: str, instance_uuid: str) -> None:
    assert instance_uuid not in lab.virsh(host, "list", "--all", "--uuid")
    assert instance_uuid not in lab.virsh(host, "vol-list", "default")


def landed(lab, name: str) -> dict:
    rows = [r for r in lab.ledger_rows("instances") if r["name"] == f"{name}-1"]
    assert len(rows) == 1
    return rows[0]


def claims_of(lab, instance_uuid: str) -> list[dict]:
    return [c for c in lab.ledger_rows("claims") if c["instance_uuid"] == instance_uuid]


@pytest.mark.parametrize("point", ["after-root-volume", "after-define"],
                         ids=["after-volume-created", "start-refused-after-define"])
def test_build_failing_on_its_host_lands_on_the_first_alternate(lab, point):
    name = f"retry{point.split('-')[-1]}"
    plan = planned(lab, name)
    failing, alternate = plan["host"], plan["alternates"][0]

    result = lab.playbook("launch.yml", "-e", f"name={name}", "-e", "count=1",
                          env_extra=hooks_env(faults=[f"{failing}:{point}"]))

    assert result["rc"] == 0, failed_messages(result)
    row = landed(lab, name)
    assert row["state"] == "ACTIVE" and row["host"] == alternate
    assert lab.virsh(alternate, "domstate", row["uuid"]).strip() == "running"
    assert [c["hypervisor_uuid"] for c in claims_of(lab, row["uuid"])] == [hv_uuid(lab, alternate)]
    assert_nothing_of(lab, failing, row["uuid"])
    build = task_result(result, "Launch the instances")["results"][0]
    assert build["host"] == alternate
    assert build["failed_attempts"] == [f"{failing}: injected fault at {point}"]
    assert lab.playbook("delete.yml", "-e", f"name={name}")["rc"] == 0


def test_host_whose_daemon_stops_after_scheduling_is_skipped_and_clean_when_back(lab):
    name = "retrystop"
    try:
        result = lab.playbook("../tests/integration/playbooks/stop_chosen_host.yml",
                              "-e", f"launch_name={name}", "-e", f"lab_dir={lab.dir}")
        assert result["rc"] == 0, failed_messages(result)
        stopped = task_result(result, "Schedule one instance")["placements"][0]["host"]
        row = landed(lab, name)
        assert row["state"] == "ACTIVE" and row["host"] != stopped
        assert [c["hypervisor_uuid"] for c in claims_of(lab, row["uuid"])] == [hv_uuid(lab, row["host"])]
        build = task_result(result, "Build instances on their hypervisors")["results"][0]
        assert build["failed_attempts"][0].startswith(f"{stopped}: ")
    finally:
        for host in lab.hosts:
            if fleet.daemon_pid(lab.dir, host) is None:
                lab.start_daemon(host)
    assert_nothing_of(lab, stopped, row["uuid"])
    assert lab.playbook("delete.yml", "-e", f"name={name}")["rc"] == 0


def test_build_failing_everywhere_is_error_with_every_reason_and_leaves_nothing(lab):
    name = "retryall"
    faults = [f"{host}:after-define" for host in lab.hosts]

    result = lab.playbook("launch.yml", "-e", f"name={name}", "-e", "count=1",
                          env_extra=hooks_env(faults=faults))

    assert result["rc"] != 0
    row = landed(lab, name)
    assert row["state"] == "ERROR"
    for host in lab.hosts:
        assert f"{host}: injected fault at after-define" in row["failure_reason"]
        assert_nothing_of(lab, host, row["uuid"])
    build = task_result(result, "Launch the instances")["results"][0]
    assert build["msg"].startswith(f"{name}-1: build failed on 3 host(s): ")
    assert claims_of(lab, row["uuid"]) == []
    assert lab.playbook("delete.yml", "-e", f"name={name}")["rc"] == 0
