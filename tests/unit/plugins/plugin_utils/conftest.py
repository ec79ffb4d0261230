"""The ledger the ledger's tests share: opened (migrated) on SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger


@pytest.fixture
def ledger(ledger_url):
    opened = Ledger(ledger_url).open(create=True)
    yield opened
    opened.close()
