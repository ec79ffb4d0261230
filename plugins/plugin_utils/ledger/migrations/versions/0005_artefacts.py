"""What builds make on hypervisors, recorded before they make it (artefacts).

- artefacts: each volume and domain a build makes, against its instance and hypervisor, written
  before the build makes it; the tracker sync removes what a dead build left, delete.yml what
  an ERROR instance left.
- An ERROR instance of an older Berth may have left its volumes (nothing recorded them then):
  its root disk, seed and domain, named after its UUID, are recorded on its hypervisor now, so
  that the next sync removes whatever of them is still there (and forgets the rest).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "artefacts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("hypervisor_uuid", sa.String(36), sa.ForeignKey("hypervisors.uuid", ondelete="CASCADE"),
                  nullable=False, index=True),
        sa.Column("instance_uuid", sa.String(36), nullable=False, index=True),
        sa.Column("instance_name", sa.String(63), nullable=False, index=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("pool", sa.String(255), nullable=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("hypervisor_uuid", "instance_uuid", "kind", "name", name="uq_artefacts_what"),
    )
    # The names builds have always given (volume_names.root_volume_name, seed_volume_name), in the
    # pool the hypervisor's last sync used.
    errors = ("FROM instances LEFT JOIN hypervisor_facts ON hypervisor_facts.hypervisor_uuid = "
              "instances.hypervisor_uuid WHERE instances.state = 'ERROR' AND instances.hypervisor_uuid IS NOT NULL")
    columns = "(hypervisor_uuid, instance_uuid, instance_name, kind, pool, name, owner, created_at)"
    for suffix in ("root.qcow2", "seed.iso"):
        op.execute(f"INSERT INTO artefacts {columns} SELECT instances.hypervisor_uuid, instances.uuid, "
                   f"instances.name, 'volume', COALESCE(hypervisor_facts.storage_pool, 'default'), "
                   f"'berth-' || instances.uuid || '-{suffix}', 'migration 0005', CURRENT_TIMESTAMP {errors}")
    op.execute(f"INSERT INTO artefacts {columns} SELECT instances.hypervisor_uuid, instances.uuid, instances.name, "
               f"'domain', NULL, instances.name, 'migration 0005', CURRENT_TIMESTAMP {errors}")


def downgrade() -> None:
    raise NotImplementedError("the ledger is migrated forward only; restore a backup to go back")
