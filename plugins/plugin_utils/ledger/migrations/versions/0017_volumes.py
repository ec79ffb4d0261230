"""Data volumes (berth.fleet.volume).

- volumes: one row per data volume, on one hypervisor's storage pool, with its size (counted
  into the hypervisor's used disk by refresh_usage) and the instance it is attached to, if any.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "volumes",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("hypervisor_uuid", sa.String(36), sa.ForeignKey("hypervisors.uuid"), nullable=False),
        sa.Column("pool", sa.String(255), nullable=False),
        sa.Column("size_gb", sa.Integer, nullable=False),
        sa.Column("instance_uuid", sa.String(36), sa.ForeignKey("instances.uuid"), nullable=True),
        sa.Column("target", sa.String(16), nullable=True),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_volumes_hypervisor_uuid", "volumes", ["hypervisor_uuid"])
    op.create_index("ix_volumes_instance_uuid", "volumes", ["instance_uuid"])


def downgrade() -> None:
    op.drop_index("ix_volumes_instance_uuid", table_name="volumes")
    op.drop_index("ix_volumes_hypervisor_uuid", table_name="volumes")
    op.drop_table("volumes")
