"""Host states on the hypervisor rows: the scheduler reads the fleet from one table.

- hypervisors: capacity comes back from ``inventories`` as columns (a three-way join of the
  inventories costs five times one table scan at 100,000 hypervisors), beside a summary of
  usage (claims plus unmanaged usage, kept by every write), the URI of the last sync, why a
  hypervisor is down, and the facts the default filters read (zone, aggregates, hypervisor
  version). ``last_seen_at`` goes: it was always ``synced_at``.
- hypervisor_facts: the other facts (capabilities, metrics, pools), apart, so that the
  hypervisors table that every launch scans stays narrow.
- hypervisor_images and hypervisor_networks: what each hypervisor's last sync listed (and why an
  image would be refused), so that a host lacking a launch's image or network is filtered out
  with the reason instead of failing its build.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# (column, resource class, inventory field) for the copy from 0002's inventories.
_CAPACITY = (
    ("vcpus_total", "VCPU", "total"),
    ("cpu_allocation_ratio", "VCPU", "allocation_ratio"),
    ("total_usable_ram_mb", "MEMORY_MB", "total"),
    ("reserved_host_memory_mb", "MEMORY_MB", "reserved"),
    ("ram_allocation_ratio", "MEMORY_MB", "allocation_ratio"),
    ("total_usable_disk_gb", "DISK_MB", "total / 1024"),
    ("reserved_host_disk_mb", "DISK_MB", "reserved"),
    ("disk_allocation_ratio", "DISK_MB", "allocation_ratio"),
)
_USAGE = (
    ("vcpus_used", "SUM(vcpus)"), ("memory_mb_used", "SUM(memory_mb)"), ("disk_mb_used", "SUM(disk_mb)"),
    ("num_instances", "COUNT(*)"),
)
_JSON = (("supported_instances", "'[]'"), ("cpu_info", "'{}'"), ("numa_topology", "'{}'"), ("metrics", "'{}'"),
         ("pools", "'[]'"), ("host_memory", "'{}'"))


def upgrade() -> None:
    with op.batch_alter_table("hypervisors") as batch:
        batch.add_column(sa.Column("uri", sa.Text, nullable=True))
        batch.add_column(sa.Column("down_reason", sa.Text, nullable=True))
        for column, _resource, field in _CAPACITY:
            kind = sa.Float if field == "allocation_ratio" else sa.Integer
            batch.add_column(sa.Column(column, kind, nullable=False, server_default="0"))
        for column, _sum in _USAGE:
            batch.add_column(sa.Column(column, sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("num_io_ops", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("availability_zone", sa.String(255), nullable=True))
        batch.add_column(sa.Column("aggregates", sa.JSON, nullable=False, server_default=sa.text("'[]'")))
        batch.add_column(sa.Column("hypervisor_version", sa.Integer, nullable=True))
        batch.drop_column("last_seen_at")
        batch.create_index("ix_hypervisors_name", ["name"])
    for column, resource, field in _CAPACITY:
        op.execute(f"UPDATE hypervisors SET {column} = (SELECT {field} FROM inventories WHERE "
                   f"inventories.hypervisor_uuid = hypervisors.uuid AND resource_class = '{resource}') "
                   f"WHERE EXISTS (SELECT 1 FROM inventories WHERE inventories.hypervisor_uuid = hypervisors.uuid "
                   f"AND resource_class = '{resource}')")
    for column, total in _USAGE:
        op.execute(f"UPDATE hypervisors SET {column} = "
                   f"(SELECT COALESCE({total}, 0) FROM claims WHERE claims.hypervisor_uuid = hypervisors.uuid) + "
                   f"(SELECT COALESCE({total}, 0) FROM unmanaged_usage "
                   f"WHERE unmanaged_usage.hypervisor_uuid = hypervisors.uuid)")
    op.execute("UPDATE hypervisors SET num_io_ops = (SELECT COUNT(*) FROM claims WHERE "
               "claims.hypervisor_uuid = hypervisors.uuid AND claims.lease_expires_at IS NOT NULL)")
    op.drop_table("inventories")
    op.create_table(
        "hypervisor_facts",
        sa.Column("hypervisor_uuid", sa.String(36), sa.ForeignKey("hypervisors.uuid", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("hypervisor_type", sa.String(64), nullable=True),
        sa.Column("libvirt_version", sa.Integer, nullable=True),
        sa.Column("storage_pool", sa.String(255), nullable=True),
        *(sa.Column(column, sa.JSON, nullable=False, server_default=sa.text(empty)) for column, empty in _JSON),
    )
    # The facts arrive with each hypervisor's next sync; until then, empty ones.
    op.execute("INSERT INTO hypervisor_facts (hypervisor_uuid) SELECT uuid FROM hypervisors")
    for table, extra in (("hypervisor_images", [sa.Column("refused", sa.Text, nullable=True)]),
                         ("hypervisor_networks", [])):
        op.create_table(
            table,
            sa.Column("hypervisor_uuid", sa.String(36), sa.ForeignKey("hypervisors.uuid", ondelete="CASCADE"),
                      primary_key=True),
            sa.Column("name", sa.String(255), primary_key=True),
            *extra,
        )
        op.create_index(f"ix_{table}_name", table, ["name"])


def downgrade() -> None:
    raise NotImplementedError("the ledger is migrated forward only; restore a backup to go back")
