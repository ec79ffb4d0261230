"""Data volumes: made on one hypervisor's storage pool, claimed against its disk, attached to at
most one instance there - or made on a shared pool (``shared``), which every hypervisor sees:
charged to none, attached to an instance wherever it runs.

A volume's row is its claim: ``refresh_usage`` adds its size to its hypervisor's used disk, so
that DiskFilter, the claims' re-check and capacity.yml see it, and nothing else counts it. Each
change here is one transaction that locks the hypervisor row first (the lock every claim takes),
re-checks the room under it, and ends with ``refresh_usage``.
"""

from __future__ import annotations

from typing import Any, Sequence

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import claims
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.database import utcnow
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.host_states import locked_views
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import (
    PLACED_STATES,
    hypervisors,
    instances,
    volume_dict,
    volumes,
)

V = volumes.c


def listing(db: Connection, name: str | None = None, instance_uuid: str | None = None) -> list[dict[str, Any]]:
    """The volumes (one by ``name``, or those attached to ``instance_uuid``, or all), by name."""
    query = (select(volumes, hypervisors.c.name.label("host_name"), instances.c.name.label("instance_name"))
             .join(hypervisors, hypervisors.c.uuid == V.hypervisor_uuid)
             .outerjoin(instances, instances.c.uuid == V.instance_uuid).order_by(V.name))
    if name is not None:
        query = query.where(V.name == name)
    if instance_uuid is not None:
        query = query.where(V.instance_uuid == instance_uuid)
    return [volume_dict(row._mapping, row.host_name, row.instance_name) for row in db.execute(query)]


def _one(db: Connection, name: str) -> dict[str, Any]:
    found = listing(db, name=name)
    if not found:
        raise InputError("name", f"no volume named {name} in the ledger")
    return found[0]


def create(db: Connection, name: str, host: str, pool: str, size_gb: int, owner: str,
           shared: bool = False) -> tuple[dict[str, Any], bool]:
    """Ledger.create_volume's transaction (see there)."""
    hv = claims.find_hypervisor(db, host)
    existing = listing(db, name=name)
    if existing:
        volume = existing[0]
        # A shared pool's volume is the same wherever its row is now (it follows its instance).
        if (volume["pool"], volume["size_gb"]) != (pool, size_gb) or (not shared and volume["host"] != hv.name):
            raise InputError("name", f"volume {name} exists already, {volume['size_gb']} GB in storage pool "
                                     f"{volume['pool']} on {volume['host']}: delete it first, or name another")
        return volume, False
    view, _generation = locked_views(db, [hv.uuid])[hv.uuid]
    if not shared:
        claims.check_disk(view, size_gb * 1024, f"{size_gb} GB of disk")
    db.execute(insert(volumes).values(name=name, hypervisor_uuid=hv.uuid, pool=pool, size_gb=size_gb,
                                      instance_uuid=None, target=None, owner=owner, created_at=utcnow(),
                                      shared=shared))
    claims.refresh_usage(db, [hv.uuid])
    return _one(db, name), True


def remove(db: Connection, name: str) -> bool:
    """Ledger.delete_volume's transaction (see there)."""
    found = listing(db, name=name)
    if not found:
        return False
    volume = found[0]
    claims.find_hypervisor(db, volume["hypervisor_uuid"])
    if volume["instance_uuid"] is not None:
        raise InputError("name", f"volume {name} is attached to {volume['instance']}: detach it first")
    db.execute(delete(volumes).where(V.name == name))
    claims.refresh_usage(db, [volume["hypervisor_uuid"]])
    return True


def attach(db: Connection, name: str, instance_name: str, devices: Sequence[str]) -> tuple[dict[str, Any], bool]:
    """Ledger.attach_volume's transaction (see there)."""
    volume = _one(db, name)
    claims.find_hypervisor(db, volume["hypervisor_uuid"])
    instance = db.execute(select(instances).where(instances.c.name == instance_name)).mappings().first()
    if instance is None:
        raise InputError("instance", f"no instance named {instance_name} in the ledger")
    if volume["instance_uuid"] == instance["uuid"]:
        return volume, False
    if volume["instance_uuid"] is not None:
        raise InputError("name", f"volume {name} is attached to {volume['instance']} already: detach it first")
    if instance["state"] not in PLACED_STATES:
        raise InputError("instance", f"{instance_name} is {instance['state']}: a volume is attached only to a "
                                     f"placed instance ({', '.join(PLACED_STATES)})")
    if instance["hypervisor_uuid"] != volume["hypervisor_uuid"] and not volume["shared"]:
        raise InputError("instance", f"volume {name} is on {volume['host']} and instance {instance_name} runs on "
                                     f"{instance['host']}: a volume is attached on its own host only")
    taken = set(db.execute(select(V.target).where(V.instance_uuid == instance["uuid"])).scalars())
    free = [device for device in devices if device not in taken]
    if not free:
        raise InputError("name", f"{instance_name} has no free device for another volume "
                                 f"(it has {len(taken)}: {', '.join(sorted(taken))})")
    # A shared pool's volume is attached where the instance runs: its row goes there (it is
    # charged to no host, so no usage changes).
    db.execute(update(volumes).where(V.name == name).values(instance_uuid=instance["uuid"], target=free[0],
                                                            hypervisor_uuid=instance["hypervisor_uuid"]))
    return _one(db, name), True


def detach(db: Connection, name: str) -> dict[str, Any]:
    """Ledger.detach_volume's transaction (see there)."""
    volume = _one(db, name)
    db.execute(update(volumes).where(V.name == name).values(instance_uuid=None, target=None,
                                                            delete_on_termination=False))
    return volume
