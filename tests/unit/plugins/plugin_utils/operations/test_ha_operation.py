"""The scheduled HA run (operations/ha.py) through fake hypervisors and a real ledger: the HA
instances of two down, fenced hosts restarted highest priority first across both; a down host
that is not fenced reported and untouched; the second run changing nothing; two runs at once
rebuilding each instance once (SQLite and PostgreSQL)."""

from __future__ import annotations

import threading

from fake_hypervisor import FakeHypervisor, connect_to
from test_evacuate_operation import Barrier, claimed_on, go_down, hosts_of, launch, sync

from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ACTIVE, FENCE_CONFIRMED, Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.evacuate import EVACUATED, TAKEN
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.ha import HaRestart
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

ARGS = {"timeout": 30, "template": None}


def ha_run(ledger, hvs, hooks=None, check_mode=False):
    return HaRestart(ARGS, Settings(), ledger, {}, check_mode, **({"hooks": hooks} if hooks else {}),
                     connect=connect_to(*hvs)).run()


def ha(ledger, name, priority):
    ledger.set_instance_ha(name, True, priority)


def test_the_ha_instances_of_two_down_hosts_restart_highest_priority_first_across_both(ledger):
    hvs = [FakeHypervisor(f"hv{index}", memory_mb=65536) for index in (1, 2, 3, 4)]
    sync(ledger, *hvs)
    for hv, name, priority in ((hvs[1], "a-low", 10), (hvs[1], "b-top", 900), (hvs[2], "c-mid", 500),
                               (hvs[2], "d-mid", 500)):
        launch(ledger, hv, name)
        ha(ledger, name, priority)
    launch(ledger, hvs[1], "plain-1")
    for hv in hvs[1:3]:
        go_down(ledger, hv)
        ledger.fence(hv.host, FENCE_CONFIRMED, "alice")
    done = ha_run(ledger, hvs)
    assert done["changed"] and not done.get("failed")
    assert [(r["ha_priority"], r["name"], r["from_host"], r["outcome"]) for r in done["results"]] == [
        (900, "b-top", "hv2", EVACUATED), (500, "c-mid", "hv3", EVACUATED), (500, "d-mid", "hv3", EVACUATED),
        (10, "a-low", "hv2", EVACUATED)]
    assert done["report"][-4].startswith("priority 900: b-top: evacuated to ")
    assert "its 1 other instance(s) are not HA: left to evacuate.yml" in done["report"][0]
    placed = hosts_of(ledger)
    assert all(placed[name][0] in ("hv1", "hv4") for name in ("a-low", "b-top", "c-mid", "d-mid"))
    assert placed["plain-1"] == ("hv2", ACTIVE)
    again = ha_run(ledger, hvs)
    assert not again["changed"] and again["results"] == []


def test_a_down_host_that_is_not_fenced_is_reported_and_nothing_of_it_moves(ledger):
    hv1, hv2 = FakeHypervisor("hv1"), FakeHypervisor("hv2")
    sync(ledger, hv1, hv2)
    launch(ledger, hv2, "db-1")
    ha(ledger, "db-1", 100)
    go_down(ledger, hv2)
    before = hosts_of(ledger), claimed_on(ledger)
    done = ha_run(ledger, (hv1, hv2))
    assert not done["changed"] and done["results"] == []
    [host] = done["hosts"]
    assert not host["fenced"] and host["why"].startswith("hv2 is not fenced")
    assert "NOT FENCED, none of its 1 HA instance(s) restarted" in done["report"][0]
    assert done["warnings"][0].startswith("hv2 is down and not fenced")
    assert (hosts_of(ledger), claimed_on(ledger)) == before


def test_two_ha_runs_at_once_rebuild_each_instance_once(ledger_url):
    setup = Ledger(ledger_url).open(create=True)
    hv1, hv2, hv3 = FakeHypervisor("hv1"), FakeHypervisor("hv2"), FakeHypervisor("hv3")
    try:
        sync(setup, hv1, hv2, hv3)
        uuid = launch(setup, hv2, "db-1")
        ha(setup, "db-1", 100)
        go_down(setup, hv2)
        setup.fence("hv2", FENCE_CONFIRMED, "alice")
    finally:
        setup.close()
    hooks, results, errors = Barrier(), [], []

    def run():
        own = Ledger(ledger_url).open()
        try:
            results.append(ha_run(own, (hv1, hv2, hv3), hooks=hooks))
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
    assert sorted(result["results"][0]["outcome"] for result in results) == sorted([EVACUATED, TAKEN])
    check = Ledger(ledger_url).open()
    try:
        [row] = check.instances(["db-1"])
        assert row["state"] == ACTIVE and claimed_on(check) == {"db-1": [row["host"]]}
    finally:
        check.close()
    assert [hv.host for hv in (hv1, hv3) if hv.domain_state(uuid) == "running"] == [row["host"]]
