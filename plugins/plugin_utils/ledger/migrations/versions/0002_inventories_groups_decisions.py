"""Inventories per resource, claims with their own id, server groups, unmanaged usage, decisions.

- hypervisors: capacity moves to ``inventories`` (one row per resource: total, reserved,
  allocation ratio, as Placement keeps it); the hypervisor gains disabled/disabled_reason and
  a sync status (``up`` or ``missing``) with the time it was last seen.
- claims: an id of their own, so one instance can hold claims on two hypervisors at once
  (a migration claims the destination before the move and releases the source after).
- instances: the image, and when a sync last found the instance missing on its host.
- unmanaged_usage: one row per orphan domain, instead of sums on the hypervisor.
- server_groups and server_group_members; decisions (request, host states, answer).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# (resource class, total expression, reserved column, ratio column) for the copy from 0001.
_RESOURCES = (
    ("VCPU", "vcpus_total", None, "cpu_allocation_ratio"),
    ("MEMORY_MB", "total_usable_ram_mb", "reserved_host_memory_mb", "ram_allocation_ratio"),
    ("DISK_MB", "total_usable_disk_gb * 1024", "reserved_host_disk_mb", "disk_allocation_ratio"),
)
_OLD_CAPACITY = (
    "vcpus_total", "total_usable_ram_mb", "total_usable_disk_gb", "cpu_allocation_ratio",
    "ram_allocation_ratio", "disk_allocation_ratio", "reserved_host_memory_mb",
    "reserved_host_disk_mb", "unmanaged_vcpus", "unmanaged_memory_mb", "unmanaged_disk_mb",
    "unmanaged_instances",
)


def upgrade() -> None:
    op.create_table(
        "inventories",
        sa.Column("hypervisor_uuid", sa.String(36), sa.ForeignKey("hypervisors.uuid", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("resource_class", sa.String(32), primary_key=True),
        sa.Column("total", sa.Integer, nullable=False),
        sa.Column("reserved", sa.Integer, nullable=False),
        sa.Column("allocation_ratio", sa.Float, nullable=False),
    )
    for resource, total, reserved, ratio in _RESOURCES:
        op.execute(
            f"INSERT INTO inventories (hypervisor_uuid, resource_class, total, reserved, allocation_ratio) "
            f"SELECT uuid, '{resource}', {total}, {reserved or 0}, {ratio} FROM hypervisors"
        )
    op.create_table(
        "unmanaged_usage",
        sa.Column("hypervisor_uuid", sa.String(36), sa.ForeignKey("hypervisors.uuid", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("domain_uuid", sa.String(36), primary_key=True),
        sa.Column("domain_name", sa.String(255), nullable=False),
        sa.Column("vcpus", sa.Integer, nullable=False),
        sa.Column("memory_mb", sa.Integer, nullable=False),
        sa.Column("disk_mb", sa.Integer, nullable=False),
        sa.Column("seen_at", sa.DateTime, nullable=False),
    )
    # 0001 kept only sums; they survive as one row until the next sync lists the domains.
    op.execute(
        "INSERT INTO unmanaged_usage (hypervisor_uuid, domain_uuid, domain_name, vcpus, memory_mb, "
        "disk_mb, seen_at) SELECT uuid, 'schema-0001', '(orphans counted before schema 0002)', "
        "unmanaged_vcpus, unmanaged_memory_mb, unmanaged_disk_mb, synced_at FROM hypervisors "
        "WHERE unmanaged_instances > 0"
    )
    with op.batch_alter_table("hypervisors") as batch:
        for column in _OLD_CAPACITY:
            batch.drop_column(column)
        batch.add_column(sa.Column("disabled", sa.Boolean, nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("disabled_reason", sa.Text, nullable=True))
        batch.add_column(sa.Column("sync_status", sa.String(16), nullable=False, server_default="up"))
        batch.add_column(sa.Column("last_seen_at", sa.DateTime, nullable=True))
    op.execute("UPDATE hypervisors SET last_seen_at = synced_at")

    with op.batch_alter_table("instances") as batch:
        batch.add_column(sa.Column("image", sa.String(255), nullable=True))
        batch.add_column(sa.Column("missing_since", sa.DateTime, nullable=True))

    # A new table copied and renamed (not the old one renamed away): PostgreSQL keeps index and
    # constraint names across a rename, and "claims_pkey" would then be taken.
    op.create_table(
        "claims_new",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("instance_uuid", sa.String(36), sa.ForeignKey("instances.uuid", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("hypervisor_uuid", sa.String(36), sa.ForeignKey("hypervisors.uuid"), nullable=False),
        sa.Column("vcpus", sa.Integer, nullable=False),
        sa.Column("memory_mb", sa.Integer, nullable=False),
        sa.Column("disk_mb", sa.Integer, nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("lease_expires_at", sa.DateTime, nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.execute(
        "INSERT INTO claims_new (instance_uuid, hypervisor_uuid, vcpus, memory_mb, disk_mb, owner, "
        "lease_expires_at, created_at) SELECT instance_uuid, hypervisor_uuid, vcpus, memory_mb, "
        "disk_mb, owner, lease_expires_at, created_at FROM claims"
    )
    op.drop_index("ix_claims_hypervisor_uuid", table_name="claims")
    op.drop_table("claims")
    op.rename_table("claims_new", "claims")
    op.create_index("ix_claims_hypervisor_uuid", "claims", ["hypervisor_uuid"])
    op.create_index("ix_claims_instance_uuid", "claims", ["instance_uuid"])

    op.create_table(
        "server_groups",
        sa.Column("uuid", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("policy", sa.String(32), nullable=False),
        sa.Column("max_server_per_host", sa.Integer, nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "server_group_members",
        sa.Column("group_uuid", sa.String(36), sa.ForeignKey("server_groups.uuid", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("instance_uuid", sa.String(36), sa.ForeignKey("instances.uuid", ondelete="CASCADE"),
                  primary_key=True),
    )
    op.create_index("ix_server_group_members_instance_uuid", "server_group_members", ["instance_uuid"])

    op.create_table(
        "decisions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("ok", sa.Boolean, nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("request", sa.JSON, nullable=False),
        sa.Column("host_states", sa.JSON, nullable=False),
        sa.Column("decision", sa.JSON, nullable=False),
    )
    op.create_index("ix_decisions_name", "decisions", ["name"])


def downgrade() -> None:
    raise NotImplementedError("the ledger is not downgraded: restore a backup taken before the upgrade")
