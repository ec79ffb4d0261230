"""The ledger the ledger's tests share: opened (migrated) on SQLite and on PostgreSQL; and an
instance as a build records it in the ledger, for the tests that define it again."""

from __future__ import annotations

import pytest
from sqlalchemy import event

from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import DEFAULT_TEMPLATE, Build
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


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


class _RecordingLedger:
    """What Build asks of the ledger when an instance's first host builds it: its claim (no
    assignment), and mark_active, whose build record is kept."""

    def __init__(self) -> None:
        self.built = None

    def claims(self, uuid):
        return []

    def mark_active(self, uuid, built):
        self.built = built
        return {"uuid": uuid}


@pytest.fixture
def launched_instance(monkeypatch):
    """``launched_instance(request, name, uuid, host_cpu=None, domain_types=("qemu",))``: the
    instance as the ledger holds it once Build has built ``request`` on a host whose last sync
    recorded ``host_cpu`` (its CPU settings and what its libvirt offers): the claim's recorded
    request (Request.to_record) with what Build gave mark_active as its ``build``. The work on
    the host itself is skipped; everything Build decides and records is its own."""
    monkeypatch.setattr(Build, "_on_host", lambda self, *args: {"changed": True})

    def launched(request, name, uuid, host_cpu=None, domain_types=("qemu",)):
        ledger = _RecordingLedger()
        placement = {"name": name, "uuid": uuid, "host": "hv1", "uri": "test:///default",
                     "domain_types": list(domain_types), "cpu": host_cpu}
        Build(Settings(), ledger, DEFAULT_TEMPLATE, check_mode=False, diff=False)._active(request, placement, None)
        return {"name": name, "uuid": uuid, "request": {**request.to_record(), "build": ledger.built}}

    return launched
