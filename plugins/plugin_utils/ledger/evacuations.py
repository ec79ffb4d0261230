"""Fencing and evacuation: a down hypervisor recorded as fenced, and its instances' claims moved
to the hosts they are rebuilt on (docs/docsite/rst/host_failure.rst).

- ``fence``: the host cannot run its guests any more, said by the operator or by the operator's
  fence command; recorded with who, when and how. A sync that reaches the host clears it
  (tracker.sync).
- ``claim_evacuation``: the destination of one instance of the fenced host, claimed in one
  transaction that also decides which run evacuates it: an instance still on that host and not
  being evacuated by another run (a second claim of it) is claimed; any other is refused
  (TakenByAnother), so two runs at once never rebuild one instance twice; and none is claimed
  once a sync reached the host again and cleared its fencing (NotFenced).
- ``finish_evacuation``: the instance runs on the destination: the claim there is its only one,
  and what it left on the fenced host is recorded (artefacts, ``evacuated_at``) for the sync that
  reaches that host again to remove.
- ``evacuation_failed``: no host could take it: ERROR with the reason, on the old host, whose
  claim it keeps (its domain may still be there when the host comes back).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Mapping, Sequence

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import ExactRequest
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.claims import (
    ClaimConflict,
    claim_instance_on,
    find_hypervisor,
    find_instance,
    finish_move,
    refresh_usage,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import (
    ACTIVE,
    ERROR,
    FENCE_COMMAND,
    FENCE_CONFIRMED,
    artefacts,
    claims,
    fence_record,
    hypervisors,
    instance_dict,
    instances,
    volumes,
)

FENCE_METHODS = (FENCE_CONFIRMED, FENCE_COMMAND)


class TakenByAnother(ClaimConflict):
    """Another run evacuates (or evacuated) the instance: the claim decided for it."""


class NotFenced(BerthError):
    """The evacuated host answered a sync meanwhile, which cleared its fencing: it may run its
    instances again, so none more may be started elsewhere."""


def fence(db: Connection, host: str, method: str, fenced_by: str, output: str | None,
          now: dt.datetime) -> dict[str, Any]:
    """Ledger.fence's transaction (see there)."""
    if method not in FENCE_METHODS:
        raise ValueError(f"fence method {method!r} is not one of {', '.join(FENCE_METHODS)}")
    row = find_hypervisor(db, host)
    values = {"fenced_at": now, "fenced_by": fenced_by, "fence_method": method, "fence_output": output}
    db.execute(update(hypervisors).where(hypervisors.c.uuid == row.uuid).values(values))
    return fence_record({**row._mapping, **values})


def claim_evacuation(db: Connection, instance_uuid: str, source_uuid: str, destination_uuid: str, owner: str,
                     lease_s: int, exact: ExactRequest | None = None) -> dict[str, Any]:
    """Ledger.claim_evacuation's transaction (see there)."""
    _still_on(find_instance(db, instance_uuid), source_uuid)
    try:
        # Locks the group, then every hypervisor it touches (the source among them) in UUID
        # order, as any claim does: a second evacuation of this instance waits here for the
        # first to end, and then finds it gone from the source.
        claim = claim_instance_on(db, instance_uuid, destination_uuid, owner, lease_s, keep_others=True, exact=exact)
    except InputError:
        # Already on that very host: an evacuation that ended while this one waited.
        _still_on(find_instance(db, instance_uuid), source_uuid)
        raise
    instance = find_instance(db, instance_uuid)
    _still_on(instance, source_uuid)
    # The source's row is locked (above): a sync that reaches it again clears its fencing before
    # or after this, never meanwhile.
    source = db.execute(select(hypervisors.c.name, hypervisors.c.fenced_at)
                        .where(hypervisors.c.uuid == source_uuid)).first()
    if source is None or source.fenced_at is None:
        raise NotFenced(f"{source.name if source else source_uuid} is no longer fenced: a sync reached it again, so "
                        f"it may run {instance['name']}; nothing more is evacuated from it")
    held = db.execute(select(claims.c.hypervisor_uuid, claims.c.owner).where(
        claims.c.instance_uuid == instance_uuid, claims.c.id != claim["id"],
        claims.c.hypervisor_uuid != source_uuid)).first()
    if held is not None:
        host = db.execute(select(hypervisors.c.name).where(hypervisors.c.uuid == held.hypervisor_uuid)).scalar()
        raise TakenByAnother(claim["host"], f"{instance['name']} is being moved to {host} by {held.owner}")
    return claim


def _still_on(instance: Mapping[str, Any], source_uuid: str) -> None:
    """TakenByAnother unless the instance (its row) is still on the evacuated host."""
    if instance["hypervisor_uuid"] != source_uuid:
        raise TakenByAnother(instance["host"] or "-", f"{instance['name']} was evacuated meanwhile: it is on "
                                                      f"{instance['host']}")


def finish_evacuation(db: Connection, instance_uuid: str, claim_id: int, left: Sequence[Mapping[str, Any]],
                      built: Mapping[str, Any] | None, owner: str, now: dt.datetime) -> dict[str, Any]:
    """Ledger.finish_evacuation's transaction (see there)."""
    instance = find_instance(db, instance_uuid)
    source_uuid = instance["hypervisor_uuid"]
    have = {(row.kind, row.name) for row in db.execute(
        select(artefacts.c.kind, artefacts.c.name).where(artefacts.c.instance_uuid == instance_uuid,
                                                         artefacts.c.hypervisor_uuid == source_uuid))}
    new = [{"hypervisor_uuid": source_uuid, "instance_uuid": instance_uuid, "instance_name": instance["name"],
            "kind": item["kind"], "pool": item.get("pool"), "name": item["name"], "owner": owner,
            "created_at": now, "evacuated_at": now} for item in left if (item["kind"], item["name"]) not in have]
    if new:
        db.execute(insert(artefacts), new)
    # Rows recorded before (a build there that died) are the evacuated instance's leftovers too.
    db.execute(update(artefacts).where(artefacts.c.instance_uuid == instance_uuid,
                                       artefacts.c.hypervisor_uuid == source_uuid,
                                       artefacts.c.evacuated_at.is_(None)).values(evacuated_at=now))
    # Its volumes of a local pool stay on the host it left (their files are there), attached to
    # none: the rebuilt domain is without them. A shared pool's follow it (finish_move).
    db.execute(update(volumes).where(volumes.c.instance_uuid == instance_uuid, volumes.c.shared.is_(False))
               .values(instance_uuid=None, target=None, delete_on_termination=False))
    moved = finish_move(db, instance_uuid, claim_id)
    active: dict[str, Any] = {"state": ACTIVE, "failure_reason": None, "updated_at": now}
    if built is not None:
        active["request"] = {**(instance["request"] or {}), "build": dict(built)}
    db.execute(update(instances).where(instances.c.uuid == instance_uuid).values(active))
    db.execute(update(claims).where(claims.c.id == claim_id).values(lease_expires_at=None))
    refresh_usage(db, [moved["hypervisor_uuid"]])
    return instance_dict(find_instance(db, instance_uuid))


def evacuation_failed(db: Connection, instance_uuid: str, reason: str, now: dt.datetime) -> dict[str, Any]:
    """Ledger.evacuation_failed's transaction (see there)."""
    instance = find_instance(db, instance_uuid)
    others = db.execute(delete(claims).where(claims.c.instance_uuid == instance_uuid,
                                             claims.c.hypervisor_uuid != instance["hypervisor_uuid"])
                        .returning(claims.c.hypervisor_uuid)).scalars().all()
    values = {"state": ERROR, "failure_reason": reason, "updated_at": now}
    db.execute(update(instances).where(instances.c.uuid == instance_uuid).values(values))
    refresh_usage(db, others)
    return instance_dict({**instance, **values})
