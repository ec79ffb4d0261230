"""What builds make on hypervisors (artefacts: volumes, domains), and what builds that died left.

A build records each volume and its domain here before it makes them (``record``), and only
while its instance holds a live claim on that hypervisor. The tracker sync then sorts every
Berth artefact of a hypervisor that answered - recorded here, or found there under a build's
name (volumes ``berth-<instance uuid>-...``) - by what its instance holds on that hypervisor:

- a claim without a lease: the instance runs there, the artefact is its own;
- a claim whose lease has not expired: a build in progress, never touched;
- no claim, and recorded as evacuated (``evacuated_at``): what an instance evacuated from this
  host left there. The sync removes it even where its domain runs: the instance runs elsewhere;
- no claim, and recorded: a leftover - of a build that died (its lease expired and the sync
  released its claim), of a build that moved on to another host after failing there, of a move
  whose source went away before its copy was removed, of an instance deleted or replaced by a
  relaunch. The sync removes it (unless told to keep it for inspection) and then forgets it;
  delete.yml removes it with its instance;
- no claim, and not recorded: an orphan volume. This ledger did not make it - another ledger's
  on a shared hypervisor, or older than these records -, so it is reported, never removed.

Rows are written before libvirt makes anything and forgotten only after libvirt removed it, so
a run that dies at any point leaves rows that the next sync or delete completes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import delete, insert, or_, select
from sqlalchemy.engine import Connection

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import volume_instance_uuid
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import (
    DOMAIN,
    VOLUME,
    artefact_dict,
    artefacts,
    claims,
    hypervisors,
    instances,
    iso,
)

A = artefacts.c
# The libvirt domain states in which a guest runs (libvirt's active domains, paused ones
# included): never removed by a sync. Here, not in libvirt_host, so that the ledger does not
# import libvirt (tens of milliseconds on every schedule); _power_states' RUNNING_STATES differ.
ACTIVE_DOMAIN_STATES = frozenset({"running", "blocked", "paused", "pmsuspended"})


def record(db: Connection, instance_uuid: str, host: str, items: Sequence[Mapping[str, Any]], owner: str,
           now: dt.datetime) -> str:
    """Ledger.record_artefacts' transaction (see there); returns the hypervisor's UUID."""
    held = db.execute(
        select(claims.c.hypervisor_uuid, claims.c.lease_expires_at, instances.c.name)
        .join(hypervisors, hypervisors.c.uuid == claims.c.hypervisor_uuid)
        .join(instances, instances.c.uuid == claims.c.instance_uuid)
        .where(claims.c.instance_uuid == instance_uuid, hypervisors.c.name == host)
        # The claim row is locked: a sync that releases it waits for this, or this for it.
        .with_for_update(of=claims)).first()
    if held is None:
        name = db.execute(select(instances.c.name).where(instances.c.uuid == instance_uuid)).scalar()
        raise BerthError(f"instance {name or instance_uuid} holds no claim on {host} (a sync released it when "
                         f"its lease expired, or its build moved on): nothing is built there")
    if held.lease_expires_at is not None and held.lease_expires_at < now:
        raise BerthError(f"the lease of instance {held.name}'s claim on {host} expired at "
                         f"{iso(held.lease_expires_at)}: a sync may release it at any moment, so nothing is built "
                         f"there (give launches a longer berth_lease_seconds)")
    _insert_new(db, held.hypervisor_uuid, instance_uuid, held.name, items, owner, now)
    return held.hypervisor_uuid


def _insert_new(db: Connection, hv_uuid: str, instance_uuid: str, instance_name: str,
                items: Sequence[Mapping[str, Any]], owner: str, now: dt.datetime) -> None:
    """Rows for those of ``items`` not recorded yet for this instance on this hypervisor."""
    have = {(row.kind, row.name) for row in db.execute(
        select(A.kind, A.name).where(A.instance_uuid == instance_uuid, A.hypervisor_uuid == hv_uuid))}
    new = [{"hypervisor_uuid": hv_uuid, "instance_uuid": instance_uuid, "instance_name": instance_name,
            "kind": item["kind"], "pool": item.get("pool"), "name": item["name"], "owner": owner, "created_at": now}
           for item in items if (item["kind"], item["name"]) not in have]
    if new:
        db.execute(insert(artefacts), new)


def found_on(state: Mapping[str, Any], instance_uuid: str) -> list[dict[str, Any]]:
    """The Berth artefacts of ``instance_uuid`` that a hypervisor's state shows: its domain and the
    pool volumes named after it."""
    found = [{"kind": DOMAIN, "pool": None, "name": dom["name"]}
             for dom in state.get("domains", []) if dom["uuid"] == instance_uuid]
    found += [{"kind": VOLUME, "pool": state.get("storage_pool"), "name": name}
              for name in state.get("instance_volumes", []) if volume_instance_uuid(name) == instance_uuid]
    return found


def record_found(db: Connection, state: Mapping[str, Any], instance_uuid: str, instance_name: str,
                 now: dt.datetime) -> None:
    """Record what a dead build of ``instance_uuid`` left on the hypervisor of ``state``, as far
    as the state shows it (a build of an older Berth recorded nothing), before the claim that
    protected it goes: whatever comes next, the next sync still knows to reclaim it."""
    items = found_on(state, instance_uuid)
    if items:
        _insert_new(db, state["uuid"], instance_uuid, instance_name, items, "tracker sync", now)


def drop(db: Connection, instance_uuid: str, hv_uuid: str) -> None:
    """The instance runs on that hypervisor: what its build recorded there is its own now."""
    db.execute(delete(artefacts).where(A.instance_uuid == instance_uuid, A.hypervisor_uuid == hv_uuid))


def forget(db: Connection, ids: Iterable[int]) -> int:
    """Forget these rows (their artefacts were removed); returns how many there were."""
    wanted = sorted(set(ids))
    if not wanted:
        return 0
    return len(db.execute(delete(artefacts).where(A.id.in_(wanted)).returning(A.id)).all())


def listing(db: Connection, instance_uuid: str | None = None, name: str | None = None) -> list[dict[str, Any]]:
    """Rows of an instance (``instance_uuid``) and of every earlier instance of its ``name``, or
    all, each with its hypervisor's name and URI."""
    query = (select(artefacts, hypervisors.c.name.label("host_name"), hypervisors.c.uri)
             .join(hypervisors, hypervisors.c.uuid == A.hypervisor_uuid).order_by(A.id))
    wanted = ([A.instance_uuid == instance_uuid] if instance_uuid is not None else []) + (
        [A.instance_name == name] if name is not None else [])
    if wanted:
        query = query.where(or_(*wanted))
    return [{**artefact_dict(row._mapping, row.host_name), "uri": row.uri} for row in db.execute(query)]


def sort_out(state: Mapping[str, Any], claimed: Iterable[str],
             rows: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """What is left of dead builds on one hypervisor, and its orphan volumes (pure).

    ``state``: the hypervisor's host state as just gathered (domains, instance_volumes,
    data_volumes, storage_pool); ``claimed``: the instances holding a claim on it now, whatever their lease
    (the sync has settled the expired ones); ``rows``: its artefact rows (``artefact_dict``).
    Returns the leftovers, one group per instance: {instance_uuid, instance_name, running,
    evacuated, items}, each item a row with ``present`` (True or False as the state shows it,
    None where the state cannot tell: a volume of another pool); ``running`` says that the
    instance's domain runs there, and then nothing of the group may be removed - unless
    ``evacuated``: the instance was evacuated from this host and runs elsewhere. Then the names of the
    volumes named after an instance that holds no claim there and that no row records.
    """
    claimed = set(claimed)
    domains = {dom["uuid"]: dom for dom in state.get("domains", [])}
    volumes = set(state.get("instance_volumes", []))
    # A launch's data volumes (berth-volume-<name>.qcow2) are recorded too: the state lists them apart.
    data_volumes = set(state.get("data_volumes", []))
    pool = state.get("storage_pool")
    groups: dict[str, dict[str, Any]] = {}
    recorded = set()
    for row in rows:
        recorded.add((row["pool"], row["name"]))
        if row["instance_uuid"] in claimed:
            continue
        group = groups.setdefault(row["instance_uuid"], {
            "instance_uuid": row["instance_uuid"], "instance_name": row["instance_name"],
            "running": domains.get(row["instance_uuid"], {}).get("state") in ACTIVE_DOMAIN_STATES,
            "evacuated": False, "items": []})
        group["evacuated"] = group["evacuated"] or row.get("evacuated_at") is not None
        if row["kind"] == DOMAIN:
            present = row["instance_uuid"] in domains
        else:
            present = row["name"] in volumes | data_volumes if row["pool"] == pool else None
        group["items"].append({**row, "present": present})
    orphans = [name for name in sorted(volumes)
               if volume_instance_uuid(name) not in claimed and (pool, name) not in recorded]
    return [groups[key] for key in sorted(groups, key=lambda key: groups[key]["instance_name"])], orphans


def why_left(db: Connection, groups: Sequence[dict[str, Any]], hv_uuid: str) -> None:
    """Say in each group what became of its instance (``why``), from the ledger."""
    uuids = [group["instance_uuid"] for group in groups]
    names = [group["instance_name"] for group in groups]
    if not groups:
        return
    rows = db.execute(select(instances.c.uuid, instances.c.name, instances.c.state, instances.c.host,
                             instances.c.hypervisor_uuid, instances.c.failure_reason)
                      .where(instances.c.uuid.in_(uuids) | instances.c.name.in_(names))).all()
    by_uuid = {row.uuid: row for row in rows}
    by_name = {row.name: row for row in rows}
    for group in groups:
        instance = by_uuid.get(group["instance_uuid"])
        name = group["instance_name"]
        if instance is None:
            later = by_name.get(name)
            group["why"] = (f"instance {name} was replaced by a relaunch, now {later.uuid}" if later is not None
                            else f"instance {name} was deleted")
        elif instance.hypervisor_uuid != hv_uuid and group.get("evacuated"):
            group["why"] = f"{name} was evacuated to {instance.host} ({instance.state})"
        elif instance.hypervisor_uuid != hv_uuid:
            group["why"] = f"{name} went on to {instance.host} ({instance.state}): left by a failed build or a move"
        elif instance.failure_reason:
            group["why"] = f"{name} is {instance.state}: {instance.failure_reason}"
        else:
            group["why"] = f"{name} is {instance.state} and holds no claim here"
