"""Host rules: the operator's rules between instances and host aggregates (berth.fleet.host_rule).

- host_rules: one row per rule, by its name: its kind (must, should, must_not, should_not), the
  aggregate it is about, its weight (the soft kinds'), and what selects its instances (a name
  pattern, a server group, a label: at least one).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "host_rules",
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("aggregate", sa.String(255), nullable=False),
        sa.Column("weight", sa.Float, nullable=False, server_default="1"),
        sa.Column("instance_name", sa.String(255), nullable=True),
        sa.Column("instance_group", sa.String(255), nullable=True),
        sa.Column("instance_label", sa.String(63), nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("host_rules")
