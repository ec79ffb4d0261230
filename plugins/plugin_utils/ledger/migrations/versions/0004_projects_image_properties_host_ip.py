"""What the tenancy, image and address filters read back from the ledger.

- instances: the project a launch was made for (AggregateMultiTenancyIsolation; "default" for
  those made before) and its image's properties (ImagePropertiesWeigher; none before).
- hypervisor_facts: the hypervisor's address as its last sync found it (SimpleCIDRAffinityFilter).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.add_column(sa.Column("project_id", sa.String(255), nullable=False, server_default="default"))
        batch.add_column(sa.Column("image_properties", sa.JSON, nullable=True))
    with op.batch_alter_table("hypervisor_facts") as batch:
        batch.add_column(sa.Column("host_ip", sa.String(64), nullable=True))


def downgrade() -> None:
    raise NotImplementedError("the ledger is migrated forward only; restore a backup to go back")
