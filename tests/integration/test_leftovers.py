"""Nothing is lost when a launch dies halfway: kill a launch's whole process tree at each step of
its build (on SQLite; on PostgreSQL after its claim and after its domain is defined, see CASES),
and the tracker sync (gather.yml) past the lease leaves no claim without a live build and no
volume or domain without an instance, says what it removed, and a relaunch of the same name
succeeds; a second sync finds nothing to do.

The launch is paused at the step by the test hooks' barrier (callback_plugins/berth_test_hooks.py)
and then killed with every process it started (conftest.kill_tree), as a crash would. The ledger
is read with plain SQL and the hypervisors with virsh, not through Berth's code.
"""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest
from conftest import (
    berth_volumes,
    changed_count,
    drift,
    failed_messages,
    hooks_env,
    kill_tree,
    rows,
    wait_at_barrier,
)

pytestmark = pytest.mark.integration

TINY = {"name": "kill.tiny", "vcpus": 1, "memory_mb": 128, "root_gb": 1}
# Long enough for a loaded machine to get from the claim to the build's record of what it will
# make (which needs a lease not yet expired); the test then waits for the rest of it.
LEASE_S = 15
# The steps a launch is killed after: its claim, each volume of its build (the root disk, then
# the cloud-init seed: the launch has user data), its domain defined, its domain started.
STEPS = ["after-claim", "after-root-volume", "after-seed-volume", "after-define", "after-start"]
# A launch killed right after its claim records nothing under its lease, so the shortest lease
# proves the same there and the test waits a second for it instead of LEASE_S.
LEASE_S_AT_STEP = {"after-claim": 1}
# Every step on SQLite. The ledger's code is the same on both databases (plain SQLAlchemy; only
# ledger/database.py tells them apart: connections, locks, insert-or-skip, datetimes), so
# PostgreSQL runs the two steps that reach every kind of ledger write the cleanup makes: after
# the claim (the claim released with nothing built: no artefact rows), and after the domain is
# defined (a sync within the lease on PostgreSQL's clock leaves the build alone; after it, the
# artefact rows of both volumes and the domain are read, removed and forgotten). The steps in
# between make a subset of those artefacts; after-start's sync finishes the build with the same
# mark_active every PostgreSQL launch makes.
CASES = [*[("sqlite", step) for step in STEPS], ("postgresql", "after-claim"), ("postgresql", "after-define")]


def start_killable_launch(lab, tmp_path, inventory, name, step, extra=None):
    """A launch of ``name`` held at ``step`` of its build: returns the process and its barrier."""
    barrier = tmp_path / f"barrier-{name}"
    barrier.mkdir()
    # Never all there: each run waits until it is killed (or the timeout, if the test broke).
    env = hooks_env(barrier, step, parties=99, timeout_s=300)
    # berth_source=inventory: the launch syncs the ledger from the inventory's facts first, so a
    # fresh ledger needs no gather.yml run before it.
    request = {"name": name, "count": 1, "flavor": TINY, "user_data": "#cloud-config\nhostname: doomed\n",
               "berth_lease_seconds": LEASE_S_AT_STEP.get(step, LEASE_S), "berth_source": "inventory",
               **(extra or {})}
    return lab.start_playbook("launch.yml", "-e", json.dumps(request), inventory=inventory, env=env), barrier


def wait_for_leases(ledger_url):
    """Until every claim's lease has expired (the ledger's times are UTC)."""
    leases = [claim["lease_expires_at"] for claim in rows(ledger_url, "claims") if claim["lease_expires_at"]]
    for lease in leases:
        expires = lease if isinstance(lease, dt.datetime) else dt.datetime.fromisoformat(lease)
        now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
        time.sleep(max(0.0, (expires - now).total_seconds()) + 1)


def on_hosts(lab):
    """Every domain ({host: {uuid: (name, state)}}) and every build's volume ({host: [name]})."""
    domains = {}
    for host in lab.hosts:
        domains[host] = {}
        for name in lab.virsh(host, "list", "--all", "--name").split():
            uuid = lab.virsh(host, "domuuid", name).strip()
            domains[host][uuid] = (name, lab.virsh(host, "domstate", name).strip())
    return domains, berth_volumes(lab)


def nothing_lost(lab, ledger_url):
    """The invariants after a sync: every claim is an ACTIVE instance's on its host, without a
    lease; every domain and every build's volume on the hosts is an ACTIVE instance's there."""
    found = []
    hosts = {row["uuid"]: row["name"] for row in rows(ledger_url, "hypervisors")}
    instances = {row["uuid"]: row for row in rows(ledger_url, "instances")}
    active = {(row["host"], uuid) for uuid, row in instances.items() if row["state"] == "ACTIVE"}
    for claim in rows(ledger_url, "claims"):
        if (hosts[claim["hypervisor_uuid"]], claim["instance_uuid"]) not in active or claim["lease_expires_at"]:
            found.append(f"claim {claim['id']} on {hosts[claim['hypervisor_uuid']]} without a live build: "
                         f"{instances.get(claim['instance_uuid'])}")
    domains, volumes = on_hosts(lab)
    for host in lab.hosts:
        for uuid, (name, _state) in domains[host].items():
            if (host, uuid) not in active:
                found.append(f"domain {name} on {host} without an instance")
        for volume in volumes[host]:
            if not any(volume.startswith(f"berth-{uuid}-") for where, uuid in active if where == host):
                found.append(f"volume {volume} on {host} without an instance")
    return found


@pytest.mark.parametrize(("ledger_url", "step"), CASES, indirect=["ledger_url"],
                         ids=[f"{backend}-{step}" for backend, step in CASES])
def test_a_launch_killed_at_any_step_of_its_build_leaves_nothing_after_gather(clean_lab, tmp_path, ledger_url, step):
    lab = clean_lab
    # Running domains are all this test looks at: no guest OS boots in them.
    inventory = lab.inventory_copy(tmp_path, ledger_url, guest_os=False)
    proc, barrier = start_killable_launch(lab, tmp_path, inventory, "doomed", step)
    wait_at_barrier(proc, barrier)
    kill_tree(proc)

    [instance] = rows(ledger_url, "instances")
    uuid, host = instance["uuid"], instance["host"]
    assert instance["state"] == "BUILDING" and [c["instance_uuid"] for c in rows(ledger_url, "claims")] == [uuid]
    domains, volumes = on_hosts(lab)
    made = STEPS.index(step)
    root, seed = f"berth-{uuid}-root.qcow2", f"berth-{uuid}-seed.iso"
    # Killed where it was meant to be: what the build made so far, and nothing else.
    assert volumes[host] == sorted([root, seed][:min(made, 2)])
    assert dict(domains[host].values()) == (
        {"doomed-1": "running" if made == 4 else "shut off"} if made >= 3 else {})
    assert all(volumes[other] == [] and domains[other] == {} for other in lab.hosts if other != host)

    if step == "after-define":
        # Within the lease, a sync leaves a build alone, with every artefact there and no guest running.
        claims = rows(ledger_url, "claims")
        early = lab.finish(lab.start_playbook("gather.yml", inventory=inventory))
        assert early["rc"] == 0, failed_messages(early)
        assert on_hosts(lab) == (domains, volumes) and rows(ledger_url, "claims") == claims
        assert not [line for line in drift(early) if "doomed" in line or "orphan volume" in line], drift(early)

    wait_for_leases(ledger_url)
    late = lab.finish(lab.start_playbook("gather.yml", inventory=inventory))
    assert late["rc"] == 0, failed_messages(late)
    assert nothing_lost(lab, ledger_url) == []
    lines = drift(late)
    [instance] = rows(ledger_url, "instances")
    if step == "after-start":
        # It got as far as starting its guest: the sync finishes the build instead of destroying it.
        assert instance["state"] == "ACTIVE"
        assert any(line.startswith(f"doomed-1: build finished by this sync: its domain is running on {host}")
                   for line in lines), lines
    else:
        assert instance["state"] == "ERROR" and "lease expired" in instance["failure_reason"]
        removed = [line for line in lines if line.startswith(f"{host}: removed what a dead build left: ")]
        things = ([f"volume default/{name}" for name in volumes[host]]
                  + (["domain doomed-1"] if made >= 3 else []))
        if things:
            assert len(removed) == 1 and all(thing in removed[0] for thing in things), lines
            assert "doomed-1 is ERROR: build abandoned by" in removed[0]
        else:
            assert removed == [], lines
            assert any(f" of instance doomed-1 ({uuid}) on {host} released: " in line and line.endswith(", no domain")
                       for line in lines), lines
    # Converged: a second sync finds nothing to do, and says nothing of it.
    again = lab.finish(lab.start_playbook("gather.yml", inventory=inventory))
    assert again["rc"] == 0 and changed_count(again) == 0, drift(again)
    assert not [line for line in drift(again) if "doomed" in line or "orphan volume" in line], drift(again)

    relaunch = lab.finish(lab.start_playbook("launch.yml", "-e", json.dumps(
        {"name": "doomed", "count": 1, "flavor": TINY, "user_data": "#cloud-config\nhostname: doomed\n"}),
        inventory=inventory))
    assert relaunch["rc"] == 0, failed_messages(relaunch)
    [instance] = rows(ledger_url, "instances")
    assert instance["state"] == "ACTIVE" and nothing_lost(lab, ledger_url) == []
    assert lab.virsh(instance["host"], "domstate", instance["uuid"]).strip() == "running"


def test_leftovers_kept_for_inspection_are_removed_by_delete_and_a_relaunch_never_hides_them(clean_lab, tmp_path):
    """berth_keep_leftovers: the sync reports what dead builds left and keeps it; delete.yml of an
    ERROR instance removes it, and so does delete.yml of a relaunch that replaced one."""
    lab = clean_lab
    ledger_url = f"sqlite:///{tmp_path}/ledger.sqlite3"
    inventory = lab.inventory_copy(tmp_path, ledger_url, guest_os=False)
    started = [start_killable_launch(lab, tmp_path, inventory, name, "after-seed-volume") for name in ("kepta", "keptb")]
    for proc, barrier in started:
        wait_at_barrier(proc, barrier)
    for proc, _barrier in started:
        kill_tree(proc)
    first = {row["name"]: row for row in rows(ledger_url, "instances")}
    left = berth_volumes(lab)
    assert sum(len(names) for names in left.values()) == 4

    wait_for_leases(ledger_url)
    keep = ("-e", "berth_keep_leftovers=true")
    kept = lab.finish(lab.start_playbook("gather.yml", *keep, inventory=inventory))
    assert kept["rc"] == 0, failed_messages(kept)
    assert berth_volumes(lab) == left and rows(ledger_url, "claims") == []
    assert {row["state"] for row in rows(ledger_url, "instances")} == {"ERROR"}
    for row in first.values():
        assert any(line.startswith(f"{row['host']}: kept for inspection (berth_keep_leftovers): what a dead build "
                                   f"left: volume default/berth-{row['uuid']}-root.qcow2") for line in drift(kept))
    assert changed_count(lab.finish(lab.start_playbook("gather.yml", *keep, inventory=inventory))) == 0

    # delete.yml of the ERROR instance removes what it left, and its row.
    deleted = lab.finish(lab.start_playbook("delete.yml", "-e", "name=kepta", inventory=inventory))
    assert deleted["rc"] == 0, failed_messages(deleted)
    assert not [name for names in berth_volumes(lab).values() for name in names if first["kepta-1"]["uuid"] in name]

    # A relaunch of keptb replaces its ERROR row; what that instance left is still known.
    relaunch = lab.finish(lab.start_playbook("launch.yml", "-e", "name=keptb", "-e", json.dumps({"flavor": TINY}),
                                             inventory=inventory))
    assert relaunch["rc"] == 0, failed_messages(relaunch)
    [second] = [row for row in rows(ledger_url, "instances") if row["name"] == "keptb-1"]
    assert second["uuid"] != first["keptb-1"]["uuid"] and second["state"] == "ACTIVE"
    still = lab.finish(lab.start_playbook("gather.yml", *keep, inventory=inventory))
    assert any(f"instance keptb-1 was replaced by a relaunch, now {second['uuid']}" in line
               for line in drift(still)), drift(still)
    deleted = lab.finish(lab.start_playbook("delete.yml", "-e", "name=keptb", inventory=inventory))
    assert deleted["rc"] == 0, failed_messages(deleted)
    assert berth_volumes(lab) == {host: [] for host in lab.hosts}
    assert rows(ledger_url, "instances") == [] and rows(ledger_url, "artefacts") == []
    assert all(domains == {} for domains in on_hosts(lab)[0].values())


def test_a_build_whose_host_stops_answering_before_its_cleanup_is_not_tried_elsewhere(clean_lab, tmp_path):
    """Found by the soak (benchmarks/soak.py): a hypervisor's libvirtd went away while a launch
    built there, the failed build's cleanup could not reach it, and the launch built the instance
    again on an alternate - two domains of one instance, the first of which may run (a start whose
    answer was lost). Now the instance stays BUILDING there with its claim, nothing is built
    elsewhere, and the first sync after the lease that reaches the host settles it."""
    lab = clean_lab
    ledger_url = f"sqlite:///{tmp_path}/ledger.sqlite3"
    inventory = lab.inventory_copy(tmp_path, ledger_url, guest_os=False)
    proc, barrier = start_killable_launch(lab, tmp_path, inventory, "stranded", "after-define")
    wait_at_barrier(proc, barrier)
    [instance] = rows(ledger_url, "instances")
    host = instance["host"]
    lab.stop_daemon(host)
    try:
        (barrier / "release").touch()
        launched = lab.finish(proc)
    finally:
        lab.start_daemon(host)
    assert launched["rc"] != 0
    assert any("Not tried on another host, so that it never runs twice: it stays BUILDING on " + host in message
               for message in failed_messages(launched)), failed_messages(launched)
    [instance] = rows(ledger_url, "instances")
    assert (instance["state"], instance["host"]) == ("BUILDING", host)
    assert [(c["instance_uuid"], c["hypervisor_uuid"]) for c in rows(ledger_url, "claims")] == [
        (instance["uuid"], instance["hypervisor_uuid"])]
    domains, volumes = on_hosts(lab)
    assert domains[host] == {instance["uuid"]: ("stranded-1", "shut off")}
    assert all(volumes[other] == [] and domains[other] == {} for other in lab.hosts if other != host)

    wait_for_leases(ledger_url)
    late = lab.finish(lab.start_playbook("gather.yml", inventory=inventory))
    assert late["rc"] == 0, failed_messages(late)
    assert nothing_lost(lab, ledger_url) == []
    [instance] = rows(ledger_url, "instances")
    assert instance["state"] == "ERROR" and "lease expired" in instance["failure_reason"]
    assert any(line.startswith(f"{host}: removed what a dead build left: ") and "domain stranded-1" in line
               for line in drift(late)), drift(late)
