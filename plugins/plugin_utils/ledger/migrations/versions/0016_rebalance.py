"""When an instance last moved: the rebalancer's cooldown per instance.

- instances.moved_at: when the instance last moved to another hypervisor (a migration, a
  drain's or a rebalance's move, a resize onto another host); NULL for every instance written
  before, which the rebalancer reads as "never moved".

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as table:
        table.add_column(sa.Column("moved_at", sa.DateTime, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("instances") as table:
        table.drop_column("moved_at")
