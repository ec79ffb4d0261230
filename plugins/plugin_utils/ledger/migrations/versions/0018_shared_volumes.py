"""Shared-pool data volumes (berth.fleet.volume's pool).

- volumes.shared: the volume's pool was one of the operator's shared pools when it was made: no
  move copies it, and its size is charged to no hypervisor's disk.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("volumes") as table:
        table.add_column(sa.Column("shared", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("volumes") as table:
        table.drop_column("shared")
