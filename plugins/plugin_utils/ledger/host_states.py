"""The scheduler's read of the ledger: host states, as Nova's scheduler reads compute nodes.

One scan of the hypervisors table gives every host's capacity, usage summary, status and the
facts the default filters read, straight into the engine's columns (a HostTable): no query
per host and no ORM object per row. Facts only some filters read (capabilities, metrics, the
instances on a host, images and networks) are read only when the request's filters need them.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import Text, bindparam, case, cast, func, literal, literal_column, select
from sqlalchemy.engine import Connection

from ansible_collections.berth.fleet.plugins.module_utils.cpu_sets import shared_cpu_set
from ansible_collections.berth.fleet.plugins.module_utils.guest_cpu import guest_cpu_record
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.free_amounts import free_amounts
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.database import driver_execute
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import (
    HV_DOWN,
    HV_MISSING,
    HV_UP,
    DIGEST_COLUMNS,
    claims,
    hypervisor_facts,
    hypervisor_images,
    hypervisor_networks,
    hypervisors,
    instances,
    iso,
    unmanaged_usage,
)

H = hypervisors.c
# The host-state fields every read gives, as SQL over one hypervisor row. The free amounts are
# the tracker view (docs/docsite/rst/design.rst): total - reserved - used, where used is the
# claims plus unmanaged usage, built from the definition host_facts computes them with too.
_FREE = free_amounts(H)
USAGE_COLUMNS = {
    "vcpus_total": H.vcpus_total,
    "vcpus_used": H.vcpus_used,
    "total_usable_ram_mb": H.total_usable_ram_mb,
    "free_ram_mb": _FREE["free_ram_mb"],
    "total_usable_disk_gb": H.total_usable_disk_gb,
    "free_disk_mb": _FREE["free_disk_mb"],
    "num_instances": H.num_instances,
    "num_io_ops": H.num_io_ops,
    "cpu_allocation_ratio": H.cpu_allocation_ratio,
    "ram_allocation_ratio": H.ram_allocation_ratio,
    "disk_allocation_ratio": H.disk_allocation_ratio,
    "reserved_host_memory_mb": H.reserved_host_memory_mb,
    "reserved_host_disk_mb": H.reserved_host_disk_mb,
    # Not usage, but the compute node's record of its builds (BuildFailureWeigher), read beside it.
    "failed_builds": H.failed_builds,
}
# Facts kept as JSON: read as text and parsed once per distinct value (most hosts of a fleet
# share their aggregates and capabilities).
JSON_FACTS = ("aggregates", "supported_instances", "cpu_info", "numa_topology", "pci_devices", "metrics")
# Read for every request, from the hypervisor row: the default filters and weighers use them.
ALWAYS_FACTS = ("availability_zone", "aggregates", "hypervisor_version")
# Read, from hypervisor_facts, when a filter or weigher of the request needs them (its ``host_fields``).
OPTIONAL_FACTS = ("hypervisor_type", "libvirt_version", "supported_instances", "cpu_info",
                  "numa_topology", "pci_devices", "metrics", "host_ip")
F = hypervisor_facts.c
# Of those, the long ones the same hardware shares: read as the digest the tracker records beside
# each (DIGEST_COLUMNS), and each distinct text once (_by_digest).
DIGESTED_FACTS = ("numa_topology", "pci_devices")
# Hosts per IN list: well under the bound parameters SQLite (32,766) and PostgreSQL (65,535) take.
_IN_BATCH = 5000
# Why a host is down when the sync recorded no reason of its own, by sync status.
_DOWN_REASONS = {
    HV_DOWN: "did not answer its last sync",
    HV_MISSING: "missing: in no inventory and not synced since",
}


_EPOCH = dt.datetime(1970, 1, 1)
_UNIX_EPOCH_JULIAN_DAY = 2440587.5


def _age_seconds(db: Connection, now: dt.datetime) -> Any:
    """Seconds since each row's last sync, computed by the database from ``now`` given as a
    number (UTC, as every ledger time), so that no datetime is made per row."""
    seconds = (now - _EPOCH).total_seconds()
    if db.dialect.name == "sqlite":
        return (literal(seconds / 86400.0 + _UNIX_EPOCH_JULIAN_DAY) - func.julianday(H.synced_at)) * 86400.0
    return literal(seconds) - func.extract("epoch", H.synced_at)


def _raw_rows(db: Connection, query: Any) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The rows of ``query`` as the database driver gives them: SQLAlchemy's typed results
    would convert every value of every row (a quarter of a second at 100,000 hypervisors)
    where only a few columns need it, and read_table converts those itself."""
    cursor = driver_execute(db, query, cached=False)
    return [column[0] for column in cursor.description], cursor.fetchall()


def _fact_column(table: Any, name: str) -> Any:
    if table is F and name in DIGESTED_FACTS:
        return getattr(table, DIGEST_COLUMNS[name]).label(name)
    column = getattr(table, name)
    return cast(column, Text).label(name) if name in JSON_FACTS else column.label(name)


def read_table(db: Connection, now: dt.datetime, fields: Iterable[str] = (),
               images: Sequence[str] = (), networks: Sequence[str] = (),
               uuids: Sequence[str] | None = None) -> tuple[HostTable, list[int]]:
    """Every hypervisor of the ledger (or those of ``uuids``) as the engine's columns, with the
    generation each was read at, in a stable order (see _order).

    ``fields``: HostState fields the request's filters read beyond the usual ones (see
    OPTIONAL_FACTS, and ``instances``); ``images`` and ``networks``: the names the request asks
    for, so that each host's ``images`` and ``networks`` say which of those it has.

    At 100,000 hypervisors most of the time is the driver making a Python object of every value
    of every row, so the columns are chosen to be cheap ones: numbers, NULL where a host is as
    usual (no down reason, a node name that is its name), status as 0/1.
    """
    wanted = [name for name in OPTIONAL_FACTS if name in set(fields)]
    up = H.sync_status == HV_UP
    query = _order(db, select(
        H.name.label("host"), case((H.nodename == H.name, ""), else_=H.nodename).label("nodename"),
        H.uuid, H.generation, up.label("service_up"),
        case((up, None), else_=func.coalesce(H.down_reason, H.sync_status)).label("down_reason"),
        # When it went missing, for the reason; nothing for the others.
        case((H.sync_status == HV_MISSING, H.synced_at)).label("missing_since"),
        H.disabled, H.disabled_reason, _age_seconds(db, now).label("sync_age_s"),
        *(expression.label(name) for name, expression in USAGE_COLUMNS.items()),
        *(_fact_column(H, name) for name in ALWAYS_FACTS),
        *(_fact_column(F, name) for name in wanted),
    ))
    if wanted:
        query = query.outerjoin(hypervisor_facts, F.hypervisor_uuid == H.uuid)
    if uuids is not None:
        query = query.where(H.uuid.in_(list(uuids)))
    keys, rows = _raw_rows(db, query)
    columns: dict[str, Any] = dict(zip(keys, zip(*rows))) if rows else {key: () for key in keys}
    generations = list(columns.pop("generation"))
    missing_since = columns.pop("missing_since")
    # The drivers give 0/1 (SQLite) or booleans (PostgreSQL); HostState takes booleans.
    columns["service_up"] = list(map(bool, columns["service_up"]))
    columns["disabled"] = list(map(bool, columns["disabled"]))
    columns["down_reason"] = [_explained(reason, when) for reason, when in zip(columns["down_reason"], missing_since)]
    for name in JSON_FACTS:
        if name in DIGESTED_FACTS and name in columns:
            columns[name] = _by_digest(db, name, columns["uuid"], columns[name])
        elif name in columns:
            columns[name] = _parsed(columns[name])
    for name, empty in (("numa_topology", {}), ("pci_devices", [])):
        if name in columns:  # a host without a facts row yet has none
            columns[name] = [empty if value is None else value for value in columns[name]]
    if "instances" in set(fields):
        columns["instances"] = _instances(db, columns["uuid"])
    if "instance_image_properties" in set(fields):
        columns["instance_image_properties"] = _instance_image_properties(db, columns["uuid"])
    if "assignments" in set(fields):
        columns["assignments"] = assignments(db, columns["uuid"])
    if images:
        columns["images"], columns["refused_images"] = _images(db, columns["uuid"], images)
    if networks:
        columns["networks"] = _named(db, hypervisor_networks, columns["uuid"], networks)
    return HostTable(columns), generations


def _order(db: Connection, query: Any) -> Any:
    """The hosts in an order that stays put between two reads (so that check mode's decision is
    the real run's, ties included): SQLite's rowid order, which an update never moves, for free;
    on PostgreSQL, whose updates move rows, by name (a sort)."""
    if db.dialect.name == "sqlite":
        return query.order_by(literal_column("hypervisors.rowid"))
    return query.order_by(H.name, H.uuid)


def _explained(reason: str | None, synced_at: Any) -> str | None:
    """Why a host is not up: the reason its sync recorded, else (``reason`` is then its sync
    status) what that status means; None for a host that is up."""
    return reason if reason is None or reason not in _DOWN_REASONS else _down_reason(reason, synced_at)


def _down_reason(status: str, synced_at: Any) -> str:
    reason = _DOWN_REASONS.get(status, status)
    # A driver's own value: a datetime (psycopg) or its text (sqlite3).
    when = iso(synced_at) if isinstance(synced_at, dt.datetime) else synced_at
    return f"{reason} {when}" if status == HV_MISSING else reason


def _by_digest(db: Connection, name: str, uuids: Sequence[str], digests: Sequence[str | None]) -> list[Any]:
    """Fact ``name`` of each host from its digest: the text of one host per distinct digest,
    parsed once and shared by every host with that digest, where reading every host's text
    would move megabytes of the same few texts (a NUMA topology and a device list are kilobytes,
    and hosts of one hardware class have the same). A host without a digest (no facts row, or
    one no sync wrote since) reads its own, as does every host of a digest whose sample row moved
    on between the two reads (a sync committed in between): each host is read as it is, never as
    another host that was like it."""
    sample: dict[str, str] = {}
    without = []
    for uuid, digest in zip(uuids, digests):
        if digest is None:
            without.append(uuid)
        else:
            sample.setdefault(digest, uuid)
    by_digest, own = _fact_texts(db, name, [*sample.values(), *without])
    moved = {digest for digest, uuid in sample.items() if own.get(uuid, (None,))[0] != digest}
    if moved:
        own.update(_fact_texts(db, name, [uuid for uuid, digest in zip(uuids, digests) if digest in moved])[1])
    return _parsed([own.get(uuid, (None, None))[1] if digest is None or digest in moved else by_digest[digest]
                    for uuid, digest in zip(uuids, digests)])


def _fact_texts(db: Connection, name: str, uuids: Sequence[str]
                ) -> tuple[dict[str, str | None], dict[str, tuple[str | None, str | None]]]:
    """The text of fact ``name`` of hosts ``uuids``: by the digest each row has, and by host
    (its digest and text)."""
    by_digest: dict[str, str | None] = {}
    own: dict[str, tuple[str | None, str | None]] = {}
    for first in range(0, len(uuids), _IN_BATCH):
        for uuid, digest, text in db.execute(
                select(F.hypervisor_uuid, getattr(F, DIGEST_COLUMNS[name]), cast(getattr(F, name), Text))
                .where(F.hypervisor_uuid.in_(list(uuids[first:first + _IN_BATCH])))):
            own[uuid] = (digest, text)
            if digest is not None:
                by_digest.setdefault(digest, text)
    return by_digest, own


def _parsed(texts: Sequence[str | None]) -> list[Any]:
    """JSON texts parsed, each distinct text once (the hosts share the parsed value: the
    engine never changes a fact)."""
    cache = {text: _loaded(text) for text in set(texts)}
    return [cache[text] for text in texts]


def _loaded(text: str | None) -> Any:
    """A JSON column's value; None, as for a fact never recorded, where another writer of the
    ledger stored text nested past what Python's json can decode (a RecursionError)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except RecursionError:
        return None


def _instances(db: Connection, uuids: Sequence[str]) -> list[list[str]]:
    """The instance UUIDs each host holds a claim for (SameHost/DifferentHost filters)."""
    position = {uuid: index for index, uuid in enumerate(uuids)}
    held: list[list[str]] = [[] for _uuid in uuids]
    for hv_uuid, instance_uuid in db.execute(
            select(claims.c.hypervisor_uuid, claims.c.instance_uuid).order_by(claims.c.id)):
        if hv_uuid in position:
            held[position[hv_uuid]].append(instance_uuid)
    return held


def _assignment_rows(only: Sequence[str] | None = None) -> Any:
    """The assignments of claims and unmanaged domains (of the hypervisors ``only``, else all)."""
    parts = []
    for table in (claims, unmanaged_usage):
        part = select(table.c.hypervisor_uuid, cast(table.c.assignment, Text)).where(table.c.assignment.is_not(None))
        if only is not None:
            part = part.where(table.c.hypervisor_uuid.in_(sorted(set(only))))
        parts.append(part)
    return parts[0].union_all(parts[1])


def assignments(db: Connection, uuids: Sequence[str], only: bool = False) -> list[list[dict[str, Any]]]:
    """Per host of ``uuids``, the assignments of its claims (those of a moving instance on both
    hosts, as its other resources) and of the domains Berth did not make: what its CPUs, pages
    and devices are used by (docs/docsite/rst/numa.rst). Only rows that hold one are read (most
    instances ask for none); with ``only``, only those of ``uuids`` (a claim's few hosts)."""
    position = {uuid: index for index, uuid in enumerate(uuids)}
    held: list[list[dict[str, Any]]] = [[] for _uuid in uuids]
    rows = db.execute(_assignment_rows(uuids if only else None)).all()
    for (hv_uuid, _text), value in zip(rows, _parsed([text for _hv_uuid, text in rows])):
        if hv_uuid in position and isinstance(value, dict):
            held[position[hv_uuid]].append(value)
    return held


def with_exact_facts(db: Connection, views: Mapping[str, tuple[HostState, int]]) -> None:
    """Give locked views (locked_views) what an exact request is fitted against: their NUMA
    topology, PCI devices and the assignments held there, read under the claim's locks."""
    uuids = sorted(views)
    for uuid, topology, devices in db.execute(select(F.hypervisor_uuid, F.numa_topology, F.pci_devices)
                                              .where(F.hypervisor_uuid.in_(uuids))):
        views[uuid][0].numa_topology = topology or {}
        views[uuid][0].pci_devices = devices or []
    for uuid, held in zip(uuids, assignments(db, uuids, only=True)):
        views[uuid][0].assignments = held


def _instance_image_properties(db: Connection, uuids: Sequence[str]) -> list[list[dict[str, Any]]]:
    """Per host, the image properties of each instance holding a claim there (BUILDING ones
    included, a moving one on both hosts): what ImagePropertiesWeigher compares."""
    position = {uuid: index for index, uuid in enumerate(uuids)}
    held: list[list[dict[str, Any]]] = [[] for _uuid in uuids]
    rows = db.execute(select(claims.c.hypervisor_uuid, cast(instances.c.image_properties, Text))
                      .join(instances, instances.c.uuid == claims.c.instance_uuid).order_by(claims.c.id)).all()
    parsed = _parsed([text for _hv_uuid, text in rows])
    for (hv_uuid, _text), properties in zip(rows, parsed):
        if hv_uuid in position:
            held[position[hv_uuid]].append(properties or {})
    return held


def _named(db: Connection, table: Any, uuids: Sequence[str], names: Sequence[str]) -> list[list[str]]:
    """Per host, which of ``names`` its last sync listed (its images or its networks)."""
    position = {uuid: index for index, uuid in enumerate(uuids)}
    found: list[list[str]] = [[] for _uuid in uuids]
    for hv_uuid, name in db.execute(
            select(table.c.hypervisor_uuid, table.c.name).where(table.c.name.in_(sorted(set(names))))
            .order_by(table.c.name)):
        if hv_uuid in position:
            found[position[hv_uuid]].append(name)
    return found


def _images(db: Connection, uuids: Sequence[str], names: Sequence[str]) -> tuple[list[list[str]], list[dict]]:
    """Per host, which of the image volumes ``names`` its last sync listed as usable, and why
    it refused the others it listed."""
    position = {uuid: index for index, uuid in enumerate(uuids)}
    usable: list[list[str]] = [[] for _uuid in uuids]
    refused: list[dict[str, str]] = [{} for _uuid in uuids]
    images = hypervisor_images.c
    for hv_uuid, name, why in db.execute(
            select(images.hypervisor_uuid, images.name, images.refused)
            .where(images.name.in_(sorted(set(names)))).order_by(images.name)):
        if hv_uuid in position:
            if why is None:
                usable[position[hv_uuid]].append(name)
            else:
                refused[position[hv_uuid]][name] = why
    return usable, refused


# What a claim's re-check reads of each chosen host: the resource filters' numbers.
_CHECKED = ("vcpus_total", "vcpus_used", "total_usable_ram_mb", "free_ram_mb", "total_usable_disk_gb",
            "free_disk_mb", "cpu_allocation_ratio", "ram_allocation_ratio", "disk_allocation_ratio")
_LOCKED_VIEWS = (select(H.uuid, H.name, H.generation, *(USAGE_COLUMNS[name].label(name) for name in _CHECKED))
                 .where(H.uuid.in_(bindparam("uuids", expanding=True))).order_by(H.uuid))
_LOCKED_VIEWS_FOR_UPDATE = _LOCKED_VIEWS.with_for_update()


def locked_views(db: Connection, uuids: Iterable[str], lock: bool = True) -> dict[str, tuple[HostState, int]]:
    """The hosts of ``uuids`` as the ledger alone sees them, for a claim's re-check (the numbers
    the resource filters read): each with its generation; their rows locked FOR UPDATE in UUID
    order (a no-op on SQLite, which holds the write lock already), so that concurrent claims on
    PostgreSQL queue instead of deadlocking (``lock=False`` reads them without the lock). Status
    and staleness are the scheduler's business, not the claim's."""
    query = _LOCKED_VIEWS_FOR_UPDATE if lock else _LOCKED_VIEWS
    views = {}
    rows = driver_execute(db, query, {"uuids": sorted(set(uuids))}).fetchall()
    for uuid, name, generation, *numbers in rows:
        views[uuid] = (HostState(host=name, uuid=uuid, **dict(zip(_CHECKED, numbers))), generation)
    return views


def tracker_states(db: Connection, states: Sequence[Mapping[str, Any]],
                   fields: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Live host states (from the inventory) with the ledger's tracker view: usage from its
    claims and unmanaged usage, the operator's disabled flag, the generation; and, among
    ``fields`` (what the request's filters read), what only the ledger knows: its instances'
    image properties."""
    known = {row["uuid"]: row for row in db.execute(
        select(H.uuid, H.generation, H.disabled, H.disabled_reason,
               *(expression.label(name) for name, expression in USAGE_COLUMNS.items()))
        .where(H.uuid.in_([s["uuid"] for s in states if s.get("uuid")]))).mappings()}
    views = []
    for state in states:
        view = dict(state)
        row = known.get(state.get("uuid") or "")
        if row is not None:
            view["disabled"] = bool(state.get("disabled")) or row["disabled"]
            view["disabled_reason"] = row["disabled_reason"] if row["disabled"] else state.get("disabled_reason")
            view["generation"] = row["generation"]
            if state.get("service_up"):
                view.update({name: row[name] for name in USAGE_COLUMNS})
        views.append(view)
    for name, read in (("instance_image_properties", _instance_image_properties), ("assignments", assignments)):
        if name in set(fields):
            held = read(db, [view.get("uuid") or "" for view in views])
            for view, values in zip(views, held):
                view[name] = values
    return views


def named(db: Connection, names: Iterable[str]) -> list[str]:
    """The hypervisors' names that are one of ``names``, in any case, sorted."""
    wanted = sorted({name.lower() for name in names})
    if not wanted:
        return []
    return sorted(db.execute(select(H.name).where(func.lower(H.name).in_(wanted))).scalars())


def build_targets(db: Connection, uuids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """What a build needs of each of these hypervisors: name, the URI of its last sync, the
    domain types its capabilities offer, what its guests' CPU is made of (``cpu``: its CPU
    settings and libvirt's domain capabilities, checked when a build reads them) and the CPUs
    its ordinary guests float over (``cpu_shared_set``, None where it has none; checked when a
    build renders it)."""
    targets = {}
    for uuid, name, uri, supported, cpu_info, topology in db.execute(
            select(H.uuid, H.name, H.uri, F.supported_instances, F.cpu_info, F.numa_topology)
            .outerjoin(hypervisor_facts, F.hypervisor_uuid == H.uuid)
            .where(H.uuid.in_(sorted(set(uuids))))):
        types = sorted({triple[1] for triple in supported or [] if len(triple) > 1})
        targets[uuid] = {"host": name, "hypervisor_uuid": uuid, "uri": uri, "domain_types": types,
                         "cpu": guest_cpu_record(cpu_info), "cpu_shared_set": shared_cpu_set(topology)}
    return targets


def hypervisor_list(db: Connection, now: dt.datetime, uuids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every hypervisor (or those of ``uuids``) with its capacity, usage and unmanaged domains
    (ledger_info, drift reports, the fleet report): ``sync_age_s`` is the seconds since its last
    sync at ``now``, ``status_reason`` why it is not up (as the scheduler words it), or None."""
    unmanaged: dict[str, list[dict[str, Any]]] = {}
    orphans = select(unmanaged_usage).order_by(unmanaged_usage.c.domain_name)
    query = select(hypervisors, _age_seconds(db, now).label("sync_age_s"),
                   *(expression.label(f"usage_{name}") for name, expression in USAGE_COLUMNS.items())
                   ).order_by(H.name)
    if uuids is not None:
        orphans = orphans.where(unmanaged_usage.c.hypervisor_uuid.in_(list(uuids)))
        query = query.where(H.uuid.in_(list(uuids)))
    for row in db.execute(orphans):
        unmanaged.setdefault(row.hypervisor_uuid, []).append(
            {"name": row.domain_name, "uuid": row.domain_uuid, "vcpus": row.vcpus,
             "memory_mb": row.memory_mb, "disk_mb": row.disk_mb})
    result = []
    for row in db.execute(query):
        result.append({
            "uuid": row.uuid, "host": row.name, "nodename": row.nodename, "uri": row.uri,
            "generation": row.generation, "disabled": row.disabled, "disabled_reason": row.disabled_reason,
            "sync_status": row.sync_status, "down_reason": row.down_reason, "synced_at": iso(row.synced_at),
            "sync_age_s": row.sync_age_s, "rehomed_reason": row.rehomed_reason, "rehomed_at": iso(row.rehomed_at),
            "status_reason": (None if row.sync_status == HV_UP
                              else _explained(row.down_reason or row.sync_status, row.synced_at)),
            "inventories": {
                "VCPU": {"total": row.vcpus_total, "reserved": 0, "allocation_ratio": row.cpu_allocation_ratio},
                "MEMORY_MB": {"total": row.total_usable_ram_mb, "reserved": row.reserved_host_memory_mb,
                              "allocation_ratio": row.ram_allocation_ratio},
                "DISK_MB": {"total": row.total_usable_disk_gb * 1024, "reserved": row.reserved_host_disk_mb,
                            "allocation_ratio": row.disk_allocation_ratio},
            },
            "availability_zone": row.availability_zone, "aggregates": row.aggregates,
            "unmanaged": unmanaged.get(row.uuid, []),
            "usage": {name: row._mapping[f"usage_{name}"] for name in USAGE_COLUMNS},
        })
    return result
