"""Evacuation (operations/evacuate.py) and fencing (operations/fence.py) through fake hypervisors
(fake_hypervisor.py) synced by the real tracker sync into a real ledger: refused unless the host is
down and fenced, saying why; the plan in check mode; every instance rebuilt elsewhere from its
recorded request, its group's policy held, the claims following it; an instance no host can take
ERROR on the old host; two evacuations at once rebuilding an instance once (SQLite and
PostgreSQL); the sync that reaches the old host again removing what the evacuated instances left
there and clearing the fencing; the fence command's success, failure and argv. The same through
real libvirt and ansible-playbook: tests/integration/test_evacuate.py."""

from __future__ import annotations

import datetime as dt
import json
import stat
import threading
import uuid as uuidlib
import xml.etree.ElementTree as ET

import pytest
from fake_hypervisor import FakeHypervisor, connect_to, domain_xml
from sqlalchemy import select, update

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import Built, Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import (
    nvram_volume_name,
    root_volume_name,
    seed_volume_name,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import BEFORE_CLAIM, Hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ACTIVE, ERROR, Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import claims, hypervisors
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import volumes as volumes_table
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.evacuate import (
    EVACUATED,
    FAILED,
    TAKEN,
    WOULD_EVACUATE,
    Evacuate,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.fence import fence_argv
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.sync import Sync, SyncRequest, Target
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

TINY = Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1)
HUGE = Flavor(name="huge", vcpus=2, memory_mb=40000, root_gb=1)
SYNC_SETTINGS = {"storage_pool": "default", "settings": {}, "aggregates": [], "availability_zone": "nova",
                 "keepalive_interval": 5, "keepalive_count": 3, "timeout": 5.0}
ARGS = {"host": "hv2", "fenced": False, "fenced_by": None, "timeout": 30, "template": None}


def hv_uuid(host):
    """The host UUID FakeHypervisor reports."""
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, host))


def sync(ledger, *hvs):
    targets = tuple(Target.from_hostvars(hv.host, {"berth_libvirt_uri": f"qemu+ssh://{hv.host}/system",
                                                   "berth_hypervisor": SYNC_SETTINGS}) for hv in hvs)
    return Sync(SyncRequest(targets=targets), ledger, connect_to(*hvs)).run()


def launch(ledger, hv, name, flavor=TINY, group=None):
    """``name`` ACTIVE on ``hv`` as a launch leaves it: its recorded request and build, its domain
    running there with its root volume."""
    request = Request(flavor=flavor, domain_type="qemu", server_group=group)
    [row] = ledger.claim([{"name": name, "host": hv.host, "hypervisor_uuid": hv_uuid(hv.host)}], flavor, "launch",
                         server_group=group, request=request.to_record())
    ledger.mark_active(row["uuid"], Built(seed=False).to_record())
    hv.add_volume(root_volume_name(row["uuid"]), capacity_mb=1024, data=b"the guest's disk")
    hv.add_domain(domain_xml(name, row["uuid"], disks=(root_volume_name(row["uuid"]),)))
    return row["uuid"]


def go_down(ledger, hv, seconds_ago=3600):
    """``hv`` stops answering: a sync marks it down, and its last sync is ``seconds_ago`` old."""
    hv.unreachable = "connection refused"
    ledger.tracker_sync([{"host": hv.host, "service_up": False, "down_reason": "connection refused"}])
    with ledger.engine.begin() as db:
        db.execute(update(hypervisors).where(hypervisors.c.uuid == hv_uuid(hv.host)).values(
            synced_at=dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(seconds=seconds_ago)))


@pytest.fixture
def fleet(ledger):
    """hv1, hv2, hv3 synced; on hv2: web-b (anti-affinity group web, whose web-a is on hv1), db-1,
    cache-1; hv2 then down for an hour."""
    hv1, hv2, hv3 = FakeHypervisor("hv1"), FakeHypervisor("hv2", memory_mb=65536), FakeHypervisor("hv3")
    sync(ledger, hv1, hv2, hv3)
    ledger.create_server_group("web", "anti-affinity")
    launch(ledger, hv1, "web-a", group="web")
    uuids = {name: launch(ledger, hv2, name, group="web" if name == "web-b" else None)
             for name in ("web-b", "db-1", "cache-1")}
    go_down(ledger, hv2)
    return ledger, (hv1, hv2, hv3), uuids


def evacuate(ledger, hvs, check_mode=False, settings=None, hooks=None, **args):
    return Evacuate({**ARGS, **args}, settings or Settings(), ledger, {}, check_mode,
                    **({"hooks": hooks} if hooks else {}), connect=connect_to(*hvs)).run()


def hosts_of(ledger):
    return {row["name"]: (row["host"], row["state"]) for row in ledger.instances()}


def claimed_on(ledger):
    """{instance name: [hosts it holds claims on]}."""
    names = {row["uuid"]: row["name"] for row in ledger.instances()}
    held = {}
    for claim in ledger.claims():
        held.setdefault(names[claim["instance_uuid"]], []).append(claim["host"])
    return held


def fenced(ledger, host="hv2"):
    return next(row for row in ledger.hypervisors() if row["host"] == host)["fenced"]


# ---- refusals ------------------------------------------------------------------------------------

def test_a_host_that_is_not_down_is_refused_saying_when_it_would_count_as_down(fleet):
    ledger, hvs, _uuids = fleet
    with pytest.raises(BerthError, match=r"hv1 is not down: its last sync was \d+ s ago .* its sync status is up; "
                                         r"a host counts as down once its last sync is older than service_down_time "
                                         r"\(600 s\)"):
        evacuate(ledger, hvs, host="hv1", fenced=True)
    assert fenced(ledger, "hv1") is None


def test_a_host_down_for_less_than_service_down_time_is_refused(ledger):
    hv1, hv2 = FakeHypervisor("hv1"), FakeHypervisor("hv2")
    sync(ledger, hv1, hv2)
    go_down(ledger, hv2, seconds_ago=60)
    with pytest.raises(BerthError, match=r"hv2 is not down: .* its sync status is down \(connection refused\)"):
        evacuate(ledger, (hv1, hv2), fenced=True)


def test_an_unknown_host_is_refused_naming_the_known_ones(fleet):
    ledger, hvs, _uuids = fleet
    with pytest.raises(InputError, match=r"no hypervisor 'hv9' .* \(known: hv1, hv2, hv3\)"):
        evacuate(ledger, hvs, host="hv9", fenced=True)


def test_a_down_host_that_is_not_fenced_is_refused_saying_what_would_fence_it(fleet):
    ledger, hvs, _uuids = fleet
    before = hosts_of(ledger), claimed_on(ledger)
    with pytest.raises(BerthError, match=r"hv2 is not fenced: nothing says it cannot still run its instances, which "
                                         r"would then run twice \(split brain\).* -e fenced=true, or set "
                                         r"berth_fence_command"):
        evacuate(ledger, hvs)
    assert (hosts_of(ledger), claimed_on(ledger)) == before and fenced(ledger) is None


# ---- the plan, the evacuation, the failures ---------------------------------------------------------

def test_check_mode_prints_the_plan_and_changes_nothing(fleet):
    ledger, (hv1, hv2, hv3), _uuids = fleet
    before = hosts_of(ledger), claimed_on(ledger), hv1.snapshot(), hv3.snapshot()
    plan = evacuate(ledger, (hv1, hv2, hv3), check_mode=True, fenced=True, fenced_by="alice")
    assert plan["fencing"] == {"how": "would record the operator's confirmation that hv2 is fenced, by alice",
                               "fenced": None}
    assert [(result["name"], result["outcome"]) for result in plan["results"]] == [
        ("cache-1", WOULD_EVACUATE), ("db-1", WOULD_EVACUATE), ("web-b", WOULD_EVACUATE)]
    web_b = plan["results"][2]
    # web-a is on hv1: the anti-affinity group leaves hv3 only.
    assert web_b["to_host"] == "hv3"
    assert web_b["disks"] == ("made anew empty (it was launched without an image): the data of its root disk on hv2 is lost (pool default "
                              "is not in berth_shared_pools)")
    assert plan["report"][2].startswith("web-b: would evacuate to hv3 (chosen by the scheduler")
    assert (hosts_of(ledger), claimed_on(ledger), hv1.snapshot(), hv3.snapshot()) == before
    assert fenced(ledger) is None


def test_every_instance_is_rebuilt_elsewhere_its_group_held_and_its_claim_moved(fleet):
    ledger, (hv1, hv2, hv3), uuids = fleet
    done = evacuate(ledger, (hv1, hv2, hv3), fenced=True, fenced_by="alice")
    assert not done.get("failed") and done["changed"]
    assert done["fencing"]["fenced"]["fenced_by"] == "alice" and done["fencing"]["fenced"]["method"] == "confirmed"
    assert fenced(ledger)["fenced_by"] == "alice"
    assert [result["outcome"] for result in done["results"]] == [EVACUATED] * 3
    placed = hosts_of(ledger)
    assert placed["web-b"] == ("hv3", ACTIVE)  # web-a holds hv1
    assert {placed[name][0] for name in ("db-1", "cache-1")} <= {"hv1", "hv3"}
    assert all(state == ACTIVE for _host, state in placed.values())
    # One claim each, where it runs; the domain runs there, defined anew from its request.
    assert claimed_on(ledger) == {name: [host] for name, (host, _state) in placed.items()}
    for name, uuid in uuids.items():
        where = {"hv1": hv1, "hv3": hv3}[placed[name][0]]
        assert where.domain_state(uuid) == "running" and root_volume_name(uuid) in where.volume_names_of()
        assert "<name>" + name + "</name>" in where.domain_xml(uuid)
    # hv2 does not answer: nothing there was touched.
    assert set(hv2.domains) == set(uuids.values())
    # The same run again has nothing left to evacuate.
    again = evacuate(ledger, (hv1, hv2, hv3), fenced=True)
    assert again["results"] == [] and again["msg"].endswith("no instance to evacuate")


def test_an_instance_made_anew_from_its_image_gets_its_seed_again_with_its_user_data(ledger):
    # Not in the recorded request, which instance_info lists: kept apart, and read only here.
    hv1, hv2 = FakeHypervisor("hv1"), FakeHypervisor("hv2")
    sync(ledger, hv1, hv2)
    request = Request(flavor=TINY, domain_type="qemu", user_data="#cloud-config\nrun: secret-marker-42\n")
    [row] = ledger.claim([{"name": "app-1", "host": "hv2", "hypervisor_uuid": hv_uuid("hv2")}], TINY, "launch",
                         request=request.to_record(), user_data=request.user_data)
    ledger.mark_active(row["uuid"], Built(seed=True).to_record())
    listed = json.dumps([ledger.instances(), ledger.ha_instances(), ledger.inventory_instances([ACTIVE])],
                        default=str)
    assert "secret-marker-42" not in listed and "user_data" not in listed
    go_down(ledger, hv2)
    done = evacuate(ledger, (hv1, hv2), fenced=True)
    assert [result["outcome"] for result in done["results"]] == [EVACUATED]
    seed = hv1.pools["default"]["volumes"][seed_volume_name(row["uuid"])]["data"]
    assert b"run: secret-marker-42" in seed
    assert "secret-marker-42" not in json.dumps(done, default=str)
    assert ledger.user_data(row["uuid"]) == request.user_data
    # Gone with its instance.
    assert ledger.delete_instance(row["uuid"])
    assert ledger.user_data(row["uuid"]) is None


def test_user_data_read_back_from_the_ledger_is_held_to_the_launch_s_limit(ledger):
    hv1 = FakeHypervisor("hv1")
    sync(ledger, hv1)
    [row] = ledger.claim([{"name": "big-1", "host": "hv1", "hypervisor_uuid": hv_uuid("hv1")}], TINY, "launch",
                         user_data="x" * (64 * 1024 + 1))
    with pytest.raises(InputError, match="user_data"):
        ledger.user_data(row["uuid"])
    assert ledger.user_data("no-such-uuid") is None


def test_an_instance_no_host_can_take_is_error_on_the_old_host_and_keeps_its_claim_there(fleet):
    ledger, (hv1, hv2, hv3), _uuids = fleet
    hv2.unreachable = None
    huge = launch(ledger, hv2, "big-1", flavor=HUGE)
    go_down(ledger, hv2)
    # The plan says so, and does not fail: the others can go.
    plan = evacuate(ledger, (hv1, hv2, hv3), check_mode=True, fenced=True)
    assert not plan.get("failed") and plan["warnings"] == [
        "1 of 4 instance(s) of hv2 would not be evacuated (ERROR, left on hv2)"]
    assert any(line.startswith("big-1: ERROR, stays on hv2: no host can take it") for line in plan["report"])
    assert hosts_of(ledger)["big-1"] == ("hv2", ACTIVE)
    done = evacuate(ledger, (hv1, hv2, hv3), fenced=True)
    assert done["failed"] and done["msg"].startswith("1 of 4 instance(s) of hv2 could not be evacuated")
    [big] = [result for result in done["results"] if result["name"] == "big-1"]
    assert big["outcome"] == FAILED and big["why"].startswith("no host can take it: no valid host: 0/3 hosts are available")
    [row] = ledger.instances(["big-1"])
    assert (row["host"], row["state"]) == ("hv2", ERROR) and row["failure_reason"].startswith("evacuation: no host")
    assert claimed_on(ledger)["big-1"] == ["hv2"] and hv2.domain_state(huge) == "running"
    # The others went all the same.
    assert sorted(result["outcome"] for result in done["results"]) == [FAILED, EVACUATED, EVACUATED, EVACUATED]


class Killed(BaseException):
    """The evacuating process dies (SIGKILL): nothing after this point runs."""


def expire_leases(ledger):
    with ledger.engine.begin() as db:
        db.execute(update(claims).where(claims.c.lease_expires_at.is_not(None)).values(
            lease_expires_at=dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(seconds=1)))


@pytest.mark.parametrize("started", [True, False])
def test_an_evacuation_that_dies_before_its_last_word_is_settled_by_the_next_sync(fleet, monkeypatch, started):
    ledger, (hv1, hv2, hv3), uuids = fleet
    dying = ledger.finish_evacuation if started else ledger.claim_evacuation

    def die(*args, **kwargs):
        if not started:
            dying(*args, **kwargs)  # claimed, then dead before the rebuild
        raise Killed()

    monkeypatch.setattr(ledger, "finish_evacuation" if started else "claim_evacuation", die)
    with pytest.raises(Killed):
        evacuate(ledger, (hv1, hv2, hv3), fenced=True)
    monkeypatch.undo()
    [first] = sorted(uuids, key=lambda name: name)[:1]  # evacuations go by name: cache-1 first
    # Two claims: the old host's and the destination's, with its lease.
    [destination] = [host for host in claimed_on(ledger)[first] if host != "hv2"]
    assert sorted(claimed_on(ledger)[first]) == sorted(["hv2", destination])
    where = {"hv1": hv1, "hv3": hv3}[destination]
    expire_leases(ledger)
    synced = sync(ledger, hv1, hv2, hv3)
    if started:
        # The domain runs there and hv2 is fenced: the sync finishes it.
        assert where.domain_state(uuids[first]) == "running"
        assert hosts_of(ledger)[first] == (destination, ACTIVE) and claimed_on(ledger)[first] == [destination]
        assert any(f"{first}: evacuation finished by this sync" in line for line in synced["drift"]), synced["drift"]
    else:
        # Nothing made there: the claim is given back, and the evacuation can run again.
        assert hosts_of(ledger)[first][0] == "hv2" and claimed_on(ledger)[first] == ["hv2"]
        assert any("move abandoned" in line or "released" in line for line in synced["drift"]), synced["drift"]
    again = evacuate(ledger, (hv1, hv2, hv3), fenced=True)
    assert not again.get("failed"), again["msg"]
    placed = hosts_of(ledger)
    assert all(host != "hv2" and state == ACTIVE for host, state in placed.values())
    assert claimed_on(ledger) == {name: [host] for name, (host, _state) in placed.items()}


def test_a_rebuild_that_fails_gives_the_destination_back_and_leaves_the_instance_error_on_the_old_host(fleet):
    from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError

    ledger, (hv1, hv2, hv3), uuids = fleet
    hv3.faults["define"] = HypervisorError("hv3", "internal error: injected")
    done = evacuate(ledger, (hv1, hv2, hv3), fenced=True)
    [web_b] = [result for result in done["results"] if result["name"] == "web-b"]
    assert web_b["outcome"] == FAILED and web_b["why"] == "rebuild failed: hv3: internal error: injected"
    assert hosts_of(ledger)["web-b"] == ("hv2", ERROR) and claimed_on(ledger)["web-b"] == ["hv2"]
    assert hv3.domain_state(uuids["web-b"]) is None and root_volume_name(uuids["web-b"]) not in hv3.volume_names_of()


def test_disks_on_a_shared_pool_are_kept_and_the_domain_defined_on_them(fleet):
    ledger, (hv1, hv2, hv3), uuids = fleet
    # What a shared pool means: the destinations see the volumes hv2's instances use.
    for uuid in uuids.values():
        for hv in (hv1, hv3):
            hv.add_volume(root_volume_name(uuid), capacity_mb=1024, data=b"the guest's disk")
    done = evacuate(ledger, (hv1, hv2, hv3), settings=Settings(shared_pools=("default",)), fenced=True)
    assert [result["outcome"] for result in done["results"]] == [EVACUATED] * 3
    assert all(result["disks"] == "kept: pool default is shared (berth_shared_pools)" for result in done["results"])
    web_b = uuids["web-b"]
    assert hv3.domain_state(web_b) == "running" and hv3.pools["default"]["volumes"][root_volume_name(web_b)][
        "data"] == b"the guest's disk"
    # hv2 comes back: the sync removes the old domains, never the shared disks or UEFI variables.
    for uuid in uuids.values():
        hv2.add_volume(nvram_volume_name(uuid), capacity_mb=1, fmt="raw", data=b"uefi vars")
    hv2.unreachable = None
    synced = sync(ledger, hv1, hv2, hv3)
    assert sum(line.startswith("hv2: evacuated, removed") for line in synced["drift"]) == 3, synced["drift"]
    assert not set(hv2.domains) & set(uuids.values())
    assert {root_volume_name(web_b), nvram_volume_name(web_b)} <= set(hv2.volume_names_of())


# ---- two runs at once ------------------------------------------------------------------------------

class Barrier(Hooks):
    """Holds both runs once each has decided where its instance goes, before either claims."""

    def __init__(self) -> None:
        self.barrier = threading.Barrier(2, timeout=30)

    def reached(self, point, host=None, instance=None):
        if point == BEFORE_CLAIM:
            self.barrier.wait()


def test_two_evacuations_at_once_rebuild_each_instance_once(ledger_url):
    setup = Ledger(ledger_url).open(create=True)
    hv1, hv2, hv3 = FakeHypervisor("hv1"), FakeHypervisor("hv2"), FakeHypervisor("hv3")
    try:
        sync(setup, hv1, hv2, hv3)
        uuid = launch(setup, hv2, "db-1")
        go_down(setup, hv2)
    finally:
        setup.close()
    hooks, results, errors = Barrier(), [], []

    def run():
        own = Ledger(ledger_url).open()
        try:
            results.append(evacuate(own, (hv1, hv2, hv3), hooks=hooks, fenced=True))
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            own.close()

    threads = [threading.Thread(target=run) for _run in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    outcomes = sorted(result["results"][0]["outcome"] for result in results)
    assert outcomes == sorted([EVACUATED, TAKEN])
    check = Ledger(ledger_url).open()
    try:
        [row] = check.instances(["db-1"])
        assert row["state"] == ACTIVE and claimed_on(check) == {"db-1": [row["host"]]}
    finally:
        check.close()
    running = [hv.host for hv in (hv1, hv3) if hv.domain_state(uuid) == "running"]
    assert running == [row["host"]]


# ---- the old host comes back -----------------------------------------------------------------------

def test_the_sync_that_reaches_the_old_host_removes_what_evacuated_instances_left_and_clears_the_fencing(fleet):
    ledger, (hv1, hv2, hv3), uuids = fleet
    evacuate(ledger, (hv1, hv2, hv3), fenced=True)
    # hv2 comes back with its guests still running, as a host cut off from the network would.
    hv2.unreachable = None
    assert {hv2.domain_state(uuid) for uuid in uuids.values()} == {"running"}
    result = sync(ledger, hv1, hv2, hv3)
    assert hv2.domains == {} and hv2.volume_names_of() == set()
    lines = [line for line in result["findings"]["hv2"] if "evacuated, removed" in line]
    assert len(lines) == 3 and any(line.startswith("hv2: evacuated, removed: domain web-b, volume default/")
                                   and "(web-b was evacuated to hv3 (ACTIVE))" in line for line in lines), lines
    assert "hv2: answers again: no longer fenced" in " ".join(result["findings"]["hv2"])
    assert fenced(ledger) is None and not ledger.artefacts()
    # The instances still run where they went; the next sync finds nothing more to remove.
    assert all(hv1.domain_state(uuid) == "running" or hv3.domain_state(uuid) == "running" for uuid in uuids.values())
    assert not sync(ledger, hv1, hv2, hv3)["report"]["leftovers"]


# ---- the fence command -------------------------------------------------------------------------------

def script(tmp_path, body):
    path = tmp_path / "fence"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_fence_command_that_succeeds_fences_the_host_and_its_output_is_recorded(fleet, tmp_path):
    ledger, hvs, _uuids = fleet
    command = script(tmp_path, 'echo "powered off $1 with $2"\n')
    settings = Settings(fence_command=(command, "{hypervisor}", "--hard; rm -rf /", "--password=s3cret"))
    plan = evacuate(ledger, hvs, check_mode=True, settings=settings)
    # Named by its program: an argument may be a BMC's password, never printed.
    assert plan["fencing"]["how"] == f"would run the fence command ({command} for hv2) (not run in check mode)"
    assert not fenced(ledger)
    done = evacuate(ledger, hvs, settings=settings)
    record = fenced(ledger)
    # One argument each, no shell: the ";" is text.
    assert (record["method"], record["output"]) == ("fence_command", "powered off hv2 with --hard; rm -rf /\\x0a")
    assert [result["outcome"] for result in done["results"]] == [EVACUATED] * 3
    assert "s3cret" not in json.dumps(done, default=str)


def test_a_fence_command_that_fails_refuses_the_evacuation_with_its_output(fleet, tmp_path):
    ledger, hvs, _uuids = fleet
    settings = Settings(fence_command=(script(tmp_path, 'echo "BMC of $1 unreachable"\nexit 3\n'), "{hypervisor}"))
    with pytest.raises(BerthError, match=r"hv2 is not fenced: the fence command .* failed: exited 3; printed: BMC of "
                                         r"hv2 unreachable"):
        evacuate(ledger, hvs, settings=settings)
    assert fenced(ledger) is None and hosts_of(ledger)["db-1"] == ("hv2", ACTIVE)


@pytest.mark.parametrize(("command", "host", "error", "message"), [
    ((), "hv2", InputError, "fence_command must be a list of non-empty strings"),
    (("/usr/bin/{hypervisor}-off",), "hv2", InputError, "may not be chosen by the host's name"),
    (("/usr/bin/fence", "{hypervisor}"), "-rf", BerthError, "is not given to a fence command"),
], ids=["empty", "host-names-the-program", "host-name-like-an-option"])
def test_the_fence_command_s_argv_is_checked(command, host, error, message):
    with pytest.raises(error, match=message):
        fence_argv(command, host)


class ComesBack(Hooks):
    """The evacuated host answers a sync after the first instance's destination was decided."""

    def __init__(self, ledger, hvs) -> None:
        self.ledger, self.hvs, self.done = ledger, hvs, False

    def reached(self, point, host=None, instance=None):
        if point == BEFORE_CLAIM and not self.done:
            self.done = True
            self.hvs[1].unreachable = None
            sync(self.ledger, *self.hvs)


def test_a_host_that_answers_a_sync_during_the_evacuation_is_no_longer_fenced_and_nothing_more_is_claimed(fleet):
    ledger, hvs, _uuids = fleet
    before = hosts_of(ledger), claimed_on(ledger)
    with pytest.raises(BerthError, match=r"hv2 is no longer fenced: a sync reached it again, so it may run cache-1; "
                                         r"nothing more is evacuated from it"):
        evacuate(ledger, hvs, hooks=ComesBack(ledger, hvs), fenced=True)
    assert (hosts_of(ledger), claimed_on(ledger)) == before and fenced(ledger) is None


def test_fenced_by_is_bounded_by_what_the_ledger_keeps(fleet):
    ledger, hvs, _uuids = fleet
    with pytest.raises(InputError, match="fenced_by must be at most 255 characters, got 256"):
        evacuate(ledger, hvs, fenced=True, fenced_by="x" * 256)


def test_a_shared_pool_volume_is_attached_to_the_evacuated_instance_and_a_local_one_stays_detached(fleet):
    ledger, (hv1, hv2, hv3), uuids = fleet
    shared = {}
    for hv in (hv1, hv2, hv3):
        hv.pools["nfs"] = {"path": "/mnt/nfs", "volumes": shared}
    hv2.add_volume("berth-volume-data-s.qcow2", pool="nfs", capacity_mb=2048, data=b"kept")
    hv2.add_volume("berth-volume-data-l.qcow2", capacity_mb=2048, data=b"lost with hv2")
    # Recorded as berth.fleet.volume leaves them (hv2 is down: made through the ledger alone).
    ledger.create_volume("data-s", "hv2", "nfs", 2, "test", shared=True)
    ledger.create_volume("data-l", "hv2", "default", 2, "test")
    ledger.attach_volume("data-s", "db-1", ["vde", "vdf"])
    ledger.attach_volume("data-l", "db-1", ["vde", "vdf"])
    # As a launch's volume with delete_on_termination: left behind detached, the flag goes with
    # the attachment, so deleting db-1 later never deletes it.
    with ledger.engine.begin() as db:
        db.execute(update(volumes_table).where(volumes_table.c.name == "data-l").values(delete_on_termination=True))
    done = evacuate(ledger, (hv1, hv2, hv3), fenced=True)
    assert not done.get("failed"), done["msg"]
    host = hosts_of(ledger)["db-1"][0]
    where = {"hv1": hv1, "hv3": hv3}[host]
    disks = {disk.find("target").get("dev"): disk.find("source").get("file")
             for disk in ET.fromstring(where.domain_xml(uuids["db-1"])).findall("devices/disk")}
    assert disks["vde"] == "/mnt/nfs/berth-volume-data-s.qcow2" and "vdf" not in disks
    volumes = {volume["name"]: volume for volume in ledger.volumes()}
    assert (volumes["data-s"]["host"], volumes["data-s"]["instance"], volumes["data-s"]["target"]) == (host, "db-1", "vde")
    assert (volumes["data-l"]["host"], volumes["data-l"]["instance"], volumes["data-l"]["delete_on_termination"]) == (
        "hv2", None, False)
    # The shared one is charged to no host; the local one still to hv2, where its file is.
    with ledger.engine.begin() as db:
        used = dict(db.execute(select(hypervisors.c.name, hypervisors.c.disk_mb_used)).all())
    claimed = {hv.host: sum(1024 for name, (on, _state) in hosts_of(ledger).items() if on == hv.host)
               for hv in (hv1, hv2, hv3)}
    assert used == {"hv1": claimed["hv1"], "hv2": claimed["hv2"] + 2048, "hv3": claimed["hv3"]}
