"""Fixtures shared by unit and integration tests: the ledger on SQLite and on PostgreSQL."""

from __future__ import annotations

import itertools

import pytest
from pg_server import PostgresServer

_databases = itertools.count(1)


@pytest.fixture(scope="session")
def postgres():
    """One real PostgreSQL server (Debian's packages) for the whole session, on loopback."""
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request, tmp_path):
    """An empty ledger URL, once a SQLite file and once a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/ledger.sqlite3"
    server = request.getfixturevalue("postgres")
    return server.create_database(f"ledger_{next(_databases)}")
