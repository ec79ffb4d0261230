"""The exact host resources an instance holds: its pinned CPUs, NUMA cells, huge pages and
devices (docs/docsite/rst/numa.rst, "Assignments").

- claims.assignment: what the claim took beside its vCPUs, memory and disk (JSON, null for an
  instance that asked for none of it). A host's use of CPUs, pages and devices is summed from
  these, as its vCPU and memory use from the claims' numbers.
- unmanaged_usage.assignment: the same for a domain Berth did not make (its vcpupin and host
  devices, as the tracker sync read them), so that no claim takes what it uses.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for name in ("claims", "unmanaged_usage"):
        with op.batch_alter_table(name) as table:
            table.add_column(sa.Column("assignment", sa.JSON, nullable=True))


def downgrade() -> None:
    for name in ("claims", "unmanaged_usage"):
        with op.batch_alter_table(name) as table:
            table.drop_column("assignment")
