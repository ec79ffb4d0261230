"""The ledger's third-party libraries, checked before any part of the ledger imports them (the
package imports this module first): a controller without them is told which package to
install when Ansible loads the first plugin that uses the ledger."""

from __future__ import annotations

from ansible_collections.berth.fleet.plugins.module_utils._requirements import import_library

import_library("sqlalchemy", "SQLAlchemy", "the ledger (berth.fleet's state database)")
import_library("alembic", "alembic", "the ledger's schema migrations")
