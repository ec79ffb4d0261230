"""A move keeps what the launch asked for, and failed builds count (issue 21), through
ansible-playbook on a lab fleet of its own: four real libvirt hypervisors, hv1 and hv2 in
availability zone az1, hv3 and hv4 in az2, hv4 with little memory left for instances (so that
the scheduler prefers the other three whenever it may)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import fleet
import pytest
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import DEFAULT_FILTERS
from conftest import Lab, failed_messages, hooks_env, rows, task_result
from test_fleet_report import run_module

pytestmark = pytest.mark.integration

TINY = {"vcpus": 1, "memory_mb": 128, "root_gb": 1}
ZONES = {"az1": ["hv1", "hv2"], "az2": ["hv3", "hv4"]}


@pytest.fixture(scope="module")
def four():
    directory = tempfile.mkdtemp(prefix="berth-lab4-", dir="/tmp")
    try:
        yield Lab(directory, fleet.up(directory, hosts=4))
    finally:
        fleet.down(directory)
        shutil.rmtree(directory, ignore_errors=True)


class Fleet:
    """The four-host lab with a ledger of the test's own, gathered."""

    def __init__(self, lab: Lab, directory: Path) -> None:
        self.lab, self.url = lab, f"sqlite:///{directory}/ledger.sqlite3"
        # hv4 keeps all but ~3 GB of this machine's memory to itself: it is the least free host.
        [memory] = [line for line in lab.virsh("hv4", "nodeinfo").splitlines() if line.startswith("Memory size:")]
        total_mb = int(memory.split()[2]) // 1024  # "Memory size:  24575444 KiB"
        self.inventory = lab.inventory_copy(
            directory, self.url, settings={"hv4": {"reserved_host_memory_mb": max(total_mb - 3072, 512)}},
            aggregates={zone: {"hosts": hosts, "metadata": {"availability_zone": zone}}
                        for zone, hosts in ZONES.items()})
        self.launched: list[str] = []
        self.run("gather.yml")

    def run(self, playbook: str, extra: dict | None = None, check: bool = False, env: dict | None = None,
            ok: bool = True) -> dict:
        args = ["-e", json.dumps(extra)] if extra else []
        output = self.lab.finish(self.lab.start_playbook(
            playbook, *args, *(["--check"] if check else []), inventory=self.inventory, env=env))
        if ok:
            assert output["rc"] == 0, failed_messages(output)
        return output

    def launch(self, name: str, count: int = 1, check: bool = False, env: dict | None = None, ok: bool = True,
               **options) -> dict:
        if not check:
            self.launched.append(name)
        output = self.run("launch.yml", {"server_name": name, "count": count, "flavor": TINY, **options}, check, env, ok)
        return task_result(output, "Launch the instances")

    def instance(self, name: str) -> dict:
        [row] = [row for row in rows(self.url, "instances") if row["name"] == name]
        return row

    def hosts_of(self, prefix: str) -> dict[str, str]:
        return {row["name"]: row["host"] for row in rows(self.url, "instances") if row["name"].startswith(prefix)}

    def set_disabled(self, host: str, disabled: bool) -> None:
        run_module(self.lab, self.inventory, "berth.fleet.hypervisor",
                   {"host": host, "state": "disabled", "reason": "test"} if disabled else {"host": host, "state": "enabled"})

    def failed_builds(self) -> dict[str, int]:
        return {row["name"]: row["failed_builds"] for row in rows(self.url, "hypervisors")}

    def clean(self) -> None:
        for name in self.launched:
            self.run("delete.yml", {"server_name": name}, ok=False)


@pytest.fixture
def lab4(four, tmp_path):
    own = Fleet(four, tmp_path)
    try:
        yield own
    finally:
        own.clean()


def zone_of(host: str) -> str:
    return next(zone for zone, hosts in ZONES.items() if host in hosts)


def test_a_drained_instance_stays_in_the_zone_it_was_launched_into_or_the_drain_says_none_fits(lab4):
    lab4.launch("web", count=2, availability_zone="az1")
    placed = lab4.hosts_of("web-")
    assert sorted(placed.values()) == ["hv1", "hv2"]
    source = placed["web-1"]
    other = next(host for host in ZONES["az1"] if host != source)
    # hv3 (az2, empty) has more room than the other az1 host (it holds web-2): only the recorded
    # zone keeps web-1 in az1.
    drained = lab4.run("drain.yml", {"drain_host": source})
    assert lab4.instance("web-1")["host"] == other
    assert "web-1" in lab4.lab.virsh(other, "list", "--name").split()
    assert "its launch's request turned down 2 not in availability zone az1" in json.dumps(drained)

    # Its zone's other host disabled: the drain refuses, naming the zone, and nothing moves.
    lab4.set_disabled(source, True)
    refused = lab4.run("drain.yml", {"drain_host": other}, ok=False)
    assert refused["rc"] != 0
    assert "cannot migrate web-1: no valid host" in json.dumps(refused)
    assert "not in availability zone az1" in json.dumps(refused)
    assert lab4.hosts_of("web-") == {"web-1": other, "web-2": other}
    lab4.set_disabled(source, False)


def test_an_anti_affinity_member_moves_to_the_one_host_that_keeps_the_policy(lab4):
    run_module(lab4.lab, lab4.inventory, "berth.fleet.server_group", {"name": "apart", "policy": "anti-affinity"})
    lab4.launch("db", count=3, server_group="apart")
    placed = lab4.hosts_of("db-")
    assert sorted(placed.values()) == ["hv1", "hv2", "hv3"]
    # hv1..hv3 have far more room than hv4, but each holds a member: the scheduler must see the
    # group to choose hv4, and the claim (which re-checks the group) accepts it.
    output = lab4.run("migrate.yml", {"instance": "db-1", "mode": "cold"})
    assert lab4.instance("db-1")["host"] == "hv4"
    assert lab4.hosts_of("db-") == {**placed, "db-1": "hv4"}
    assert "its launch's request turned down 2 anti-affinity group apart" in json.dumps(output)


def test_different_host_given_at_launch_still_holds_after_a_cold_migration(lab4):
    lab4.launch("a", ignore_hosts=["hv2", "hv3", "hv4"])
    first = lab4.instance("a-1")
    assert first["host"] == "hv1"
    # Nova's default filters leave the hints alone: the operator who lets requesters give one
    # enables its filter, for launches and moves alike (a move schedules with its own run's
    # operator settings, as Nova's with its configuration of the moment).
    filters = [*DEFAULT_FILTERS, "DifferentHostFilter"]
    lab4.launch("b", ignore_hosts=["hv3", "hv4"], scheduler_hints={"different_host": [first["uuid"]]},
                berth_enabled_filters=filters)
    assert lab4.instance("b-1")["host"] == "hv2"
    # hv3 out of the way: left are hv1 (a-1's, much free memory) and hv4 (little). Only the hint
    # recorded at launch keeps b-1 off hv1.
    lab4.set_disabled("hv3", True)
    try:
        lab4.run("migrate.yml", {"instance": "b-1", "mode": "cold", "berth_enabled_filters": filters})
    finally:
        lab4.set_disabled("hv3", False)
    assert lab4.instance("b-1")["host"] == "hv4"
    assert "b-1" in lab4.lab.virsh("hv4", "list", "--name").split()


def between(lab4: Fleet, host: str) -> dict:
    """A check-mode launch's placement with the choice held to ``host`` and hv4, which has far
    less free memory: ``host`` wins unless its failed builds weigh it down."""
    plan = lab4.launch("probe", check=True, ignore_hosts=[name for name in ("hv1", "hv2", "hv3") if name != host])
    [placement] = plan["decision"]["placements"]
    return placement


def test_a_host_that_failed_two_builds_is_weighed_down_until_one_succeeds_there(lab4):
    preferred = lab4.launch("probe", check=True)["placements"][0]["host"]
    assert preferred != "hv4"
    assert between(lab4, preferred)["host"] == preferred
    fault = hooks_env(faults=[f"{preferred}:after-define"])
    # One build fails there and lands on an alternate; a second, held to that host, fails too.
    lab4.launch("f1", env=fault)
    assert lab4.instance("f1-1")["host"] != preferred
    lab4.launch("f2", env=fault, ok=False, berth_force_hosts=[preferred])
    assert lab4.instance("f2-1")["state"] == "ERROR"
    assert lab4.failed_builds()[preferred] == 2

    assert between(lab4, preferred)["host"] == "hv4"
    assert lab4.launch("probe", check=True)["placements"][0]["host"] != preferred

    # A successful build there forgives it.
    lab4.launch("ok", berth_force_hosts=[preferred])
    assert lab4.instance("ok-1")["host"] == preferred
    assert lab4.failed_builds()[preferred] == 0
    placement = between(lab4, preferred)
    assert placement["host"] == preferred
    [part] = [weight for weight in placement["weights"] if weight["name"] == "BuildFailureWeigher"]
    assert part["raw"] == 0
