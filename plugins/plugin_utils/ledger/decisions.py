"""Scheduling decisions: each with the request and the host states it was made on, so that the
engine can replay it, and the answer it gave."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.database import utcnow
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import DecisionRow


def record(session: Session, name: str, owner: str, request: Mapping[str, Any],
           host_states: Sequence[Mapping[str, Any]], decision: Mapping[str, Any], outcome: str) -> int:
    row = DecisionRow(created_at=utcnow(), owner=owner, name=name, ok=bool(decision.get("ok")),
                      outcome=outcome, summary=str(decision.get("summary", "")),
                      request=dict(request), host_states=[dict(s) for s in host_states],
                      decision=dict(decision))
    session.add(row)
    session.flush()
    return row.id


def listing(session: Session, name: str | None, limit: int) -> list[dict[str, Any]]:
    query = select(DecisionRow).order_by(DecisionRow.id.desc()).limit(limit)
    if name is not None:
        query = query.where(DecisionRow.name == name)
    return [row.to_dict() for row in session.scalars(query)]
