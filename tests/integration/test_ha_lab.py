"""ha.yml on the real lab fleet (issue 35 item 2): two HA instances of different priorities and
one ordinary instance on hv2; hv2's libvirtd stops and the sync marks it down. Without a fence
command the HA run reports hv2 down and not fenced and moves nothing; with the operator's fence
command (a script of this test's own) it fences hv2 once and restarts the HA instances elsewhere,
highest priority first in its report, their guests booting there (serial marker), leaving the
ordinary one to evacuate.yml; a second run changes nothing. hv2 is started again in a finally: the other tests share this fleet."""

from __future__ import annotations

import json

import check
import fleet
import pytest
from conftest import drift, failed_messages, task_result
from test_evacuate import (
    BOOT_TIMEOUT_S,
    SHORT,
    assert_runs_only_where_the_ledger_says,
    go_down,
    launch_on,
    row_of,
)

pytestmark = pytest.mark.integration

HA_TASK = "Restart the HA instances of the down, fenced hypervisors, highest priority first"


def test_the_ha_run_restarts_a_fenced_host_s_ha_instances_by_priority_and_only_those(lab, tmp_path):
    ran = tmp_path / "fenced-hosts"
    script = tmp_path / "fence.sh"
    script.write_text(f'#!/bin/sh\necho "$1" >> {ran}\necho "power off: $1"\n')
    script.chmod(0o755)
    low = launch_on(lab, "hv2", "hlow", ha=True, ha_priority=100)
    high = launch_on(lab, "hv2", "hhigh", ha=True, ha_priority=900)
    plain = launch_on(lab, "hv2", "hplain")
    lab.gather()
    go_down(lab, "hv2")
    fence = ("-e", json.dumps({"berth_fence_command": [str(script), "{hypervisor}"]}))
    try:
        # No fence command, no fencing recorded: reported, never evacuated.
        unfenced = lab.playbook("ha.yml", *SHORT)
        assert unfenced["rc"] == 0, failed_messages(unfenced)
        result = task_result(unfenced, HA_TASK)
        assert result["changed"] is False and result["results"] == []
        (line,) = [line for line in result["report"] if line.startswith("hv2: ")]
        assert "NOT FENCED, none of its 2 HA instance(s) restarted" in line
        assert "its 1 other instance(s) are not HA: left to evacuate.yml" in line
        assert {row_of(lab, name)["host"] for name in ("hlow-1", "hhigh-1", "hplain-1")} == {"hv2"}

        restarted = lab.playbook("ha.yml", *fence, *SHORT)
        assert restarted["rc"] == 0, failed_messages(restarted)
        assert ran.read_text() == "hv2\n"
        result = task_result(restarted, HA_TASK)
        assert result["changed"] is True
        assert [(r["name"], r["ha_priority"], r["outcome"]) for r in result["results"]] == [
            ("hhigh-1", 900, "evacuated"), ("hlow-1", 100, "evacuated")]
        instance_lines = [line for line in result["report"] if line.startswith("priority ")]
        assert [line.split(":")[0] for line in instance_lines] == ["priority 900", "priority 100"]
        for name, row in (("hhigh-1", high), ("hlow-1", low)):
            now = assert_runs_only_where_the_ledger_says(lab, name, "hv2")
            assert now["uuid"] == row["uuid"]
            # Its guest boots there (the lab guest's serial marker).
            log = fleet.log_dir(lab.dir, now["host"]) / f"{name}.serial.log"
            assert check.wait_for_marker(log, row["uuid"], BOOT_TIMEOUT_S), f"{name} did not boot on {now['host']}"
        # The ordinary instance is left where it was, for evacuate.yml.
        assert (row_of(lab, "hplain-1")["host"], row_of(lab, "hplain-1")["uuid"]) == ("hv2", plain["uuid"])

        again = lab.playbook("ha.yml", *fence, *SHORT)
        assert again["rc"] == 0, failed_messages(again)
        assert task_result(again, HA_TASK)["changed"] is False
        assert ran.read_text() == "hv2\n"
    finally:
        lab.start_daemon("hv2")
    gathered = lab.gather()
    removed = [line for line in drift(gathered) if line.startswith("hv2: evacuated, removed")]
    assert all(any(f"domain {name}" in line for line in removed) for name in ("hhigh-1", "hlow-1")), drift(gathered)
    for name in ("hlow", "hhigh", "hplain"):
        assert lab.playbook("delete.yml", "-e", f"name={name}")["rc"] == 0
