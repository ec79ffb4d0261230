"""berth.fleet.server's diff: each build's domain XML at the task's top level, where Ansible prints
it (the default callback shows a task's ``diff``, never one inside its ``results``), after the
ledger's before/after of a single instance; none without --diff."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.plugin_utils.operations import server
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

ARGS = {"name": "web", "count": 2, "state": "present", "shutdown_timeout": 60, "timeout": 30, "flavor": "m1.tiny"}


class EmptyLedger:
    """A ledger that knows none of the instances."""

    def instances(self, names):
        return []


def planned_build(name: str, host: str, diff: bool) -> dict:
    """A check-mode build result as Build gives it, with its domain diff under --diff."""
    result = {"changed": True, "msg": f"would build {name} on {host}", "item": {"name": name, "host": host}}
    if diff:
        result["diff"] = {"before": "", "after": f"<domain type='qemu'><name>{name}</name></domain>",
                          "before_header": f"{name} on {host} (libvirt)", "after_header": f"{name} on {host} (planned)"}
    return result


@pytest.fixture
def planned_launch(monkeypatch):
    """Launch replaced by one that plans each name on hv1, hv2... as a check-mode launch answers."""

    class PlannedLaunch:
        def __init__(self, request, settings, names, launch_name, ledger, task_vars, template_path, check_mode, diff,
                     hooks, **run):
            self.names, self.diff = names, diff

        def run(self):
            placements = [{"name": name, "host": f"hv{index}", "uuid": None}
                          for index, name in enumerate(self.names, 1)]
            return {"changed": True,
                    "schedule": {"placements": placements, "existing": [], "summary": "placed"},
                    "build": {"results": [planned_build(p["name"], p["host"], self.diff) for p in placements]}}

    monkeypatch.setattr(server, "Launch", PlannedLaunch)


def run(args: dict, diff: bool) -> dict:
    return server.Server(args, Settings(), EmptyLedger(), {}, "domain.xml.j2", check_mode=True, diff=diff).run()


def test_with_count_each_domain_diff_is_at_the_top_level_and_not_inside_the_results(planned_launch):
    result = run(ARGS, diff=True)
    assert [diff["after_header"] for diff in result["diff"]] == ["web-1 on hv1 (planned)", "web-2 on hv2 (planned)"]
    assert [diff["after"] for diff in result["diff"]] == [f"<domain type='qemu'><name>web-{index}</name></domain>"
                                                          for index in (1, 2)]
    assert all("diff" not in build for build in result["results"])


def test_one_instance_diff_is_the_ledger_s_before_and_after_then_its_domain(planned_launch):
    result = run({**ARGS, "name": "db-1", "count": None}, diff=True)
    ledger, domain = result["diff"]
    assert (ledger["before"], ledger["before_header"], ledger["after_header"]) == (
        {"state": "absent"}, "db-1 (ledger)", "db-1 (wanted)")
    assert (ledger["after"]["name"], ledger["after"]["state"]) == ("db-1", "PLANNED")
    assert domain["after_header"] == "db-1 on hv1 (planned)"


def test_without_diff_mode_there_is_no_diff(planned_launch):
    assert "diff" not in run(ARGS, diff=False)
    assert "diff" not in run({**ARGS, "name": "db-1", "count": None}, diff=False)
