"""A launch's project and its image's properties, through ansible-playbook on the real lab fleet:
AggregateMultiTenancyIsolation keeps another project off a tenant's hypervisor, and each
instance row records the project it was launched for and its image's properties."""

from __future__ import annotations

import json

import pytest
from conftest import failed_messages, task_result
from test_concurrency import rows

pytestmark = pytest.mark.integration

TINY = {"vcpus": 1, "memory_mb": 128, "root_gb": 1}
FILTERS = ["ComputeFilter", "AvailabilityZoneFilter", "RamFilter", "CoreFilter", "DiskFilter",
           "AggregateMultiTenancyIsolation"]


def test_another_project_never_lands_on_a_tenants_hypervisor_and_instances_record_their_project(lab, tmp_path):
    url = f"sqlite:///{tmp_path}/ledger.sqlite3"
    inventory = lab.inventory_copy(tmp_path, url, aggregates={
        "team_a_only": {"hosts": ["hv2"], "metadata": {"filter_tenant_id": "team-a"}}})
    synced = lab.finish(lab.start_playbook("gather.yml", inventory=inventory))
    assert synced["rc"] == 0, failed_messages(synced)

    def launch(name: str, count: int, project: str) -> dict:
        extra = {"name": name, "count": count, "flavor": TINY, "berth_project_id": project,
                 "berth_enabled_filters": FILTERS}
        return lab.finish(lab.start_playbook("launch.yml", "-e", json.dumps(extra), inventory=inventory))

    try:
        others = launch("tb", 4, "team-b")
        assert others["rc"] == 0, failed_messages(others)
        placed = {row["name"]: row for row in rows(url, "instances")}
        assert sorted(placed) == ["tb-1", "tb-2", "tb-3", "tb-4"]
        assert {row["host"] for row in placed.values()} <= {"hv1", "hv3"}
        assert {row["project_id"] for row in placed.values()} == {"team-b"}
        plan = task_result(others, "Launch the instances")
        assert ("hv2", "aggregate_tenant") in {(r["host"], r["reason"]) for r in plan["decision"]["rejections"]}

        # The tenant itself may use its hypervisor: with hv1 and hv3 ignored, team-a goes there.
        own = lab.finish(lab.start_playbook("launch.yml", "-e", json.dumps(
            {"name": "ta", "flavor": TINY, "berth_project_id": "team-a", "berth_enabled_filters": FILTERS,
             "ignore_hosts": ["hv1", "hv3"]}), inventory=inventory))
        assert own["rc"] == 0, failed_messages(own)
        [tenant] = [row for row in rows(url, "instances") if row["name"] == "ta-1"]
        assert (tenant["host"], tenant["project_id"]) == ("hv2", "team-a")
        assert "ta-1" in lab.virsh("hv2", "list", "--name").split()
    finally:
        for name in ("tb", "ta"):
            lab.finish(lab.start_playbook("delete.yml", "-e", f"name={name}", inventory=inventory))
