"""Fencing and evacuation (docs/docsite/rst/host_failure.rst).

- hypervisors.fenced_at, fenced_by, fence_method, fence_output: that a hypervisor the ledger has
  down was fenced - it cannot run its guests any more - when, by whom, and how: the operator's
  confirmation (``confirmed``) or the operator's fence command (``fence_command``, with its
  output, bounded). Null while it is not fenced; a sync that reaches the host clears them.
- artefacts.evacuated_at: the artefact is what an evacuated instance left on the host it was
  evacuated from (its domain, and its volumes where they were not on shared storage). The sync
  that reaches that host again removes it even if the domain runs: the instance runs elsewhere.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

FENCE_COLUMNS = (("fenced_at", sa.DateTime), ("fenced_by", sa.String(255)), ("fence_method", sa.String(32)),
                 ("fence_output", sa.Text))


def upgrade() -> None:
    with op.batch_alter_table("hypervisors") as table:
        for name, kind in FENCE_COLUMNS:
            table.add_column(sa.Column(name, kind, nullable=True))
    with op.batch_alter_table("artefacts") as table:
        table.add_column(sa.Column("evacuated_at", sa.DateTime, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("artefacts") as table:
        table.drop_column("evacuated_at")
    with op.batch_alter_table("hypervisors") as table:
        for name, _kind in reversed(FENCE_COLUMNS):
            table.drop_column(name)
