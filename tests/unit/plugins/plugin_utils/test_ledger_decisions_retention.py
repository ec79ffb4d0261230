"""Decisions are kept for a bounded time: the tracker sync's last step drops those older than
the retention age or beyond the newest count, and each keeps at most HOST_STATES_KEPT host
states. On a real SQLite file and a real PostgreSQL server."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import update

from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import decisions as decisions_module
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.database import utcnow
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import decisions as decisions_table
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.sync import mark_missing


def record(ledger, name, states=()):
    return ledger.record_decision(name, "run", {"count": 1}, list(states), {"ok": True, "summary": name}, "claimed")


def age(ledger, decision_id, days):
    with ledger.engine.begin() as db:
        db.execute(update(decisions_table).where(decisions_table.c.id == decision_id)
                   .values(created_at=utcnow() - dt.timedelta(days=days)))


def names(ledger):
    return [row["name"] for row in ledger.decisions(limit=1000)]


def test_decisions_older_than_the_age_are_dropped(ledger):
    ids = [record(ledger, f"d{index}") for index in range(5)]
    age(ledger, ids[0], 40)
    age(ledger, ids[1], 31)
    age(ledger, ids[2], 29)
    assert ledger.prune_decisions(max_age_days=30, max_count=100) == 2
    assert names(ledger) == ["d4", "d3", "d2"]


def test_only_the_newest_count_of_decisions_are_kept(ledger):
    for index in range(5):
        record(ledger, f"d{index}")
    assert ledger.prune_decisions(max_age_days=30, max_count=2) == 3
    assert names(ledger) == ["d4", "d3"]
    assert ledger.prune_decisions(max_age_days=30, max_count=2) == 0


def test_age_and_count_together_and_fewer_than_the_count(ledger):
    ids = [record(ledger, f"d{index}") for index in range(3)]
    age(ledger, ids[2], 100)  # the newest by id, yet too old
    assert ledger.prune_decisions(max_age_days=30, max_count=10) == 1
    assert names(ledger) == ["d1", "d0"]


def test_a_dry_run_counts_and_deletes_nothing(ledger):
    for index in range(4):
        record(ledger, f"d{index}")
    assert ledger.prune_decisions(max_age_days=30, max_count=1, dry_run=True) == 3
    assert len(names(ledger)) == 4


def test_the_sync_s_last_step_prunes_and_reports_it(ledger):
    for index in range(3):
        record(ledger, f"d{index}")
    checked = mark_missing(ledger, [], 600, True, decisions_max_age_days=30, decisions_max_count=1)
    assert checked["decisions_pruned"] == 2 and checked["changed"] and len(names(ledger)) == 3
    done = mark_missing(ledger, [], 600, False, decisions_max_age_days=30, decisions_max_count=1)
    assert done["decisions_pruned"] == 2 and done["changed"] and names(ledger) == ["d2"]
    again = mark_missing(ledger, [], 600, False, decisions_max_age_days=30, decisions_max_count=1)
    assert again["decisions_pruned"] == 0 and not again["changed"]


def test_a_decision_keeps_at_most_host_states_kept_host_states_the_first_ones(ledger):
    states = [{"host": f"hv{index}"} for index in range(decisions_module.HOST_STATES_KEPT + 50)]
    record(ledger, "big", states)
    [stored] = ledger.decisions("big")
    assert [state["host"] for state in stored["host_states"]] == [
        f"hv{index}" for index in range(decisions_module.HOST_STATES_KEPT)]
