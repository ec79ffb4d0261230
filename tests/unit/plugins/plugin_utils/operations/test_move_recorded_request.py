"""A move schedules with the request its instance was launched with (issue 21) and the moving
run's operator settings (issue 33): random fleets, launches through the schedule operation on a
real SQLite ledger, then a move of every instance. The destination the move chooses must be the
engine's own answer for the launch's request (zone, group, hints) with the move's filters and
weighers, the source ignored and the group as it stands without the moving instance, and the
move's claim must accept it. The expectation is built from what the test launched with, not from
what the ledger recorded, so a request recorded wrong fails here; the launches weigh otherwise
than the move, so a move that took the launch's settings fails here too."""

from __future__ import annotations

import collections
import random

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError
from ansible_collections.berth.fleet.plugins.module_utils.request import Built
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import needed_host_fields, schedule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import DEFAULT_FILTERS, RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.server_group import ServerGroup
from ansible_collections.berth.fleet.plugins.plugin_utils._flavors import flavor_option
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ClaimConflict, Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import check_request
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.move import destination
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.schedule import Schedule
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

MOVE_ARGS: dict = {}
# Nova's default filters do not read the hints: an operator whose requesters give them enables
# their filters.
HINT_FILTERS = [*DEFAULT_FILTERS, "SameHostFilter", "DifferentHostFilter"]
# The moving run's operator settings: the hint filters, and the RAM weigher stacking where the
# launches' spreads (the default).
MOVE_SETTINGS = Settings(service_down_time=600, source="ledger",
                         scheduler={"enabled_filters": HINT_FILTERS, "ram_weight_multiplier": -1.0})
ZONES = ("az1", "az2", None)
FLAVORS = ("m1.tiny", "m1.small")
SCENARIOS = 40


def hypervisor(index, rng):
    name = f"hv{index}"
    zone = rng.choice(ZONES)
    return {
        "host": name, "nodename": name, "uuid": f"hv-{index}", "uri": f"qemu+ssh://{name}/system", "service_up": True,
        "disabled": False, "vcpus_total": rng.choice([4, 8]), "vcpus_used": 0,
        "total_usable_ram_mb": rng.choice([4096, 8192, 12288]), "free_ram_mb": 0, "total_usable_disk_gb": 200,
        "free_disk_mb": 0, "num_instances": 0, "num_io_ops": 0, "cpu_allocation_ratio": 2.0,
        "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
        "reserved_host_memory_mb": rng.choice([0, 512, 2048]), "reserved_host_disk_mb": 0, "domains": [],
        "supported_instances": [["x86_64", "qemu", "hvm"]],
        "availability_zone": zone, "aggregates": [],
    }


def launch_args(rng, launched, groups):
    """A random launch: a zone or none, a group or none, different_host/same_host hints on
    instances launched before."""
    given = {"flavor": rng.choice(FLAVORS), "count": rng.randint(1, 3)}
    if rng.random() < 0.5:
        given["availability_zone"] = rng.choice(("az1", "az2"))
    if groups and rng.random() < 0.5:
        given["server_group"] = rng.choice(groups)
    if launched and rng.random() < 0.4:
        hint = rng.choice(("different_host", "same_host"))
        given["scheduler_hints"] = {hint: rng.sample(launched, k=min(len(launched), rng.randint(1, 2)))}
    return given


def launch_settings(given):
    """The launching run's operator settings: the hint filters where the launch gives hints (a
    launch refuses a hint no filter reads), Nova's default filters and weighers otherwise."""
    return Settings(scheduler={"enabled_filters": HINT_FILTERS}) if given.get("scheduler_hints") else Settings()


def expected_destination(ledger, instance, given):
    """The engine's choice for the launch's own request (``given``, as the test made it) with the
    move's settings, the source ignored, the instance's group as the ledger holds it without the
    instance."""
    group = None
    if given.get("server_group"):
        [listed] = ledger.server_groups(given["server_group"])
        members = collections.Counter(claim["host"] for uuid in listed["members"] if uuid != instance["uuid"]
                                      for claim in ledger.claims(uuid))
        rules = listed["rules"] or {}
        group = ServerGroup(listed["name"], listed["policy"], rules.get("max_server_per_host", 1),
                            sorted(members), dict(sorted(members.items())))
    spec = RequestSpec(flavor=flavor_option(given["flavor"], None), count=1,
                       availability_zone=given.get("availability_zone"),
                       scheduler_hints=given.get("scheduler_hints") or {}, server_group=group,
                       ignore_hosts=[instance["host"]], enabled_filters=HINT_FILTERS,
                       weight_multipliers={"ram_weight_multiplier": -1.0}, service_down_time=600)
    table, _generations = ledger.host_table(needed_host_fields(spec), [], spec.requested_networks)
    decision = schedule(table, spec)
    return decision.placements[0].host if decision.ok else None


@pytest.mark.parametrize("seed", range(SCENARIOS))
def test_a_moves_destination_is_the_engines_choice_for_the_recorded_request(tmp_path, seed):
    rng = random.Random(seed)
    ledger = Ledger(f"sqlite:///{tmp_path}/ledger.sqlite3").open()
    try:
        ledger.sync_hypervisors([hypervisor(index, rng) for index in range(1, rng.randint(4, 7) + 1)])
        groups = []
        for number in range(rng.randint(0, 2)):
            policy = rng.choice(("anti-affinity", "affinity", "soft-anti-affinity"))
            per_host = rng.choice((None, 2)) if policy == "anti-affinity" else None
            ledger.create_server_group(f"g{number}", policy, per_host)
            groups.append(f"g{number}")
        asked = {}
        launched = []
        for number in range(rng.randint(3, 6)):
            given = launch_args(rng, launched, groups)
            settings = launch_settings(given)
            request = check_request({key: value for key, value in given.items() if key != "count"}, settings)
            names = [f"l{number}-{index}" for index in range(1, given["count"] + 1)]
            result = Schedule(request, settings, names, f"l{number}", ledger, {}, False).run()
            for placement in result["placements"]:
                # Built: the instance's request now also holds what its build made.
                ledger.mark_active(placement["uuid"], Built(seed=False).to_record())
                asked[placement["name"]] = given
                launched.append(placement["uuid"])
        assert asked, "every launch of this scenario failed: the table tests nothing"
        for name, given in sorted(asked.items()):
            [instance] = ledger.instances([name])
            assert instance["request"]["flavor"]["name"] == given["flavor"]
            expected = expected_destination(ledger, instance, given)
            try:
                target = destination(MOVE_ARGS, MOVE_SETTINGS, {}, ledger, instance)
            except BerthError as refused:
                assert expected is None, f"{name}: the move found no host ({refused}), the engine found {expected}"
                continue
            assert target["host"] == expected, f"{name} ({given}): moved to {target['host']}, engine says {expected}"
            assert target["warnings"] == []
            # The claim accepts what the scheduler chose: group and room as the move saw them.
            try:
                claim = ledger.claim_move(instance["uuid"], target["hypervisor_uuid"], "test")
            except ClaimConflict as conflict:
                pytest.fail(f"{name}: the move chose {target['host']}, which its claim refuses: {conflict}")
            ledger.release_claim(claim["id"])
    finally:
        ledger.close()


def test_an_instance_without_a_recorded_request_moves_on_its_row_with_a_warning(tmp_path):
    rng = random.Random(7)
    ledger = Ledger(f"sqlite:///{tmp_path}/ledger.sqlite3").open()
    try:
        ledger.sync_hypervisors([hypervisor(index, rng) for index in (1, 2, 3)])
        tiny = Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1)
        [row] = ledger.claim([{"name": "old-1", "host": "hv1", "hypervisor_uuid": "hv-1"}], tiny, "launch")
        ledger.mark_active(row["uuid"])
        [instance] = ledger.instances(["old-1"])
        assert instance["request"] is None
        target = destination(MOVE_ARGS, MOVE_SETTINGS, {}, ledger, instance)
        assert target["host"] in ("hv2", "hv3")
        [warning] = target["warnings"]
        assert warning.startswith("old-1: it has no recorded launch request")
        # A record this Berth cannot read (a newer Berth's) moves the same way, saying why.
        [row] = ledger.claim([{"name": "new-1", "host": "hv1", "hypervisor_uuid": "hv-1"}], tiny, "launch",
                             request={"version": 3, "flavor": tiny.to_dict()})
        ledger.mark_active(row["uuid"])
        [instance] = ledger.instances(["new-1"])
        [warning] = destination(MOVE_ARGS, MOVE_SETTINGS, {}, ledger, instance)["warnings"]
        assert warning.startswith("new-1: the recorded request (schema 3) cannot be read")
        assert "it moves with its flavor, project and image properties only" in warning
    finally:
        ledger.close()


@pytest.fixture
def zoned(tmp_path):
    """hv1 and hv2 in az1, hv3 and hv4 in az2."""
    ledger = Ledger(f"sqlite:///{tmp_path}/ledger.sqlite3").open()
    rng = random.Random(3)
    states = [hypervisor(index, rng) for index in (1, 2, 3, 4)]
    for state, zone in zip(states, ("az1", "az1", "az2", "az2")):
        state["availability_zone"] = zone
    ledger.sync_hypervisors(states)
    yield ledger
    ledger.close()


def test_a_move_says_which_recorded_constraints_turned_hosts_down(zoned):
    request = check_request({"flavor": "m1.tiny", "availability_zone": "az1"}, Settings())
    [placed] = Schedule(request, Settings(), ["web-1"], "web", zoned, {}, False).run()["placements"]
    zoned.mark_active(placed["uuid"])
    [instance] = zoned.instances(["web-1"])
    target = destination(MOVE_ARGS, MOVE_SETTINGS, {}, zoned, instance)
    assert target["host"] in ("hv1", "hv2") and target["host"] != instance["host"]
    assert "its launch's request turned down 2 not in availability zone az1" in target["why"]
    # Its zone full: the move fails saying so, rather than leaving the zone.
    zoned.set_disabled(target["host"], True, "maintenance")
    with pytest.raises(BerthError, match="cannot migrate web-1: no valid host: .*not in availability zone az1"):
        destination(MOVE_ARGS, MOVE_SETTINGS, {}, zoned, instance)


def test_a_schema_1_record_moves_with_its_request_and_without_the_filters_it_recorded(zoned):
    """Schema 1 kept the launch's scheduler settings in its record (enabled_filters, weighers...):
    the request is read from it, the settings are not, and the move's own hold."""
    tiny = flavor_option("m1.tiny", None)
    record = {
        "availability_zone": "az1", "scheduler_hints": {}, "project_id": "default", "image_properties": {},
        "server_group": None, "flavor": tiny.to_dict(), "max_attempts": 3,
        # The launch ran without the zone's filter; a move that took this would leave the zone.
        "enabled_filters": ["ComputeFilter", "RamFilter"], "weighers": ["RAMWeigher"],
        "build": {"metadata": {}, "networks": [], "boot": {}, "guest": {}, "seed": False,
                  "local_disks": True, "domain_type": "", "cpu": None}}
    [row] = zoned.claim([{"name": "web-1", "host": "hv1", "hypervisor_uuid": "hv-1"}], tiny, "launch", request=record)
    zoned.mark_active(row["uuid"])
    [instance] = zoned.instances(["web-1"])
    target = destination(MOVE_ARGS, MOVE_SETTINGS, {}, zoned, instance)
    assert target["host"] == "hv2" and target["warnings"] == []
    assert "its launch's request turned down 2 not in availability zone az1" in target["why"]
    # The move's filters without the zone's: the recorded zone no longer holds, whatever the
    # record's filters said.
    anywhere = Settings(service_down_time=600, scheduler={"enabled_filters": ["ComputeFilter", "RamFilter"]})
    assert "availability zone" not in destination(MOVE_ARGS, anywhere, {}, zoned, instance)["why"]


# ---- destinations worked out by hand ------------------------------------------------------------
# The cases above hold the move to the engine's own answer; these hold it to an answer reasoned out
# here. Every host has 8 vCPUs, 200 GB of disk and nothing reserved, so that only its memory and
# what the request recorded tell hosts apart. A launch spreads (Nova's default RAMWeigher: the most
# free memory first); the move stacks (MOVE_SETTINGS: the least free memory first), so that where a
# recorded constraint did not hold, the move would go to the host with the least memory.

def by_hand(tmp_path, *hosts):
    """A ledger over ``hosts``, each (name, memory_mb, zone)."""
    ledger = Ledger(f"sqlite:///{tmp_path}/ledger.sqlite3").open()
    states = []
    for index, (name, memory_mb, zone) in enumerate(hosts, start=1):
        state = hypervisor(index, random.Random(0))
        state.update(host=name, nodename=name, uuid=f"hv-{index}", uri=f"qemu+ssh://{name}/system", vcpus_total=8,
                     total_usable_ram_mb=memory_mb, reserved_host_memory_mb=0, availability_zone=zone)
        states.append(state)
    ledger.sync_hypervisors(states)
    return ledger


def launched(ledger, name, given, settings=None):
    """``name``-1 launched with ``given`` (and the launching run's ``settings``): its ledger row."""
    settings = settings or launch_settings(given)
    request = check_request(given, settings)
    [placed] = Schedule(request, settings, [f"{name}-1"], name, ledger, {}, False).run()["placements"]
    ledger.mark_active(placed["uuid"], Built(seed=False).to_record())
    [instance] = ledger.instances([f"{name}-1"])
    return instance


def moved_to(ledger, instance):
    target = destination(MOVE_ARGS, MOVE_SETTINGS, {}, ledger, instance)
    assert target["warnings"] == []
    return target["host"]


def test_by_hand_without_constraints_the_move_weighs_with_its_own_settings(tmp_path):
    ledger = by_hand(tmp_path, ("hv1", 16384, None), ("hv2", 4096, None), ("hv3", 8192, None))
    try:
        web = launched(ledger, "web", {"flavor": "m1.tiny"})
        # The launch spreads: hv1 has the most free memory (16384 MB).
        assert web["host"] == "hv1"
        # The move stacks, its source left out: hv2 (4096 MB free) before hv3 (8192).
        assert moved_to(ledger, web) == "hv2"
    finally:
        ledger.close()


def test_by_hand_the_recorded_zone_keeps_the_move_in_it(tmp_path):
    ledger = by_hand(tmp_path, ("hv1", 2048, "az1"), ("hv2", 16384, "az2"), ("hv3", 8192, "az2"), ("hv4", 4096, "az1"))
    try:
        web = launched(ledger, "web", {"flavor": "m1.tiny", "availability_zone": "az2"})
        # In az2, the launch spreads onto hv2 (16384 MB free against hv3's 8192).
        assert web["host"] == "hv2"
        # Stacking alone would pick hv1 (2048 MB), then hv4: both in az1. Left in az2 without its
        # source: hv3.
        assert moved_to(ledger, web) == "hv3"
    finally:
        ledger.close()


def test_by_hand_the_recorded_anti_affinity_group_keeps_its_members_apart(tmp_path):
    ledger = by_hand(tmp_path, ("hv1", 16384, None), ("hv2", 2048, None), ("hv3", 8192, None), ("hv4", 12288, None))
    try:
        ledger.create_server_group("db", "anti-affinity")
        # Each member where the operator forced it: db on hv1, its peer on hv2.
        db = launched(ledger, "db", {"flavor": "m1.tiny", "server_group": "db"}, Settings(force_hosts=("hv1",)))
        peer = launched(ledger, "peer", {"flavor": "m1.tiny", "server_group": "db"}, Settings(force_hosts=("hv2",)))
        assert (db["host"], peer["host"]) == ("hv1", "hv2")
        # Stacking alone would pick hv2 (2048 MB, 1536 free now), which holds the peer: the group
        # turns it down, and the next least free is hv3 (8192 MB) before hv4 (12288).
        assert moved_to(ledger, db) == "hv3"
        # The peer's move: hv1 holds db, so hv3 again. (Its launch's forced host, an operator's
        # setting, is not recorded: forced, the move would have had nowhere but its own host.)
        assert moved_to(ledger, peer) == "hv3"
    finally:
        ledger.close()


def test_by_hand_a_recorded_different_host_hint_keeps_the_move_off_that_host(tmp_path):
    ledger = by_hand(tmp_path, ("hv1", 16384, None), ("hv2", 2048, None), ("hv3", 8192, None))
    try:
        other = launched(ledger, "other", {"flavor": "m1.tiny"}, Settings(force_hosts=("hv2",)))
        web = launched(ledger, "web", {"flavor": "m1.tiny", "scheduler_hints": {"different_host": [other["uuid"]]}})
        # The launch spreads onto hv1 (16384 MB), hv2 being other's.
        assert (other["host"], web["host"]) == ("hv2", "hv1")
        # Stacking alone would pick hv2 (the least free memory); the hint turns it down: hv3.
        assert moved_to(ledger, web) == "hv3"
    finally:
        ledger.close()


def test_by_hand_a_recorded_same_host_hint_leaves_a_move_nowhere_to_go(tmp_path):
    ledger = by_hand(tmp_path, ("hv1", 16384, None), ("hv2", 2048, None), ("hv3", 8192, None))
    try:
        other = launched(ledger, "other", {"flavor": "m1.tiny"})
        web = launched(ledger, "web", {"flavor": "m1.tiny", "scheduler_hints": {"same_host": [other["uuid"]]}})
        # Both on hv1: the launch spreads onto it, and same_host keeps web with other.
        assert (other["host"], web["host"]) == ("hv1", "hv1")
        # The only host the hint allows is the source, which a move leaves out.
        with pytest.raises(BerthError, match="cannot migrate web-1: no valid host"):
            destination(MOVE_ARGS, MOVE_SETTINGS, {}, ledger, web)
    finally:
        ledger.close()
