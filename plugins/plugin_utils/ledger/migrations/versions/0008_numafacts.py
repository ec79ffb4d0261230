"""A hypervisor's PCI devices and mediated device types, as its last sync read them.

- hypervisor_facts.pci_devices: the host state's ``pci_devices`` (JSON list). No existing column
  holds devices, and the PCI filter and claims to come read them beside the other facts.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("hypervisor_facts") as table:
        table.add_column(sa.Column("pci_devices", sa.JSON, nullable=False, server_default=sa.text("'[]'")))


def downgrade() -> None:
    with op.batch_alter_table("hypervisor_facts") as table:
        table.drop_column("pci_devices")
