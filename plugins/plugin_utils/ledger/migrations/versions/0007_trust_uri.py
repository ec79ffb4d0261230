"""Why an operator re-homed a hypervisor's host UUID (berth.fleet.hypervisor state=rehomed).

- hypervisors.rehomed_reason, hypervisors.rehomed_at: a sync never gives a host UUID to another
  name or URI; the operator does, and says why.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("hypervisors") as table:
        table.add_column(sa.Column("rehomed_reason", sa.Text, nullable=True))
        table.add_column(sa.Column("rehomed_at", sa.DateTime, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hypervisors") as table:
        table.drop_column("rehomed_at")
        table.drop_column("rehomed_reason")
