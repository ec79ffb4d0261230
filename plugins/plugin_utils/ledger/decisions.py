"""Scheduling decisions: each with the request and the host states it was made on, so that the
engine can replay it, and the answer it gave; kept for a bounded time (``prune``)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Mapping, Sequence

from sqlalchemy import delete, func, insert, or_, select
from sqlalchemy.engine import Connection

from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.database import utcnow
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import decision_dict, decisions


# The host states one decision row keeps, at most: those the caller lists first (the chosen hosts,
# their alternates, then the runners-up and closest misses). A few KiB each; a launch of many
# instances on a large fleet would otherwise name thousands.
HOST_STATES_KEPT = 100


def record(db: Connection, name: str, owner: str, request: Mapping[str, Any],
           host_states: Sequence[Mapping[str, Any]], decision: Mapping[str, Any], outcome: str) -> int:
    return db.execute(insert(decisions).returning(decisions.c.id), {
        "created_at": utcnow(), "owner": owner, "name": name, "ok": bool(decision.get("ok")), "outcome": outcome,
        "summary": str(decision.get("summary", "")), "request": dict(request),
        "host_states": [dict(state) for state in host_states[:HOST_STATES_KEPT]], "decision": dict(decision),
    }).scalar_one()


def prune(db: Connection, max_age_days: int, max_count: int, dry_run: bool = False) -> int:
    """Delete the decisions older than ``max_age_days`` and those beyond the newest
    ``max_count``; returns how many (that would be) deleted."""
    too_old = decisions.c.created_at < utcnow() - dt.timedelta(days=max_age_days)
    # The id of the newest decision past the count: it and every older one go.
    boundary = select(decisions.c.id).order_by(decisions.c.id.desc()).offset(max_count).limit(1).scalar_subquery()
    doomed = or_(too_old, decisions.c.id <= boundary)
    if dry_run:
        return db.execute(select(func.count()).select_from(decisions).where(doomed)).scalar_one()
    return db.execute(delete(decisions).where(doomed)).rowcount


def listing(db: Connection, name: str | None, limit: int) -> list[dict[str, Any]]:
    query = select(decisions).order_by(decisions.c.id.desc()).limit(limit)
    if name is not None:
        query = query.where(decisions.c.name == name)
    return [decision_dict(row._mapping) for row in db.execute(query)]
