"""The first ledger: hypervisors, instances, claims.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "hypervisors",
        sa.Column("uuid", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("nodename", sa.String(255), nullable=False),
        sa.Column("vcpus_total", sa.Integer, nullable=False),
        sa.Column("total_usable_ram_mb", sa.Integer, nullable=False),
        sa.Column("total_usable_disk_gb", sa.Integer, nullable=False),
        sa.Column("cpu_allocation_ratio", sa.Float, nullable=False),
        sa.Column("ram_allocation_ratio", sa.Float, nullable=False),
        sa.Column("disk_allocation_ratio", sa.Float, nullable=False),
        sa.Column("reserved_host_memory_mb", sa.Integer, nullable=False),
        sa.Column("reserved_host_disk_mb", sa.Integer, nullable=False),
        sa.Column("unmanaged_vcpus", sa.Integer, nullable=False),
        sa.Column("unmanaged_memory_mb", sa.Integer, nullable=False),
        sa.Column("unmanaged_disk_mb", sa.Integer, nullable=False),
        sa.Column("unmanaged_instances", sa.Integer, nullable=False),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("synced_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "instances",
        sa.Column("uuid", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(63), nullable=False, unique=True),
        sa.Column("flavor_name", sa.String(255), nullable=False),
        sa.Column("vcpus", sa.Integer, nullable=False),
        sa.Column("memory_mb", sa.Integer, nullable=False),
        sa.Column("root_gb", sa.Integer, nullable=False),
        sa.Column("ephemeral_gb", sa.Integer, nullable=False),
        sa.Column("swap", sa.Integer, nullable=False),
        sa.Column("hypervisor_uuid", sa.String(36), sa.ForeignKey("hypervisors.uuid"), nullable=True),
        sa.Column("host", sa.String(255), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("failure_reason", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "claims",
        sa.Column("instance_uuid", sa.String(36), sa.ForeignKey("instances.uuid", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("hypervisor_uuid", sa.String(36), sa.ForeignKey("hypervisors.uuid"), nullable=False),
        sa.Column("vcpus", sa.Integer, nullable=False),
        sa.Column("memory_mb", sa.Integer, nullable=False),
        sa.Column("disk_mb", sa.Integer, nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("lease_expires_at", sa.DateTime, nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_claims_hypervisor_uuid", "claims", ["hypervisor_uuid"])


def downgrade() -> None:
    op.drop_index("ix_claims_hypervisor_uuid", table_name="claims")
    op.drop_table("claims")
    op.drop_table("instances")
    op.drop_table("hypervisors")
