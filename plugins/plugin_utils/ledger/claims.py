"""Claims: the resources an instance holds on a hypervisor, and the instance rows they belong to.

A claim is one transaction that locks the chosen hypervisors (and the server group, if any),
re-checks their room with the placement engine's own resource filters, the group's hard
policy and the operator's hard host rules, and commits only if everything still fits. Every transaction that adds or drops a
claim (or unmanaged usage) ends with ``refresh_usage`` on the hypervisors it touched, which
re-sums their usage from the rows and moves their generation: the hypervisor row's usage
summary, which the scheduler reads, is never computed any other way.
"""

from __future__ import annotations

import datetime as dt
import functools
import uuid as uuidlib
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import bindparam, case, delete, func, insert, select, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError, OperationalError

from ansible_collections.berth.fleet.plugins.module_utils.errors import (
    BerthError,
    InputError,
    LedgerError,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler import rules
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import ExactRequest, take
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
    Flavor,
    HostState,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import FILTERS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
    DEFAULT_PROJECT_ID,
    RequestSpec,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import artefacts, host_rules, server_groups
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.database import (
    driver_execute,
    insert_skipping,
    utcnow,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.host_states import (
    locked_views,
    with_exact_facts,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import (
    ACTIVE,
    BUILDING,
    ERROR,
    PLACED_STATES,
    claim_dict,
    claims,
    hypervisors,
    instance_dict,
    instance_user_data,
    instances,
    server_group_members,
    unmanaged_usage,
    volumes,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import server_groups as server_groups_table

# The filters a claim re-checks: the resources. Group policy is re-checked by server_groups.violation.
CLAIM_CHECK_FILTERS = ("RamFilter", "CoreFilter", "DiskFilter")
DEFAULT_LEASE_S = 3600


def instance_listing(db: Connection, names: Iterable[str] | None = None,
                     launch: str | None = None, hypervisor_uuids: Iterable[str] | None = None,
                     states: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Instances by name (``names``), or those of a launch (``launch``: the name itself and
    ``<launch>-<index>``), or those on ``hypervisor_uuids``, in ``states``, or all, by name; each
    with the URI of its hypervisor's last sync (``uri``)."""
    query = (select(instances, hypervisors.c.uri)
             .outerjoin(hypervisors, hypervisors.c.uuid == instances.c.hypervisor_uuid)
             .order_by(instances.c.name))
    if names is not None:
        query = query.where(instances.c.name.in_(list(names)))
    if hypervisor_uuids is not None:
        query = query.where(instances.c.hypervisor_uuid.in_(list(hypervisor_uuids)))
    if states is not None:
        query = query.where(instances.c.state.in_(list(states)))
    if launch is not None:
        query = query.where((instances.c.name == launch)
                            | instances.c.name.startswith(f"{launch}-", autoescape=True))
    return [{**instance_dict(row._mapping), "uri": row.uri} for row in db.execute(query)]


class ClaimConflict(BerthError):
    """A host no longer had room (or the group's policy no longer allowed it) when the claim
    re-checked it; decide again with fresh usage."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"{host}: {reason}")
        self.host = host
        self.reason = reason


class ClaimLost(LedgerError):
    """The instance no longer holds the claim its build ran under: a sync released it when its
    lease expired. Whatever the build made must go."""


def instance_flavor(instance: Mapping[str, Any]) -> Flavor:
    """The flavor an instance (``instance_dict``) was built with: the one its recorded request
    holds (extra specs included), else the sizes of its row."""
    recorded = (instance.get("request") or {}).get("flavor")
    if recorded is not None:
        return Flavor.from_dict(recorded)
    return Flavor(name=instance["flavor"], vcpus=instance["vcpus"], memory_mb=instance["memory_mb"],
                  root_gb=instance["root_gb"], ephemeral_gb=instance["ephemeral_gb"], swap=instance["swap"])


def _usage_statement() -> Any:
    """The UPDATE that re-sums the usage of the hypervisors bound to ``uuids`` from their rows
    and moves their generation: one pass over each hypervisor's claims, unmanaged usage and
    data volumes for all five sums. A data volume's row is its claim: its size is used disk,
    and it is no instance; a shared pool's volume is charged to no hypervisor's disk. Built once, as text: it is the same on SQLite and PostgreSQL, and it
    runs in every claim."""
    return text("""
        UPDATE hypervisors SET (vcpus_used, memory_mb_used, disk_mb_used, num_instances, num_io_ops) = (
            SELECT COALESCE(SUM(used.vcpus), 0), COALESCE(SUM(used.memory_mb), 0), COALESCE(SUM(used.disk_mb), 0),
                   COALESCE(SUM(used.instance), 0), COALESCE(SUM(used.building), 0)
            FROM (SELECT vcpus, memory_mb, disk_mb,
                         CASE WHEN lease_expires_at IS NULL THEN 0 ELSE 1 END AS building, 1 AS instance
                  FROM claims WHERE claims.hypervisor_uuid = hypervisors.uuid
                  UNION ALL
                  SELECT vcpus, memory_mb, disk_mb, 0, 1 FROM unmanaged_usage
                  WHERE unmanaged_usage.hypervisor_uuid = hypervisors.uuid
                  UNION ALL
                  SELECT 0, 0, size_gb * 1024, 0, 0 FROM volumes
                  WHERE volumes.hypervisor_uuid = hypervisors.uuid AND NOT volumes.shared) AS used),
            generation = generation + 1
        WHERE uuid IN :uuids""").bindparams(bindparam("uuids", expanding=True))


_REFRESH_USAGE = _usage_statement()
_INSTANCES_NAMED = select(instances.c.uuid, instances.c.name, instances.c.state).where(
    instances.c.name.in_(bindparam("names", expanding=True)))
_INSERT_CLAIM = insert(claims).returning(claims.c.id)


def refresh_usage(db: Connection, hv_uuids: Iterable[str]) -> None:
    """Re-sum the usage of these hypervisors from their claims and unmanaged usage, and move
    their generation (it moves whenever capacity or usage does)."""
    uuids = sorted(set(hv_uuids))
    if uuids:
        driver_execute(db, _REFRESH_USAGE, {"uuids": uuids})


@functools.lru_cache(maxsize=64)
def _one_of_sizes(name: str, vcpus: int, memory_mb: int, root_gb: int, ephemeral_gb: int, swap: int) -> RequestSpec:
    return RequestSpec(flavor=Flavor(name=name, vcpus=vcpus, memory_mb=memory_mb, root_gb=root_gb,
                                     ephemeral_gb=ephemeral_gb, swap=swap), count=1)


def _one_of(flavor: Flavor) -> RequestSpec:
    """A request for one instance of ``flavor``, what a claim's re-check asks the filters; made
    once per size in a process (a claimer makes thousands, and a RequestSpec checks itself)."""
    return _one_of_sizes(flavor.name, flavor.vcpus, flavor.memory_mb, flavor.root_gb, flavor.ephemeral_gb, flavor.swap)


def check_room(view: HostState, spec: RequestSpec, host: str) -> None:
    """Whether ``view`` still takes one instance of ``spec``'s flavor, by the engine's own filters."""
    for name in CLAIM_CHECK_FILTERS:
        rejection = FILTERS[name]().host_passes(view, spec)
        if rejection is not None:
            raise ClaimConflict(host, rejection.message())


class ClaimGuard:
    """What keeps concurrent claims from sharing out the same room: the chosen hypervisors'
    rows locked, then each host's room and the group's hard policy re-checked under the locks.

    ``claim`` reaches it through ``CLAIM_GUARD`` only so that Berth's concurrency test can
    replace it, in its own ansible-playbook process, by one that checks nothing, and so prove
    that the race is real without it (tests/integration/callback_plugins/berth_test_hooks.py).
    Nothing in the collection replaces it, and no setting or environment variable does."""

    def views(self, db: Connection, hv_uuids: Iterable[str]) -> dict[str, tuple[HostState, int]]:
        return locked_views(db, hv_uuids)

    def check_room(self, view: HostState, spec: RequestSpec, flavor: Flavor, host: str) -> None:
        """Raise ClaimConflict unless ``view`` takes one more ``flavor``; then take it from
        ``view``, so that the request's next instance on that host sees it gone."""
        check_room(view, spec, host)
        view.consume(flavor)

    def check_group(self, db: Connection, group: Any, new_hosts: Sequence[str]) -> None:
        _check_group(db, group, new_hosts)

    def check_rules(self, db: Connection, entries: Sequence[Mapping[str, Any]]) -> None:
        _check_rules(db, entries)

    def take_exact(self, view: HostState, request: ExactRequest, host: str) -> dict[str, Any]:
        """The CPUs, cells, pages and devices ``view`` still gives one instance of ``request``
        (ClaimConflict with the reason otherwise), taken from ``view`` for the next one."""
        return take_exact(view, request, host)


CLAIM_GUARD = ClaimGuard()


def take_exact(view: HostState, request: ExactRequest, host: str) -> dict[str, Any]:
    """Fit ``request`` on ``view`` (with_exact_facts read what it holds) and take it: the
    assignment the claim records, or ClaimConflict naming what was short."""
    assignment, reason = take(view, request)
    if assignment is None:
        raise ClaimConflict(host, reason or "no room for its NUMA cells or devices")
    return assignment


def claim(db: Connection, placements: Sequence[Mapping[str, Any]], flavor: Flavor, owner: str,
          lease_s: int, server_group: str | None, image: str | None,
          request: Mapping[str, Any] | None = None, exact: ExactRequest | None = None,
          ha: bool = False, ha_priority: int = 0, user_data: str | None = None,
          launch_volumes: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
          pool: str | None = None) -> list[dict[str, Any]]:
    """Ledger.claim's transaction (see there). Claims are the ledger's hottest write: rows are
    written as plain column values on the driver's cursor (database.driver_execute), two
    statements per instance and one usage update for the request."""
    guard = CLAIM_GUARD
    now = utcnow()
    spec = _one_of(flavor)
    try:
        group = server_groups.lock(db, server_group) if server_group else None
        views = guard.views(db, [p["hypervisor_uuid"] for p in placements])
        if exact is not None:
            with_exact_facts(db, views)
        new, moved, taken = [], [], []
        for placement in placements:
            hv_uuid = placement["hypervisor_uuid"]
            if hv_uuid not in views:
                raise ClaimConflict(placement["host"], "not in the ledger (no facts synced)")
            view, generation = views[hv_uuid]
            guard.check_room(view, spec, flavor, placement["host"])
            take_volumes_room(view, (launch_volumes or {}).get(placement["name"], ()))
            taken.append(guard.take_exact(view, exact, placement["host"]) if exact is not None else None)
            new.append({
                "uuid": str(uuidlib.uuid4()), "name": placement["name"], "flavor_name": flavor.name,
                "vcpus": flavor.vcpus, "memory_mb": flavor.memory_mb, "root_gb": flavor.root_gb,
                "ephemeral_gb": flavor.ephemeral_gb, "swap": flavor.swap, "image": image,
                "hypervisor_uuid": hv_uuid, "host": view.host, "state": BUILDING, "failure_reason": None,
                "missing_since": None, "created_at": now, "updated_at": now,
                "project_id": placement.get("project_id") or DEFAULT_PROJECT_ID,
                "image_properties": dict(placement.get("image_properties") or {}) or None,
                "request": dict(request) if request is not None else None, "ha": ha, "ha_priority": ha_priority})
            moved.append(placement.get("generation") is not None and placement["generation"] != generation)
        guard.check_rules(db, [{"name": instance["name"], "server_group": server_group,
                                "labels": host_rules.request_labels(request), "hypervisor_uuid": instance["hypervisor_uuid"],
                                "host": instance["host"]} for instance in new])
        _insert_instances(db, new, placements)
        if launch_volumes:
            _insert_launch_volumes(db, new, launch_volumes, pool, owner, now)
        if user_data is not None:
            db.execute(insert(instance_user_data), [{"instance_uuid": instance["uuid"], "user_data": user_data}
                                                    for instance in new])
        claim_ids = [
            driver_execute(db, _INSERT_CLAIM, claim_columns(
                instance["uuid"], instance["hypervisor_uuid"], flavor, owner, lease_s, now, assignment)).fetchall()[0][0]
            for instance, assignment in zip(new, taken)]
        if group is not None:
            guard.check_group(db, group, [p["host"] for p in placements])
            db.execute(insert(server_group_members),
                       [{"group_uuid": group.uuid, "instance_uuid": instance["uuid"]} for instance in new])
        refresh_usage(db, views)
        return [{**instance_dict(instance), "claim_id": claim_id, "generation_moved": generation_moved,
                 "assignment": assignment}
                for instance, claim_id, generation_moved, assignment in zip(new, claim_ids, moved, taken)]
    except IntegrityError as exc:
        # Another run inserted one of these names between our read and our write.
        raise ClaimConflict(placements[0]["host"] if placements else "-",
                            f"an instance of this launch was created meanwhile ({exc.orig})") from exc
    except OperationalError as exc:
        # PostgreSQL broke a lock cycle with another transaction: a lost race like any other.
        if "deadlock detected" not in str(exc.orig):
            raise
        raise ClaimConflict(placements[0]["host"] if placements else "-", "deadlock, decide again") from exc


def take_volumes_room(view: HostState, rows: Sequence[Mapping[str, Any]]) -> None:
    """ClaimConflict unless ``view`` has room for the launch volumes ``rows`` beside the
    instance it took already; then take it, for the request's next instance there."""
    needed_mb = 1024 * sum(row["size_gb"] for row in rows)
    if needed_mb:
        check_disk(view, needed_mb, f"its volumes ({needed_mb} MB) beside its disks")
        view.free_disk_mb -= needed_mb


def _insert_launch_volumes(db: Connection, new: Sequence[Mapping[str, Any]],
                           launch_volumes: Mapping[str, Sequence[Mapping[str, Any]]], pool: str | None,
                           owner: str, now: dt.datetime) -> None:
    """The volumes each new instance's build makes with it, recorded as attached to it (and so
    claimed on its host); a name the ledger has already is refused, naming the launch's option."""
    rows = [{"name": row["name"], "hypervisor_uuid": instance["hypervisor_uuid"], "pool": pool,
             "size_gb": row["size_gb"], "instance_uuid": instance["uuid"], "target": row["target"], "owner": owner,
             "created_at": now, "shared": False, "delete_on_termination": row["delete_on_termination"]}
            for instance in new for row in launch_volumes.get(instance["name"], ())]
    if not rows:
        return
    if not pool:
        raise LedgerError("a launch's volumes need the storage pool they are made in")
    taken = db.execute(select(volumes.c.name, hypervisors.c.name).join(
        hypervisors, hypervisors.c.uuid == volumes.c.hypervisor_uuid).where(
        volumes.c.name.in_([row["name"] for row in rows]))).first()
    if taken is not None:
        raise InputError("volumes", f"volume {taken[0]} (on {taken[1]}) is in the ledger already: delete it "
                                    f"(berth.fleet.volume state=absent) or give the launch's volume another name")
    db.execute(insert(volumes), rows)


def drop_unbuilt_volumes(db: Connection, instance: Mapping[str, Any]) -> list[str]:
    """A launch that never built ``instance`` (a ledger row, BUILDING without a build record)
    gave up on it: the volumes its claim recorded for it were never made for good (the build, or
    the sync that settles a dead one, removes their files as artefacts), so their rows go.
    Returns the hypervisors whose usage changed (the caller refreshes them)."""
    if instance["state"] != BUILDING or (instance["request"] or {}).get("build"):
        return []
    return db.execute(delete(volumes).where(volumes.c.instance_uuid == instance["uuid"])
                      .returning(volumes.c.hypervisor_uuid)).scalars().all()


def _insert_instances(db: Connection, new: Sequence[Mapping[str, Any]],
                      placements: Sequence[Mapping[str, Any]]) -> None:
    """Insert the new instance rows; a name already taken by an instance in ERROR is taken over
    (that instance is replaced), by any other it is a lost race (ClaimConflict)."""
    skipping = insert_skipping(db.dialect.name, instances, "name")
    taken = [instance for instance in new if not driver_execute(db, skipping, instance).fetchall()]
    if not taken:
        return
    hosts = {placement["name"]: placement["host"] for placement in placements}
    for uuid, name, state in db.execute(_INSTANCES_NAMED, {"names": [entry["name"] for entry in taken]}):
        if state != ERROR:
            raise ClaimConflict(hosts[name], f"instance {name} was launched meanwhile")
        # An ERROR instance holds no claim; its group membership goes with it (ON DELETE CASCADE),
        # and its volumes are attached to none.
        detach_volumes(db, [uuid])
        db.execute(delete(instances).where(instances.c.uuid == uuid))
    db.execute(insert(instances), taken)


def ha_listing(db: Connection, states: Sequence[str], ha_only: bool = True) -> list[dict[str, Any]]:
    """Ledger.ha_instances's read (Ledger.placed_instances's with ``ha_only`` false): one query,
    the group and the hypervisor's URI joined."""
    query = (select(instances, server_groups_table.c.name.label("group_name"), hypervisors.c.uri)
             .outerjoin(server_group_members, server_group_members.c.instance_uuid == instances.c.uuid)
             .outerjoin(server_groups_table, server_groups_table.c.uuid == server_group_members.c.group_uuid)
             .outerjoin(hypervisors, hypervisors.c.uuid == instances.c.hypervisor_uuid)
             .where(instances.c.state.in_(list(states)), instances.c.hypervisor_uuid.is_not(None))
             .order_by(instances.c.ha_priority.desc(), instances.c.name))
    if ha_only:
        query = query.where(instances.c.ha.is_(True))
    return [{**instance_dict(row._mapping), "server_group": row.group_name, "uri": row.uri}
            for row in db.execute(query)]


def set_ha(db: Connection, name: str, ha: bool | None,
           ha_priority: int | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Ledger.set_instance_ha's write."""
    row = db.execute(select(instances).where(instances.c.name == name)).first()
    if row is None:
        raise LedgerError(f"no instance named {name!r} in the ledger")
    before = instance_dict(row._mapping)
    wanted = {key: value for key, value in (("ha", ha), ("ha_priority", ha_priority))
              if value is not None and value != before[key]}
    if wanted:
        db.execute(update(instances).where(instances.c.uuid == before["uuid"]).values(**wanted, updated_at=utcnow()))
    return before, {**before, **wanted}


def _check_group(db: Connection, group: Any, new_hosts: Sequence[str], moving: str | None = None) -> None:
    broken = server_groups.violation(db, group, new_hosts, moving)
    if broken is not None:
        raise ClaimConflict(*broken)


def _check_rules(db: Connection, entries: Sequence[Mapping[str, Any]]) -> None:
    """ClaimConflict unless every instance of ``entries`` keeps the hard host rules where it is
    claimed (host_rules.violation), read in this transaction: a rule written since the decision
    holds too."""
    broken = host_rules.violation(db, entries)
    if broken is not None:
        raise ClaimConflict(*broken)


def claim_instance_on(db: Connection, instance_uuid: str, hv_uuid: str, owner: str, lease_s: int,
                      keep_others: bool, host: str | None = None, flavor: Flavor | None = None,
                      exact: ExactRequest | None = None) -> dict[str, Any]:
    """A new claim for an existing instance, locked (its group, then the hypervisor) and
    re-checked as ``claim`` does; unless ``keep_others``, its other claims are given back first.
    The claim is for the instance's flavor, or ``flavor`` (the new one of a resize), and takes
    the exact CPUs, cells, pages and devices of ``exact`` there."""
    now = utcnow()
    instance = find_instance(db, instance_uuid)
    group_uuid = db.execute(select(server_group_members.c.group_uuid)
                            .where(server_group_members.c.instance_uuid == instance_uuid)).scalar()
    group = server_groups.lock_uuid(db, group_uuid) if group_uuid is not None else None
    old_claims = db.execute(select(claims.c.id, claims.c.hypervisor_uuid)
                            .where(claims.c.instance_uuid == instance_uuid)).all()
    if keep_others and hv_uuid == instance["hypervisor_uuid"]:
        raise InputError("host", f"instance {instance['name']} already runs on {instance['host']}")
    # Every hypervisor this touches is locked first, in UUID order, as a claim locks them.
    locked_views(db, {hv_uuid, *(old.hypervisor_uuid for old in old_claims)})
    if not keep_others and old_claims:
        db.execute(delete(claims).where(claims.c.id.in_([old.id for old in old_claims])))
        refresh_usage(db, [old.hypervisor_uuid for old in old_claims])
    views = locked_views(db, [hv_uuid])
    if hv_uuid not in views:
        raise ClaimConflict(host or hv_uuid, "not in the ledger (no facts synced)")
    view, _generation = views[hv_uuid]
    flavor = flavor or instance_flavor(instance_dict(instance))
    check_room(view, _one_of(flavor), view.host)
    moving_mb = _attached_volumes_mb(db, instance_uuid, hv_uuid)
    if moving_mb:
        # A move carries its attached volumes, whose claims follow it there (finish_move); a
        # retry on an alternate, the volumes its launch makes with it (claim_alternate).
        needed_mb = flavor.requested_disk_mb + moving_mb
        check_disk(view, needed_mb, f"its disks and its attached volumes ({needed_mb} MB)")
    # Its pinned CPUs, cells and devices are fitted anew on the destination, as Nova's
    # migration claims do: the source's numbers mean nothing there.
    assignment = None
    if exact is not None:
        with_exact_facts(db, views)
        assignment = take_exact(view, exact, view.host)
    if group is not None:
        _check_group(db, group, [view.host], moving=instance_uuid)
    _check_rules(db, [{"name": instance["name"], "server_group": group.name if group is not None else None,
                       "labels": host_rules.request_labels(instance["request"]), "hypervisor_uuid": hv_uuid,
                       "host": view.host}])
    columns = claim_columns(instance_uuid, hv_uuid, flavor, owner, lease_s, now, assignment)
    claim_id = db.execute(_INSERT_CLAIM, columns).scalar_one()
    refresh_usage(db, [hv_uuid])
    return claim_dict({**columns, "id": claim_id}, view.host)


def claim_alternate(db: Connection, instance_uuid: str, host: str, hv_uuid: str, owner: str,
                    lease_s: int, exact: ExactRequest | None = None) -> dict[str, Any]:
    """Ledger.claim_alternate's transaction (see there)."""
    held = db.execute(select(claims.c.assignment).where(claims.c.instance_uuid == instance_uuid)).scalars().all()
    if exact is None and any(assignment is not None for assignment in held):
        # Without the request, the alternate would get none of what the first host gave it.
        raise ClaimConflict(host, "the instance holds pinned CPUs, NUMA cells, pages or devices, and this "
                                  "retry was not given their request to fit them there")
    claim = claim_instance_on(db, instance_uuid, hv_uuid, owner, lease_s, keep_others=False, host=host, exact=exact)
    # The volumes its launch makes with it (none made yet: every failed attempt removes its own),
    # for which the claim found room there, are claimed there now.
    left = volumes_follow(db, instance_uuid, hv_uuid)
    if left:
        refresh_usage(db, {hv_uuid, *left})
    moved = {"hypervisor_uuid": hv_uuid, "host": claim["host"], "state": BUILDING, "failure_reason": None,
             "updated_at": utcnow()}
    db.execute(update(instances).where(instances.c.uuid == instance_uuid).values(moved))
    return {**instance_dict({**find_instance(db, instance_uuid), **moved}), "claim_id": claim["id"],
            "assignment": claim["assignment"]}


def finish_move(db: Connection, instance_uuid: str, claim_id: int, flavor: Flavor | None = None) -> dict[str, Any]:
    """Ledger.finish_move's transaction (see there)."""
    instance = find_instance(db, instance_uuid)
    target = db.execute(select(claims).where(claims.c.id == claim_id)).first()
    if target is None or target.instance_uuid != instance_uuid:
        raise LedgerError(f"claim {claim_id} is not a claim of instance {instance['name']}")
    name = db.execute(select(hypervisors.c.name).where(hypervisors.c.uuid == target.hypervisor_uuid)).scalar_one()
    others = db.execute(select(claims.c.id, claims.c.hypervisor_uuid).where(
        claims.c.instance_uuid == instance_uuid, claims.c.id != claim_id)).all()
    if others:
        db.execute(delete(claims).where(claims.c.id.in_([other.id for other in others])))
    now = utcnow()
    moved = {"hypervisor_uuid": target.hypervisor_uuid, "host": name, "missing_since": None, "updated_at": now}
    if target.hypervisor_uuid != instance["hypervisor_uuid"]:
        # The rebalancer's cooldown counts from here.
        moved["moved_at"] = now
    if flavor is not None:
        moved.update(flavor_columns(flavor))
        if instance["request"] is not None:
            # A resize: the recorded request asks for the new flavor from now on, as Nova's does.
            moved["request"] = {**instance["request"], "flavor": flavor.to_dict()}
    db.execute(update(instances).where(instances.c.uuid == instance_uuid).values(moved))
    if flavor is not None:
        db.execute(update(claims).where(claims.c.id == claim_id).values(claim_amounts(flavor)))
    if instance["state"] != BUILDING:
        # Nothing is being built: the claim holds for good (a stopped instance's too, as in Nova).
        db.execute(update(claims).where(claims.c.id == claim_id).values(lease_expires_at=None))
    # Whatever an earlier failed build of it recorded there is the instance's own now.
    artefacts.drop(db, instance_uuid, target.hypervisor_uuid)
    # Its attached volumes moved with its disks: their claims follow.
    left = volumes_follow(db, instance_uuid, target.hypervisor_uuid)
    refresh_usage(db, {target.hypervisor_uuid, *left, *(other.hypervisor_uuid for other in others)})
    return instance_dict({**instance, **moved})


def resize_in_place(db: Connection, instance_uuid: str, flavor: Flavor, owner: str, lease_s: int,
                    exact: ExactRequest | None = None) -> dict[str, Any]:
    """Ledger.resize_claim's transaction (see there)."""
    instance = find_instance(db, instance_uuid)
    held = db.execute(select(claims).where(claims.c.instance_uuid == instance_uuid)).all()
    if len(held) != 1 or held[0].hypervisor_uuid != instance["hypervisor_uuid"]:
        raise LedgerError(f"instance {instance['name']} holds {len(held)} claim(s), not one on {instance['host']}: "
                          f"a move of it is under way, or one died; run playbooks/gather.yml")
    [own] = held
    if own.assignment is not None or exact is not None:
        # Its pinned CPUs, cells or devices would have to be held twice on one host while it
        # changes size; Berth re-fits them on another host instead (a resize that moves).
        raise InputError("flavor", f"instance {instance['name']} holds or asks for NUMA cells, dedicated CPUs, "
                                   f"huge pages or devices: resize it onto another host, not on {instance['host']}")
    views = locked_views(db, [own.hypervisor_uuid])
    if own.hypervisor_uuid not in views:
        raise ClaimConflict(instance["host"] or own.hypervisor_uuid, "not in the ledger (no facts synced)")
    view, _generation = views[own.hypervisor_uuid]
    view.release(own.vcpus, own.memory_mb, own.disk_mb)
    # Until the domain runs with its new size, the claim holds the larger of the two sizes in
    # each resource, so that whichever the host ends up running, nobody else took its room.
    during = larger_flavor(flavor, instance_flavor(instance_dict(instance)))
    check_room(view, _one_of(during), view.host)
    now = utcnow()
    values = {**claim_amounts(during), "owner": owner, "lease_expires_at": now + dt.timedelta(seconds=lease_s)}
    db.execute(update(claims).where(claims.c.id == own.id).values(values))
    refresh_usage(db, [own.hypervisor_uuid])
    return claim_dict({**own._mapping, **values}, view.host)


def resize_claim_to(db: Connection, claim_id: int, flavor: Flavor) -> dict[str, Any]:
    """Ledger.restore_claim's transaction (see there)."""
    row = db.execute(select(claims).where(claims.c.id == claim_id)).first()
    if row is None:
        raise LedgerError(f"claim {claim_id} is not in the ledger")
    amounts = claim_amounts(flavor)
    grown = [name for name, value in amounts.items() if value > getattr(row, name)]
    if grown:
        # More than it holds would need the re-check under lock that resize_claim does.
        raise LedgerError(f"claim {claim_id} holds less {', '.join(grown)} than {flavor.name} asks: not a restore")
    values = {**amounts, "lease_expires_at": None}
    db.execute(update(claims).where(claims.c.id == claim_id).values(values))
    refresh_usage(db, [row.hypervisor_uuid])
    return claim_dict({**row._mapping, **values})


def set_state(db: Connection, instance_uuid: str, state: str) -> tuple[dict[str, Any], bool]:
    """Ledger.set_instance_state's transaction (see there)."""
    if state not in PLACED_STATES:
        raise LedgerError(f"{state} is not a state a power action sets (one of {', '.join(PLACED_STATES)})")
    instance = find_instance(db, instance_uuid)
    if instance["state"] not in PLACED_STATES:
        raise LedgerError(f"instance {instance['name']} is {instance['state']}: only "
                          f"{', '.join(PLACED_STATES)} instances change their power state")
    if instance["state"] == state:
        return instance_dict(instance), False
    values = {"state": state, "updated_at": utcnow()}
    db.execute(update(instances).where(instances.c.uuid == instance_uuid).values(values))
    return instance_dict({**instance, **values}), True


def release_claim(db: Connection, claim_id: int) -> bool:
    hv_uuid = db.execute(delete(claims).where(claims.c.id == claim_id).returning(claims.c.hypervisor_uuid)).scalar()
    if hv_uuid is None:
        return False
    refresh_usage(db, [hv_uuid])
    return True


def release(db: Connection, claim_row: Any, reason: str, now: dt.datetime) -> None:
    """Drop a claim; an instance left without any claim is ERROR with ``reason``. The caller
    refreshes the hypervisor's usage."""
    db.execute(delete(claims).where(claims.c.id == claim_row.id))
    left = db.execute(select(func.count(claims.c.id)).where(claims.c.instance_uuid == claim_row.instance_uuid)).scalar()
    if not left:
        drop_unbuilt_volumes(db, find_instance(db, claim_row.instance_uuid))
        db.execute(update(instances).where(instances.c.uuid == claim_row.instance_uuid).values(
            state=ERROR, failure_reason=reason, updated_at=now))


def mark_active(db: Connection, instance_uuid: str, built: Mapping[str, Any] | None = None) -> dict[str, Any]:
    instance = find_instance(db, instance_uuid)
    held = db.execute(update(claims).where(claims.c.instance_uuid == instance_uuid,
                                           claims.c.hypervisor_uuid == instance["hypervisor_uuid"])
                      .values(lease_expires_at=None))
    if held.rowcount == 0:
        # A sync released the claim: the lease ran out while the build ran. An ACTIVE instance
        # without a claim would take room nobody counts.
        raise ClaimLost(f"instance {instance['name']} no longer holds its claim on {instance['host']} "
                        f"({instance['failure_reason'] or 'released'}); its build is given up")
    active: dict[str, Any] = {"state": ACTIVE, "failure_reason": None, "updated_at": utcnow()}
    if built is not None:
        active["request"] = {**(instance["request"] or {}), "build": dict(built)}
    db.execute(update(instances).where(instances.c.uuid == instance_uuid).values(active))
    # A build that succeeded there: as Nova's compute manager does, its failed builds are forgiven.
    db.execute(update(hypervisors).where(hypervisors.c.uuid == instance["hypervisor_uuid"],
                                         hypervisors.c.failed_builds != 0).values(failed_builds=0))
    artefacts.drop(db, instance_uuid, instance["hypervisor_uuid"])
    refresh_usage(db, [instance["hypervisor_uuid"]])  # no longer an io op
    return instance_dict({**instance, **active})


def hold_on_own_claim(db: Connection, instance_uuid: str, state: str, reason: str, verb: str) -> dict[str, Any]:
    """Ledger.start_rebuild's and Ledger.rescue's transaction: the instance, on the one claim it
    holds on its own host (no lease), is ``state`` with ``reason``; refused, saying that it
    cannot be ``verb``, for any other."""
    instance = find_instance(db, instance_uuid)
    held = db.execute(select(claims.c.hypervisor_uuid, claims.c.lease_expires_at, claims.c.owner)
                      .where(claims.c.instance_uuid == instance_uuid)).all()
    if [claim.hypervisor_uuid for claim in held] != [instance["hypervisor_uuid"]] or instance["hypervisor_uuid"] is None:
        raise BerthError(f"{instance['name']} cannot be {verb}: it holds {len(held)} claim(s), not the one on its "
                         f"host {instance['host']} (it is being built or moved, or lost its claim)")
    if held[0].lease_expires_at is not None:
        raise BerthError(f"{instance['name']} cannot be {verb}: {held[0].owner} is building, moving or resizing it")
    values = {"state": state, "failure_reason": reason, "updated_at": utcnow()}
    db.execute(update(instances).where(instances.c.uuid == instance_uuid).values(values))
    return instance_dict({**instance, **values})


def finish_rebuild(db: Connection, instance_uuid: str, request: Mapping[str, Any], image: str | None,
                   image_properties: Mapping[str, Any]) -> dict[str, Any]:
    """Ledger.finish_rebuild's transaction (see there)."""
    db.execute(update(instances).where(instances.c.uuid == instance_uuid).values(
        request=dict(request), image=image, image_properties=dict(image_properties) or None))
    return mark_active(db, instance_uuid)


def build_failed(db: Connection, instance_uuid: str) -> int:
    """Ledger.build_failed's transaction (see there)."""
    hv_uuid = find_instance(db, instance_uuid)["hypervisor_uuid"]
    if hv_uuid is None:
        return 0
    db.execute(update(hypervisors).where(hypervisors.c.uuid == hv_uuid)
               .values(failed_builds=hypervisors.c.failed_builds + 1))
    return db.execute(select(hypervisors.c.failed_builds).where(hypervisors.c.uuid == hv_uuid)).scalar_one()


def mark_error(db: Connection, instance_uuid: str, reason: str) -> None:
    instance = find_instance(db, instance_uuid)
    now = utcnow()
    held = db.execute(select(claims).where(claims.c.instance_uuid == instance_uuid)).all()
    unbuilt_hosts = drop_unbuilt_volumes(db, instance)
    for claim_row in held:
        release(db, claim_row, reason, now)
    db.execute(update(instances).where(instances.c.uuid == instance_uuid).values(
        state=ERROR, failure_reason=reason, updated_at=now))
    refresh_usage(db, {*unbuilt_hosts, *(claim_row.hypervisor_uuid for claim_row in held)})


def delete_instance(db: Connection, instance_uuid: str, removed_artefacts: Iterable[int] = ()) -> bool:
    artefacts.forget(db, removed_artefacts)
    if db.execute(select(instances.c.uuid).where(instances.c.uuid == instance_uuid)).first() is None:
        return False
    # The group first, then hypervisors: the order a claim takes its locks in.
    db.execute(delete(server_group_members).where(server_group_members.c.instance_uuid == instance_uuid))
    touched = db.execute(delete(claims).where(claims.c.instance_uuid == instance_uuid)
                         .returning(claims.c.hypervisor_uuid)).scalars().all()
    # Those its launch marked delete_on_termination go with it (the caller removed their files);
    # the others stay, attached to none (Nova detaches them), still claimed on their host.
    touched += db.execute(delete(volumes).where(volumes.c.instance_uuid == instance_uuid,
                                                volumes.c.delete_on_termination.is_(True))
                          .returning(volumes.c.hypervisor_uuid)).scalars().all()
    detach_volumes(db, [instance_uuid])
    db.execute(delete(instances).where(instances.c.uuid == instance_uuid))
    refresh_usage(db, touched)
    return True


def adopt_instance(db: Connection, host: str, domain_uuid: str, name: str, flavor: Flavor, owner: str,
                   dry_run: bool) -> tuple[dict[str, Any], bool]:
    """Ledger.adopt_instance's transaction (see there)."""
    now = utcnow()
    # A dry run may come before the hypervisor's first sync (check mode syncs nothing).
    row = find_hypervisor(db, host, missing_ok=dry_run)
    existing = db.execute(select(instances).where(instances.c.uuid == domain_uuid)).mappings().first()
    if existing is not None:
        if row is None or existing["hypervisor_uuid"] != row.uuid:
            raise InputError("domain", f"domain {domain_uuid} is instance {existing['name']} of the ledger, "
                                       f"which places it on {existing['host']}, not {row.name if row else host}")
        return instance_dict(existing), False
    taken = db.execute(select(instances.c.uuid, instances.c.host).where(instances.c.name == name)).first()
    if taken is not None:
        raise InputError("name", f"name {name} is already instance {taken.uuid} on {taken.host}; "
                                 f"pass another name")
    instance = {
        "uuid": domain_uuid, "name": name, "flavor_name": flavor.name, "vcpus": flavor.vcpus,
        "memory_mb": flavor.memory_mb, "root_gb": flavor.root_gb, "ephemeral_gb": flavor.ephemeral_gb,
        "swap": flavor.swap, "image": None, "hypervisor_uuid": row.uuid if row else None,
        "host": row.name if row else host, "state": ACTIVE, "failure_reason": None, "missing_since": None,
        "created_at": now, "updated_at": now, "project_id": DEFAULT_PROJECT_ID, "image_properties": None,
    }
    if row is None:
        return instance_dict(instance), True
    db.execute(insert(instances), instance)
    claim_id = db.execute(_INSERT_CLAIM, claim_columns(domain_uuid, row.uuid, flavor, owner, None, now)).scalar_one()
    db.execute(delete(unmanaged_usage).where(unmanaged_usage.c.hypervisor_uuid == row.uuid,
                                             unmanaged_usage.c.domain_uuid == domain_uuid))
    refresh_usage(db, [row.uuid])
    return {**instance_dict(instance), "claim_id": claim_id}, True


def claim_columns(instance_uuid: str, hv_uuid: str, flavor: Flavor, owner: str, lease_s: int | None,
                  now: dt.datetime, assignment: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A claim row's values: the flavor's amounts on ``hv_uuid``, held by ``owner`` with a lease
    of ``lease_s`` seconds, or none when nothing is being built, and the exact resources taken
    (``assignment``, None for an instance that asked for none)."""
    lease = None if lease_s is None else now + dt.timedelta(seconds=lease_s)
    return {"instance_uuid": instance_uuid, "hypervisor_uuid": hv_uuid, **claim_amounts(flavor), "owner": owner,
            "lease_expires_at": lease, "created_at": now,
            "assignment": dict(assignment) if assignment is not None else None}


def claim_amounts(flavor: Flavor) -> dict[str, int]:
    """What a claim of ``flavor`` holds, in the claim's columns."""
    return {"vcpus": flavor.vcpus, "memory_mb": flavor.memory_mb, "disk_mb": flavor.requested_disk_mb}


def flavor_columns(flavor: Flavor) -> dict[str, Any]:
    """An instance row's flavor columns."""
    return {"flavor_name": flavor.name, "vcpus": flavor.vcpus, "memory_mb": flavor.memory_mb,
            "root_gb": flavor.root_gb, "ephemeral_gb": flavor.ephemeral_gb, "swap": flavor.swap}


def larger_flavor(wanted: Flavor, other: Flavor) -> Flavor:
    """``wanted``, grown wherever ``other`` asks more: what a claim holds while an instance
    changes from one to the other."""
    return Flavor(name=wanted.name, vcpus=max(wanted.vcpus, other.vcpus),
                  memory_mb=max(wanted.memory_mb, other.memory_mb), root_gb=max(wanted.root_gb, other.root_gb),
                  ephemeral_gb=max(wanted.ephemeral_gb, other.ephemeral_gb), swap=max(wanted.swap, other.swap))


def find_instance(db: Connection, instance_uuid: str) -> dict[str, Any]:
    """The instance's row as a dict of its columns."""
    row = db.execute(select(instances).where(instances.c.uuid == instance_uuid)).mappings().first()
    if row is None:
        raise LedgerError(f"instance {instance_uuid} is not in the ledger")
    return dict(row)


def find_hypervisor(db: Connection, host: str, missing_ok: bool = False) -> Any:
    """A hypervisor's row by name or UUID, locked; bad input listing the known ones if there is none."""
    row = db.execute(
        select(hypervisors).where((hypervisors.c.name == host) | (hypervisors.c.uuid == host))
        .order_by(case((hypervisors.c.name == host, 0), else_=1)).with_for_update()
    ).first()
    if row is None and not missing_ok:
        known = ", ".join(db.execute(select(hypervisors.c.name).order_by(hypervisors.c.name)).scalars()) or "none"
        raise InputError("host", f"no hypervisor {host!r} in the ledger (known: {known}); run "
                                 f"playbooks/gather.yml to record the inventory's hypervisors")
    return row


def recorded_user_data(db: Connection, instance_uuid: str) -> str | None:
    """Ledger.user_data's read: the instance's user_data, None where it was launched without."""
    return db.execute(select(instance_user_data.c.user_data)
                      .where(instance_user_data.c.instance_uuid == instance_uuid)).scalar()


def check_disk(view: HostState, disk_mb: int, what: str) -> None:
    """ClaimConflict unless ``view`` has ``disk_mb`` more of disk, as DiskFilter counts it
    (``what`` names it in the reason)."""
    fit = rules.disk_fit(view.total_usable_disk_gb, view.free_disk_mb, view.disk_allocation_ratio, disk_mb)
    if fit.applies and (fit.larger_than_host or fit.short):
        raise ClaimConflict(view.host, f"no room for {what}: {max(fit.free, 0):.0f} MB left under its disk "
                                       f"allocation ratio {view.disk_allocation_ratio}")


def _attached_volumes_mb(db: Connection, instance_uuid: str, hv_uuid: str) -> int:
    """The size of the instance's attached volumes that are not on ``hv_uuid`` yet (a shared
    pool's are on every host already)."""
    return int(db.execute(select(func.coalesce(func.sum(volumes.c.size_gb), 0)).where(
        volumes.c.instance_uuid == instance_uuid, volumes.c.hypervisor_uuid != hv_uuid,
        volumes.c.shared.is_(False))).scalar_one()) * 1024


# Data volumes (volumes.py) as an instance's claims see them: they follow it, and are attached to
# none once it is gone.
def detach_volumes(db: Connection, instance_uuids: Iterable[str]) -> None:
    """The volumes attached to these instances (being deleted, or replaced) are attached to none."""
    wanted = list(instance_uuids)
    if wanted:
        db.execute(update(volumes).where(volumes.c.instance_uuid.in_(wanted)).values(
            instance_uuid=None, target=None, delete_on_termination=False))


def volumes_follow(db: Connection, instance_uuid: str, hv_uuid: str) -> list[str]:
    """The instance moved to ``hv_uuid``: its attached volumes moved with it. Returns the
    hypervisors whose usage changed (the caller refreshes them)."""
    sources = list(db.execute(select(volumes.c.hypervisor_uuid).where(
        volumes.c.instance_uuid == instance_uuid, volumes.c.hypervisor_uuid != hv_uuid)).scalars())
    if sources:
        db.execute(update(volumes).where(volumes.c.instance_uuid == instance_uuid).values(hypervisor_uuid=hv_uuid))
    return sources
