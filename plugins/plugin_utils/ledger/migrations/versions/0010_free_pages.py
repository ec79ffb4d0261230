"""A hypervisor's free page counts, apart from its NUMA topology.

- hypervisor_facts.free_pages: per NUMA cell and page size, the pages libvirt counted free at
  the last sync (virNodeGetFreePages), ``{cell id: {size_kb: count}}`` with text keys (JSON, null
  where libvirt counted none). They were each page's ``free`` in numa_topology, where they gave
  hosts of the same hardware different texts and made every sync rewrite the topology; the
  scheduler parses and fits each distinct topology text once. Rows written before keep their
  counts in numa_topology (nothing reads them there) until their next sync moves them here.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("hypervisor_facts") as table:
        table.add_column(sa.Column("free_pages", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hypervisor_facts") as table:
        table.drop_column("free_pages")
