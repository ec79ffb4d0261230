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

from sqlalchemy import case, delete, func, select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError, LedgerError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor, HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import FILTERS
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import server_groups
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.database import utcnow
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


def refresh_usage(session: Session, hv_uuids: Iterable[str]) -> None:
    """Re-sum the usage of these hypervisors from their claims and unmanaged usage, and move
    their generation (DESIGN.md: it moves whenever capacity or usage does)."""
    uuids = sorted(set(hv_uuids))
    if not uuids:
        return
    session.flush()

    def total(model: Any, column: Any) -> Any:
        return (select(func.coalesce(func.sum(column), 0)).where(model.hypervisor_uuid == HypervisorRow.uuid)
                .scalar_subquery())

    def count(model: Any, *where: Any) -> Any:
        return (select(func.count()).select_from(model)
                .where(model.hypervisor_uuid == HypervisorRow.uuid, *where).scalar_subquery())

    session.execute(
        update(HypervisorRow).where(HypervisorRow.uuid.in_(uuids)).values(
            vcpus_used=total(ClaimRow, ClaimRow.vcpus) + total(UnmanagedRow, UnmanagedRow.vcpus),
            memory_mb_used=total(ClaimRow, ClaimRow.memory_mb) + total(UnmanagedRow, UnmanagedRow.memory_mb),
            disk_mb_used=total(ClaimRow, ClaimRow.disk_mb) + total(UnmanagedRow, UnmanagedRow.disk_mb),
            num_instances=count(ClaimRow) + count(UnmanagedRow),
            # Builds and moves in progress hold a lease: Nova's num_io_ops.
            num_io_ops=count(ClaimRow, ClaimRow.lease_expires_at.is_not(None)),
            generation=HypervisorRow.generation + 1,
        ).execution_options(synchronize_session=False)
    )
    for row in session.identity_map.values():
        if isinstance(row, HypervisorRow) and row.uuid in uuids:
            session.expire(row)


def check_room(view: HostState, flavor: Flavor, host: str) -> None:
    spec = RequestSpec(flavor=flavor, count=1)
    for name in CLAIM_CHECK_FILTERS:
        rejection = FILTERS[name]().host_passes(view, spec)
        if rejection is not None:
            raise ClaimConflict(host, rejection.message())


def claim(session: Session, placements: Sequence[Mapping[str, Any]], flavor: Flavor, owner: str,
          lease_s: int, server_group: str | None, image: str | None) -> list[dict[str, Any]]:
    """Ledger.claim's transaction (see there)."""
    unsafe = os.environ.get(UNSAFE_CLAIMS_ENV) == "1"
    now = utcnow()
    try:
        group = server_groups.lock(session, server_group) if server_group else None
        views = locked_views(session, [p["hypervisor_uuid"] for p in placements], lock=not unsafe)
        old = {row.name: row for row in session.scalars(
            select(InstanceRow).where(InstanceRow.name.in_([p["name"] for p in placements])))}
        created = []
        for placement in placements:
            hv_uuid = placement["hypervisor_uuid"]
            if hv_uuid not in views:
                raise ClaimConflict(placement["host"], "not in the ledger (no facts synced)")
            view, generation = views[hv_uuid]
            if not unsafe:
                check_room(view, flavor, placement["host"])
                view.consume(flavor)
            replaced = old.get(placement["name"])
            if replaced is not None:
                if replaced.state != ERROR:
                    raise ClaimConflict(placement["host"], f"instance {replaced.name} was launched meanwhile")
                session.delete(replaced)
                session.flush()
            instance = InstanceRow(
                uuid=str(uuidlib.uuid4()), name=placement["name"], flavor_name=flavor.name,
                vcpus=flavor.vcpus, memory_mb=flavor.memory_mb, root_gb=flavor.root_gb,
                ephemeral_gb=flavor.ephemeral_gb, swap=flavor.swap, image=image,
                hypervisor_uuid=hv_uuid, host=view.host, state=BUILDING, created_at=now, updated_at=now,
            )
            session.add(instance)
            session.flush()  # the claim's foreign key needs the instance row first
            new = new_claim(instance, hv_uuid, flavor.requested_disk_mb, owner, lease_s, now)
            session.add(new)
            session.flush()
            moved = placement.get("generation") is not None and placement["generation"] != generation
            created.append({**instance.to_dict(), "claim_id": new.id, "generation_moved": moved})
        if group is not None:
            if not unsafe:
                _check_group(session, group, [p["host"] for p in placements])
            for entry in created:
                session.add(MemberRow(group_uuid=group.uuid, instance_uuid=entry["uuid"]))
        refresh_usage(session, views)
        return created
    except IntegrityError as exc:
        # Another run inserted one of these names between our read and our write.
        raise ClaimConflict(placements[0]["host"] if placements else "-",
                            f"an instance of this launch was created meanwhile ({exc.orig})") from exc
    except OperationalError as exc:
        # PostgreSQL broke a lock cycle with another transaction: a lost race like any other.
        if "deadlock detected" not in str(exc.orig):
            raise
        raise ClaimConflict(placements[0]["host"] if placements else "-", "deadlock, decide again") from exc


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
    check_room(view, flavor, view.host)
    if group is not None:
        _check_group(session, group, [view.host], moving=instance_uuid)
    new = new_claim(instance, hv_uuid, flavor.requested_disk_mb, owner, lease_s, now)
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
    new = new_claim(instance, row.uuid, flavor.requested_disk_mb, owner, None, now)
    session.add(new)
    session.execute(delete(UnmanagedRow).where(UnmanagedRow.hypervisor_uuid == row.uuid,
                                               UnmanagedRow.domain_uuid == domain_uuid))
    session.flush()
    adopted = {**instance.to_dict(), "claim_id": new.id}
    refresh_usage(session, [row.uuid])
    return adopted, True


def new_claim(instance: InstanceRow, hv_uuid: str, disk_mb: int, owner: str, lease_s: int | None,
              now: dt.datetime) -> ClaimRow:
    """A claim of the instance's amounts; ``lease_s`` None for one that needs no lease (nothing is built)."""
    lease = None if lease_s is None else now + dt.timedelta(seconds=lease_s)
    return ClaimRow(instance_uuid=instance.uuid, hypervisor_uuid=hv_uuid, vcpus=instance.vcpus,
                    memory_mb=instance.memory_mb, disk_mb=disk_mb, owner=owner,
                    lease_expires_at=lease, created_at=now)


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
