"""Data volumes made with a launch (Nova's block device mapping).

- volumes.delete_on_termination: deleting the instance the volume is attached to deletes the
  volume too (else it is detached and kept). Set by a launch's ``volumes``, false for every
  volume attached otherwise, and reset when it is detached.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("volumes") as table:
        table.add_column(sa.Column("delete_on_termination", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("volumes") as table:
        table.drop_column("delete_on_termination")
