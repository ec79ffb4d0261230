"""An instance's user_data, kept apart from its row (docs/docsite/rst/host_failure.rst).

- instance_user_data: the user_data each instance was launched with (none for instances written
  before, nor for those launched without), which an evacuation that makes the instance anew from
  its image puts in its new seed. No listing returns it: it may carry secrets.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "instance_user_data",
        sa.Column("instance_uuid", sa.String(36), sa.ForeignKey("instances.uuid", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("user_data", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("instance_user_data")
