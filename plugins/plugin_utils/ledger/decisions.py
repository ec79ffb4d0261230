"""Scheduling decisions: each with the request and the host states it was made on, so that the
engine can replay it, and the answer it gave."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.database import utcnow
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import decision_dict, decisions


def record(db: Connection, name: str, owner: str, request: Mapping[str, Any],
           host_states: Sequence[Mapping[str, Any]], decision: Mapping[str, Any], outcome: str) -> int:
    return db.execute(insert(decisions).returning(decisions.c.id), {
        "created_at": utcnow(), "owner": owner, "name": name, "ok": bool(decision.get("ok")), "outcome": outcome,
        "summary": str(decision.get("summary", "")), "request": dict(request),
        "host_states": [dict(state) for state in host_states], "decision": dict(decision),
    }).scalar_one()


def listing(db: Connection, name: str | None, limit: int) -> list[dict[str, Any]]:
    query = select(decisions).order_by(decisions.c.id.desc()).limit(limit)
    if name is not None:
        query = query.where(decisions.c.name == name)
    return [decision_dict(row._mapping) for row in db.execute(query)]
