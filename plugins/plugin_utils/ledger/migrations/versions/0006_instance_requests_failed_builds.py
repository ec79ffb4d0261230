"""What a move re-schedules with, and the builds that failed on each hypervisor.

- instances.request: the request the instance was launched with (its flavor with extra specs,
  image, project, availability zone, server group, scheduler hints, networks and the launch's
  scheduler options), so that every move schedules as its launch did. NULL for instances made
  before (and adopted ones): they move with what their row holds, and the move says so.
- hypervisors.failed_builds: builds that failed there since the last one that succeeded, as
  Nova's compute manager counts them (BuildFailureWeigher).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.add_column(sa.Column("request", sa.JSON, nullable=True))
    with op.batch_alter_table("hypervisors") as batch:
        batch.add_column(sa.Column("failed_builds", sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    raise NotImplementedError("the ledger is migrated forward only; restore a backup to go back")
