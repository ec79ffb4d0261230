"""The ledger the ledger's tests share: opened (migrated) on SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import event

from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger


@pytest.fixture
def ledger(ledger_url):
    opened = Ledger(ledger_url).open(create=True)
    yield opened
    opened.close()


@pytest.fixture
def writes_of():
    """``writes_of(ledger)``: the list the writing statements ``ledger`` runs from then on are
    added to, each on one line."""
    def start(ledger) -> list[str]:
        seen: list[str] = []

        @event.listens_for(ledger.engine, "before_cursor_execute")
        def record(_conn, _cursor, statement, _parameters, _context, _executemany):
            if statement.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
                seen.append(" ".join(statement.split()))

        return seen

    return start
