"""Claims: the resources an instance holds on a hypervisor, and the instance rows they belong to.

A claim is one transaction that locks the chosen hypervisors (and the server group, if any),
re-checks their room with the placement engine's own resource filters and the group's hard
policy, and commits only if everything still fits. Every transaction that adds or drops a
claim (or unmanaged usage) ends with ``refresh_usage`` on the hypervisors it touched, which
re-sums their usage from the rows and moves their generation: the hypervisor row's usage
summary, which the scheduler reads, is never computed any other way.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid as uuidlib
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import bindparam, case, delete, func, insert, select, text, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError, LedgerError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor, HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import FILTERS
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import server_groups
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.database import (
    driver_execute,
    insert_skipping,
    utcnow,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.host_states import locked_views
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import (
    ACTIVE,
    BUILDING,
    ERROR,
    ClaimRow,
    HypervisorRow,
    InstanceRow,
    MemberRow,
    UnmanagedRow,
    instance_dict,
)

# The filters a claim re-checks: the resources. Group policy is re-checked by server_groups.violation.
CLAIM_CHECK_FILTERS = ("RamFilter", "CoreFilter", "DiskFilter")
DEFAULT_LEASE_S = 3600

# TEST ONLY: set to 1 to switch off the claim's locks and re-check, so that the concurrency
# test can show it catches the race they prevent. Never set it anywhere else.
UNSAFE_CLAIMS_ENV = "BERTH_TEST_UNSAFE_CLAIMS"


class ClaimConflict(BerthError):
    """A host no longer had room (or the group's policy no longer allowed it) when the claim
    re-checked it; decide again with fresh usage."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"{host}: {reason}")
        self.host = host
        self.reason = reason


def instance_flavor(instance: Mapping[str, Any]) -> Flavor:
    """The flavor an instance row (``to_dict()``) was built with."""
    return Flavor(name=instance["flavor"], vcpus=instance["vcpus"], memory_mb=instance["memory_mb"],
                  root_gb=instance["root_gb"], ephemeral_gb=instance["ephemeral_gb"], swap=instance["swap"])


def _usage_statement() -> Any:
    """The UPDATE that re-sums the usage of the hypervisors bound to ``uuids`` from their rows
    and moves their generation: one pass over each hypervisor's claims and unmanaged usage for
    all five sums. Built once, as text: it is the same on SQLite and PostgreSQL, and it runs in
    every claim."""
    return text("""
        UPDATE hypervisors SET (vcpus_used, memory_mb_used, disk_mb_used, num_instances, num_io_ops) = (
            SELECT COALESCE(SUM(used.vcpus), 0), COALESCE(SUM(used.memory_mb), 0), COALESCE(SUM(used.disk_mb), 0),
                   COUNT(*), COALESCE(SUM(used.building), 0)
            FROM (SELECT vcpus, memory_mb, disk_mb,
                         CASE WHEN lease_expires_at IS NULL THEN 0 ELSE 1 END AS building
                  FROM claims WHERE claims.hypervisor_uuid = hypervisors.uuid
                  UNION ALL
                  SELECT vcpus, memory_mb, disk_mb, 0 FROM unmanaged_usage
                  WHERE unmanaged_usage.hypervisor_uuid = hypervisors.uuid) AS used),
            generation = generation + 1
        WHERE uuid IN :uuids""").bindparams(bindparam("uuids", expanding=True))


_REFRESH_USAGE = _usage_statement()
_INSTANCES_NAMED = select(InstanceRow.uuid, InstanceRow.name, InstanceRow.state).where(
    InstanceRow.name.in_(bindparam("names", expanding=True)))
_INSERT_CLAIM = insert(ClaimRow.__table__).returning(ClaimRow.__table__.c.id)


def refresh_usage(session: Session, hv_uuids: Iterable[str]) -> None:
    """Re-sum the usage of these hypervisors from their claims and unmanaged usage, and move
    their generation (DESIGN.md: it moves whenever capacity or usage does)."""
    uuids = sorted(set(hv_uuids))
    if not uuids:
        return
    session.flush()
    driver_execute(session.connection(), _REFRESH_USAGE, {"uuids": uuids})
    for row in session.identity_map.values():
        if isinstance(row, HypervisorRow) and row.uuid in uuids:
            session.expire(row)


def check_room(view: HostState, spec: RequestSpec, host: str) -> None:
    """Whether ``view`` still takes one instance of ``spec``'s flavor, by the engine's own filters."""
    for name in CLAIM_CHECK_FILTERS:
        rejection = FILTERS[name]().host_passes(view, spec)
        if rejection is not None:
            raise ClaimConflict(host, rejection.message())


def claim(session: Session, placements: Sequence[Mapping[str, Any]], flavor: Flavor, owner: str,
          lease_s: int, server_group: str | None, image: str | None) -> list[dict[str, Any]]:
    """Ledger.claim's transaction (see there). Claims are the ledger's hottest write: rows are
    written as plain column values on the driver's cursor (database.driver_execute), with no
    ORM object, two statements per instance and one usage update for the request."""
    unsafe = os.environ.get(UNSAFE_CLAIMS_ENV) == "1"
    now = utcnow()
    spec = RequestSpec(flavor=flavor, count=1)
    try:
        group = server_groups.lock(session, server_group) if server_group else None
        views = locked_views(session, [p["hypervisor_uuid"] for p in placements], lock=not unsafe)
        instances, moved = [], []
        for placement in placements:
            hv_uuid = placement["hypervisor_uuid"]
            if hv_uuid not in views:
                raise ClaimConflict(placement["host"], "not in the ledger (no facts synced)")
            view, generation = views[hv_uuid]
            if not unsafe:
                check_room(view, spec, placement["host"])
                view.consume(flavor)
            instances.append({
                "uuid": str(uuidlib.uuid4()), "name": placement["name"], "flavor_name": flavor.name,
                "vcpus": flavor.vcpus, "memory_mb": flavor.memory_mb, "root_gb": flavor.root_gb,
                "ephemeral_gb": flavor.ephemeral_gb, "swap": flavor.swap, "image": image,
                "hypervisor_uuid": hv_uuid, "host": view.host, "state": BUILDING, "failure_reason": None,
                "missing_since": None, "created_at": now, "updated_at": now})
            moved.append(placement.get("generation") is not None and placement["generation"] != generation)
        connection = session.connection()
        _insert_instances(connection, instances, placements)
        claim_ids = [
            driver_execute(connection, _INSERT_CLAIM, claim_columns(
                instance["uuid"], instance["hypervisor_uuid"], flavor, owner, lease_s, now)).fetchall()[0][0]
            for instance in instances]
        if group is not None:
            if not unsafe:
                _check_group(session, group, [p["host"] for p in placements])
            connection.execute(insert(MemberRow.__table__),
                               [{"group_uuid": group.uuid, "instance_uuid": row["uuid"]} for row in instances])
        refresh_usage(session, views)
        return [{**instance_dict(instance), "claim_id": claim_id, "generation_moved": generation_moved}
                for instance, claim_id, generation_moved in zip(instances, claim_ids, moved)]
    except IntegrityError as exc:
        # Another run inserted one of these names between our read and our write.
        raise ClaimConflict(placements[0]["host"] if placements else "-",
                            f"an instance of this launch was created meanwhile ({exc.orig})") from exc
    except OperationalError as exc:
        # PostgreSQL broke a lock cycle with another transaction: a lost race like any other.
        if "deadlock detected" not in str(exc.orig):
            raise
        raise ClaimConflict(placements[0]["host"] if placements else "-", "deadlock, decide again") from exc


def _insert_instances(connection: Any, instances: Sequence[Mapping[str, Any]],
                      placements: Sequence[Mapping[str, Any]]) -> None:
    """Insert the new instance rows; a name already taken by an instance in ERROR is taken over
    (that instance is replaced), by any other it is a lost race (ClaimConflict)."""
    skipping = insert_skipping(connection.dialect.name, InstanceRow.__table__, "name")
    taken = [instance for instance in instances if not driver_execute(connection, skipping, instance).fetchall()]
    if not taken:
        return
    hosts = {placement["name"]: placement["host"] for placement in placements}
    for uuid, name, state in connection.execute(_INSTANCES_NAMED, {"names": [entry["name"] for entry in taken]}):
        if state != ERROR:
            raise ClaimConflict(hosts[name], f"instance {name} was launched meanwhile")
        # An ERROR instance holds no claim; its group membership goes with it (ON DELETE CASCADE).
        connection.execute(delete(InstanceRow.__table__).where(InstanceRow.__table__.c.uuid == uuid))
    connection.execute(insert(InstanceRow.__table__), taken)


def _check_group(session: Session, group: Any, new_hosts: Sequence[str], moving: str | None = None) -> None:
    broken = server_groups.violation(session, group, new_hosts, moving)
    if broken is not None:
        raise ClaimConflict(*broken)


def claim_instance_on(session: Session, instance_uuid: str, hv_uuid: str, owner: str, lease_s: int,
                      keep_others: bool, host: str | None = None) -> dict[str, Any]:
    """A new claim for an existing instance, locked (its group, then the hypervisor) and
    re-checked as ``claim`` does; unless ``keep_others``, its other claims are given back first."""
    now = utcnow()
    instance = find_instance(session, instance_uuid)
    membership = session.scalars(select(MemberRow).where(MemberRow.instance_uuid == instance_uuid)).first()
    group = server_groups.lock_uuid(session, membership.group_uuid) if membership is not None else None
    old_claims = list(session.scalars(select(ClaimRow).where(ClaimRow.instance_uuid == instance_uuid)))
    if keep_others and hv_uuid == instance.hypervisor_uuid:
        raise InputError("host", f"instance {instance.name} already runs on {instance.host}")
    # Every hypervisor this touches is locked first, in UUID order, as a claim locks them.
    locked_views(session, {hv_uuid, *(old.hypervisor_uuid for old in old_claims)})
    if not keep_others:
        for old in old_claims:
            session.delete(old)
        refresh_usage(session, [old.hypervisor_uuid for old in old_claims])
    views = locked_views(session, [hv_uuid])
    if hv_uuid not in views:
        raise ClaimConflict(host or hv_uuid, "not in the ledger (no facts synced)")
    view, _generation = views[hv_uuid]
    flavor = instance_flavor(instance.to_dict())
    check_room(view, RequestSpec(flavor=flavor, count=1), view.host)
    if group is not None:
        _check_group(session, group, [view.host], moving=instance_uuid)
    new = ClaimRow(**claim_columns(instance.uuid, hv_uuid, flavor, owner, lease_s, now))
    session.add(new)
    session.flush()
    refresh_usage(session, [hv_uuid])
    return new.to_dict(view.host)


def finish_move(session: Session, instance_uuid: str, claim_id: int) -> dict[str, Any]:
    """Ledger.finish_move's transaction."""
    instance = find_instance(session, instance_uuid)
    target = session.get(ClaimRow, claim_id)
    if target is None or target.instance_uuid != instance_uuid:
        raise LedgerError(f"claim {claim_id} is not a claim of instance {instance.name}")
    hv = session.get(HypervisorRow, target.hypervisor_uuid)
    touched = {target.hypervisor_uuid}
    for other in session.scalars(select(ClaimRow).where(ClaimRow.instance_uuid == instance_uuid)):
        if other.id != claim_id:
            touched.add(other.hypervisor_uuid)
            session.delete(other)
    instance.hypervisor_uuid = hv.uuid
    instance.host = hv.name
    instance.missing_since = None
    instance.updated_at = utcnow()
    if instance.state == ACTIVE:
        target.lease_expires_at = None
    result = instance.to_dict()
    refresh_usage(session, touched)
    return result


def release_claim(session: Session, claim_id: int) -> bool:
    claim_row = session.get(ClaimRow, claim_id)
    if claim_row is None:
        return False
    session.delete(claim_row)
    refresh_usage(session, [claim_row.hypervisor_uuid])
    return True


def release(session: Session, claim_row: ClaimRow, reason: str, now: dt.datetime) -> None:
    """Drop a claim; an instance left without any claim is ERROR with ``reason``. The caller
    refreshes the hypervisor's usage."""
    instance = session.get(InstanceRow, claim_row.instance_uuid)
    session.delete(claim_row)
    session.flush()
    if instance is not None:
        left = session.scalar(select(func.count(ClaimRow.id)).where(ClaimRow.instance_uuid == instance.uuid))
        if not left:
            instance.state = ERROR
            instance.failure_reason = reason
            instance.updated_at = now


def mark_active(session: Session, instance_uuid: str) -> None:
    instance = find_instance(session, instance_uuid)
    instance.state = ACTIVE
    instance.failure_reason = None
    instance.updated_at = utcnow()
    session.execute(update(ClaimRow).where(ClaimRow.instance_uuid == instance_uuid,
                                           ClaimRow.hypervisor_uuid == instance.hypervisor_uuid)
                    .values(lease_expires_at=None).execution_options(synchronize_session=False))
    refresh_usage(session, [instance.hypervisor_uuid])  # no longer an io op


def mark_error(session: Session, instance_uuid: str, reason: str) -> None:
    instance = find_instance(session, instance_uuid)
    now = utcnow()
    touched = []
    for claim_row in session.scalars(select(ClaimRow).where(ClaimRow.instance_uuid == instance_uuid)):
        touched.append(claim_row.hypervisor_uuid)
        release(session, claim_row, reason, now)
    instance.state = ERROR
    instance.failure_reason = reason
    instance.updated_at = now
    refresh_usage(session, touched)


def delete_instance(session: Session, instance_uuid: str) -> bool:
    instance = session.get(InstanceRow, instance_uuid)
    if instance is None:
        return False
    # The group first, then hypervisors: the order a claim takes its locks in.
    session.execute(delete(MemberRow).where(MemberRow.instance_uuid == instance_uuid))
    touched = []
    for claim_row in session.scalars(select(ClaimRow).where(ClaimRow.instance_uuid == instance_uuid)):
        touched.append(claim_row.hypervisor_uuid)
        session.delete(claim_row)
    session.delete(instance)
    refresh_usage(session, touched)
    return True


def adopt_instance(session: Session, host: str, domain_uuid: str, name: str, flavor: Flavor, owner: str,
                   dry_run: bool) -> tuple[dict[str, Any], bool]:
    """Ledger.adopt_instance's transaction (see there)."""
    now = utcnow()
    # A dry run may come before the hypervisor's first sync (check mode syncs nothing).
    row = find_hypervisor(session, host, missing_ok=dry_run)
    existing = session.get(InstanceRow, domain_uuid)
    if existing is not None:
        if row is None or existing.hypervisor_uuid != row.uuid:
            raise InputError("domain", f"domain {domain_uuid} is instance {existing.name} of the ledger, "
                                       f"which places it on {existing.host}, not {row.name if row else host}")
        return existing.to_dict(), False
    taken = session.scalars(select(InstanceRow).where(InstanceRow.name == name)).first()
    if taken is not None:
        raise InputError("name", f"name {name} is already instance {taken.uuid} on {taken.host}; "
                                 f"pass another name")
    instance = InstanceRow(
        uuid=domain_uuid, name=name, flavor_name=flavor.name, vcpus=flavor.vcpus,
        memory_mb=flavor.memory_mb, root_gb=flavor.root_gb, ephemeral_gb=flavor.ephemeral_gb,
        swap=flavor.swap, image=None, hypervisor_uuid=row.uuid if row else None,
        host=row.name if row else host, state=ACTIVE, created_at=now, updated_at=now,
    )
    if row is None:
        return instance.to_dict(), True
    session.add(instance)
    session.flush()  # the claim's foreign key needs the instance row first
    new = ClaimRow(**claim_columns(instance.uuid, row.uuid, flavor, owner, None, now))
    session.add(new)
    session.execute(delete(UnmanagedRow).where(UnmanagedRow.hypervisor_uuid == row.uuid,
                                               UnmanagedRow.domain_uuid == domain_uuid))
    session.flush()
    adopted = {**instance.to_dict(), "claim_id": new.id}
    refresh_usage(session, [row.uuid])
    return adopted, True


def claim_columns(instance_uuid: str, hv_uuid: str, flavor: Flavor, owner: str, lease_s: int | None,
                  now: dt.datetime) -> dict[str, Any]:
    """A claim row's values: the flavor's amounts on ``hv_uuid``, held by ``owner`` with a lease
    of ``lease_s`` seconds, or none when nothing is being built."""
    lease = None if lease_s is None else now + dt.timedelta(seconds=lease_s)
    return {"instance_uuid": instance_uuid, "hypervisor_uuid": hv_uuid, "vcpus": flavor.vcpus,
            "memory_mb": flavor.memory_mb, "disk_mb": flavor.requested_disk_mb, "owner": owner,
            "lease_expires_at": lease, "created_at": now}


def find_instance(session: Session, instance_uuid: str) -> InstanceRow:
    instance = session.get(InstanceRow, instance_uuid)
    if instance is None:
        raise LedgerError(f"instance {instance_uuid} is not in the ledger")
    return instance


def find_hypervisor(session: Session, host: str, missing_ok: bool = False) -> HypervisorRow | None:
    """A hypervisor by name or UUID, locked; bad input listing the known ones if there is none."""
    row = session.scalars(
        select(HypervisorRow).where((HypervisorRow.name == host) | (HypervisorRow.uuid == host))
        .order_by(case((HypervisorRow.name == host, 0), else_=1)).with_for_update()
    ).first()
    if row is None and not missing_ok:
        known = ", ".join(session.scalars(select(HypervisorRow.name).order_by(HypervisorRow.name))) or "none"
        raise InputError("host", f"no hypervisor {host!r} in the ledger (known: {known}); run "
                                 f"playbooks/gather.yml to record the inventory's hypervisors")
    return row
