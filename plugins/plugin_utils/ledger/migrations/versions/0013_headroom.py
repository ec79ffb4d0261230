"""HA instances: restarted elsewhere when their hypervisor fails, with failover headroom kept for them.

- instances.ha: whether the instance is restarted on another host when its hypervisor fails
  (the launch option ``ha``, changed later with berth.fleet.instance_ha); false for every
  instance written before.
- instances.ha_priority: its place in the restart order, highest first (``ha_priority``); 0.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as table:
        table.add_column(sa.Column("ha", sa.Boolean, nullable=False, server_default=sa.false()))
        table.add_column(sa.Column("ha_priority", sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("instances") as table:
        table.drop_column("ha_priority")
        table.drop_column("ha")
