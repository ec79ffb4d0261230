"""Digests of the long facts the scheduler reads on every host.

- hypervisor_facts.numa_topology_digest, hypervisor_facts.pci_devices_digest: SHA-256 of each
  fact's JSON with sorted keys (schema.fact_digest), written by the tracker sync with the fact.
  The scheduler's read takes the digest of every host and the text of one host per distinct
  digest: hosts of the same hardware share a few kilobytes of text that it would otherwise
  read, host by host, for every request that asks for NUMA placement or devices. Rows written
  before stay null until their next sync; the read takes those hosts' own text meanwhile.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

COLUMNS = ("numa_topology_digest", "pci_devices_digest")


def upgrade() -> None:
    with op.batch_alter_table("hypervisor_facts") as table:
        for name in COLUMNS:
            table.add_column(sa.Column(name, sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hypervisor_facts") as table:
        for name in COLUMNS:
            table.drop_column(name)
