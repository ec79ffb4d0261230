"""Alembic environment for the ledger.

Ledger.open() runs the migrations with its own connection (config.attributes["connection"]), so
this file never reads a URL: the one place that knows the ledger's URL is the Ledger.
"""

from __future__ import annotations

from alembic import context

from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import metadata

# Only Alembic runs this file for real; a plain import (ansible-test's import sanity test) has no
# migration context and must do nothing.
if hasattr(context, "config"):
    connection = context.config.attributes["connection"]
    # render_as_batch: SQLite alters tables by copying them, and later migrations will need that.
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
