"""The scheduler's read of the ledger: host states, as Nova's scheduler reads compute nodes.

One scan of the hypervisors table gives every host's capacity, usage summary, status and the
facts the default filters read, straight into the engine's columns (a HostTable): no query
per host and no ORM object per row. Facts only some filters read (capabilities, metrics, the
instances on a host, images and networks) are read only when the request's filters need them.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import Text, bindparam, case, cast, func, literal, literal_column, or_, select
from sqlalchemy.engine import Connection

from ansible_collections.berth.fleet.plugins.module_utils.cpu_sets import shared_cpu_set
from ansible_collections.berth.fleet.plugins.module_utils.guest_cpu import guest_cpu_record
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import AUTO_VECTORIZED_HOSTS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.free_amounts import free_amounts
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.columns import (
    ColumnBuilder,
    constant_column,
    numpy_or_none,
    parsed,
    split_integers,
    split_texts,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.database import driver_execute
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import (
    HV_DOWN,
    HV_MISSING,
    HV_UP,
    DIGEST_COLUMNS,
    claims,
    fence_record,
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
# How read_table builds each column from the driver's values (columns.py).
COLUMN_KINDS = {
    "host": "plain", "nodename": "shared", "uuid": "plain", "generation": "plain", "service_up": "flag",
    "down_reason": "plain", "disabled": "flag", "disabled_reason": "shared", "sync_age_s": "float",
    **{name: "float" if name.endswith("_allocation_ratio") else "int" for name in USAGE_COLUMNS},
    "availability_zone": "shared", "aggregates": "json", "hypervisor_version": "int",
    "hypervisor_type": "shared", "libvirt_version": "plain", "supported_instances": "json", "cpu_info": "json",
    # The digests (the texts come after, by digest: _by_digest).
    "numa_topology": "shared", "pci_devices": "shared", "metrics": "json", "host_ip": "shared",
}
# The columns each host has its own of, read in one aggregate: a text of every host's values per
# column (_aggregated), numbers and texts.
PER_HOST_NUMBERS = ("generation", "vcpus_total", "vcpus_used", "total_usable_ram_mb", "free_ram_mb",
                    "total_usable_disk_gb", "free_disk_mb", "num_instances", "num_io_ops")
PER_HOST_TEXTS = ("host", "uuid", "availability_zone", "aggregates")
# The columns most hosts of a fleet have alike (settings, status): read from one host, and from
# each host whose value of any of them is another (_alike).
ALIKE = ("nodename", "service_up", "down_reason", "missing_since", "disabled", "disabled_reason",
         "cpu_allocation_ratio", "ram_allocation_ratio", "disk_allocation_ratio", "reserved_host_memory_mb",
         "reserved_host_disk_mb", "failed_builds", "hypervisor_version")
# Joins the texts of one column in the aggregate: no JSON text holds it unescaped, and a name that
# does sends the read to its rows (split_texts tells).
_SEPARATOR = "\x1f"
# Rows taken from the driver at a time on the rows' path (_row_columns).
_FETCH_ROWS = 4096
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

    At 100,000 hypervisors the time goes to the driver making a Python object of every value of
    every row, and to the fresh memory those take. So, with NumPy, the columns each host has
    its own of come from one aggregate, a text of every host's values per column, parsed into
    arrays (_aggregated), and those most hosts have alike from one host and from the hosts that
    differ (_alike): each host's values are the ones its row holds, as a read of every row gives
    them (_row_columns, the way taken without NumPy, and where an aggregate's text does not
    parse: a name that holds the separator, a value of another type than its column's).
    """
    wanted = [name for name in OPTIONAL_FACTS if name in set(fields)]
    # NumPy where the engine would take it (a fleet too small for its vectorised path does
    # without importing it: it takes a fifth of a second).
    numpy = numpy_or_none() if _count(db, uuids) >= AUTO_VECTORIZED_HOSTS else None
    columns = None if numpy is None else _aggregated(db, now, numpy, uuids)
    if columns is None:
        columns = _row_columns(db, now, numpy, wanted, uuids)
    else:
        columns.update(_alike(db, now, numpy, columns["uuid"], uuids))
        columns.update(_facts(db, numpy, wanted, columns["uuid"]))
    generations = columns.pop("generation")
    generations = generations.tolist() if hasattr(generations, "tolist") else list(generations)
    for name in DIGESTED_FACTS:
        if name in columns:
            columns[name] = _by_digest(db, name, columns["uuid"], columns[name])
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


def _count(db: Connection, uuids: Sequence[str] | None) -> int:
    """How many hypervisors (of ``uuids``) the ledger holds."""
    query = select(func.count()).select_from(hypervisors)
    if uuids is not None:
        query = query.where(H.uuid.in_(list(uuids)))
    return driver_execute(db, query, cached=False).fetchone()[0]


def _expressions(db: Connection, now: dt.datetime) -> dict[str, Any]:
    """read_table's columns as SQL over a hypervisor row, by name: numbers, NULL where a host is
    as usual (no down reason, a node name that is its name), status as 0/1 or a boolean."""
    up = H.sync_status == HV_UP
    return {
        "host": H.name, "nodename": case((H.nodename == H.name, ""), else_=H.nodename), "uuid": H.uuid,
        "generation": H.generation, "service_up": up,
        "down_reason": case((up, None), else_=func.coalesce(H.down_reason, H.sync_status)),
        # When it went missing, for the reason; nothing for the others.
        "missing_since": case((H.sync_status == HV_MISSING, H.synced_at)),
        "disabled": H.disabled, "disabled_reason": H.disabled_reason, "sync_age_s": _age_seconds(db, now),
        **USAGE_COLUMNS,
        "availability_zone": H.availability_zone, "aggregates": cast(H.aggregates, Text),
        "hypervisor_version": H.hypervisor_version,
    }


def host_query(db: Connection, now: dt.datetime, wanted: Sequence[str] = (),
               uuids: Sequence[str] | None = None) -> Any:
    """A row per hypervisor (of ``uuids``) with every column of read_table and the optional
    facts ``wanted``, in _order."""
    query = _order(db, select(*(expression.label(name) for name, expression in _expressions(db, now).items()),
                              *(_fact_column(F, name) for name in wanted)))
    if wanted:
        query = query.outerjoin(hypervisor_facts, F.hypervisor_uuid == H.uuid)
    if uuids is not None:
        query = query.where(H.uuid.in_(list(uuids)))
    return query


def _row_columns(db: Connection, now: dt.datetime, numpy: Any, wanted: Sequence[str],
                 uuids: Sequence[str] | None) -> dict[str, Any]:
    """read_table's columns from every host's row, taken a batch of rows at a time so that the
    read never holds every row's Python objects at once."""
    cursor = driver_execute(db, host_query(db, now, wanted, uuids), cached=False)
    keys = [column[0] for column in cursor.description]
    builder = ColumnBuilder({key: COLUMN_KINDS[key] for key in keys if key != "missing_since"}, numpy)
    for rows in iter(functools.partial(cursor.fetchmany, _FETCH_ROWS), []):
        batch = dict(zip(keys, zip(*rows)))
        missing_since = batch.pop("missing_since")
        if batch["down_reason"].count(None) != len(rows):  # some host of the batch is not up
            batch["down_reason"] = tuple(map(_explained, batch["down_reason"], missing_since))
        for key, values in batch.items():
            builder.add(key, values)
    return builder.columns()


def _aggregated(db: Connection, now: dt.datetime, numpy: Any, uuids: Sequence[str] | None) -> dict[str, Any] | None:
    """The columns each host has its own of (PER_HOST_NUMBERS, PER_HOST_TEXTS, sync_age_s), from
    one row that holds, per column, the text of every host's values joined (group_concat on
    SQLite, string_agg on PostgreSQL); in read_table's order, which each host's position in the
    aggregate gives (SQLite's rowid, PostgreSQL's row number by name). None where a text does not
    parse as its hosts' values (see columns.split_integers and split_texts)."""
    expressions = _expressions(db, now)
    if db.dialect.name == "sqlite":
        position = literal_column("hypervisors.rowid")
    else:
        position = func.row_number().over(order_by=(H.name, H.uuid))
    inner = select(
        position.label("position"), cast(H.synced_at, Text).label("synced_at"),
        *(expressions[name].label(name) for name in PER_HOST_NUMBERS),
        *(expressions[name].label(name) for name in PER_HOST_TEXTS if name != "availability_zone"),
        # A zone as "=zone", and no zone (NULL, which an aggregate would skip) as "".
        func.coalesce(literal("=") + H.availability_zone, "").label("availability_zone"))
    if uuids is not None:
        inner = inner.where(H.uuid.in_(list(uuids)))
    inner = inner.subquery()
    numbers, texts = ("position", *PER_HOST_NUMBERS), (*PER_HOST_TEXTS, "synced_at")
    count, *joined = driver_execute(db, select(
        func.count(),
        *(func.aggregate_strings(cast(inner.c[name], Text), ",") for name in numbers),
        *(func.aggregate_strings(inner.c[name], _SEPARATOR) for name in texts)), cached=False).fetchone()
    values: dict[str, Any] = {name: split_integers(numpy, text, count) for name, text in zip(numbers, joined)}
    values.update({name: split_texts(text, count, _SEPARATOR) for name, text in zip(texts, joined[len(numbers):])})
    if any(column is None for column in values.values()):
        return None
    positions = values.pop("position")
    if count > 1 and not (positions[1:] > positions[:-1]).all():
        order = numpy.argsort(positions, kind="stable")
        values = {name: column[order] if name in numbers else [column[at] for at in order.tolist()]
                  for name, column in values.items()}
    marked = values.pop("availability_zone")
    zones = {text: text[1:] if text else None for text in set(marked)}
    values["availability_zone"] = list(map(zones.__getitem__, marked))
    synced = values.pop("synced_at")
    ages = _sync_ages(db, now, synced, values["uuid"])
    builder = ColumnBuilder({"aggregates": "json", "sync_age_s": "float"}, numpy)
    builder.add("aggregates", values.pop("aggregates"))
    builder.add("sync_age_s", list(map(ages.__getitem__, synced)))
    return {**values, **builder.columns()}


def _sync_ages(db: Connection, now: dt.datetime, synced: Sequence[str], uuids: Sequence[str]) -> dict[str, Any]:
    """sync_age_s by the text of synced_at: the database's own age of one host per distinct
    time (a sync writes its batch of hosts with one time), so that every host's is the number
    a read of its row gives."""
    sample = dict(zip(synced, uuids))
    sampled = list(sample.values())
    ages = {}
    for first in range(0, len(sampled), _IN_BATCH):
        ages.update(driver_execute(db, select(cast(H.synced_at, Text), _age_seconds(db, now)).where(
            H.uuid.in_(sampled[first:first + _IN_BATCH])), cached=False).fetchall())
    return ages


def _alike(db: Connection, now: dt.datetime, numpy: Any, uuids: Sequence[str],
           only: Sequence[str] | None) -> dict[str, Any]:
    """The columns most hosts have alike (ALIKE): one host's values, and the values of each host
    that differs from it in any of them (the database compares: a value it holds equal, such as
    SQLite's 1 and 1.0, counts as the same)."""
    expressions, count = _expressions(db, now), len(uuids)
    alike = [expressions[name].label(name) for name in ALIKE]
    hosts = select(*alike)
    if only is not None:
        hosts = hosts.where(H.uuid.in_(list(only)))
    reference = driver_execute(db, hosts.limit(1), cached=False).fetchone()
    if reference is None:
        return {name: [] for name in ALIKE if name != "missing_since"}
    differing = or_(*(expressions[name].is_distinct_from(value) for name, value in zip(ALIKE, reference)))
    rows = driver_execute(db, hosts.add_columns(H.uuid).where(differing), cached=False).fetchall()
    position = {uuid: at for at, uuid in enumerate(uuids)} if rows else {}
    own = {position[row[-1]]: row for row in rows if row[-1] in position}
    by_name = dict(zip(ALIKE, range(len(ALIKE))))
    columns = {}
    for name in ALIKE:
        if name in ("missing_since", "down_reason"):
            continue
        at = by_name[name]
        columns[name] = constant_column(numpy, COLUMN_KINDS[name], reference[at],
                                        count, {host: row[at] for host, row in own.items()})
    reason, since = by_name["down_reason"], by_name["missing_since"]
    columns["down_reason"] = constant_column(numpy, "plain", _explained(reference[reason], reference[since]), count,
                                             {host: _explained(row[reason], row[since]) for host, row in own.items()})
    return columns


def _facts(db: Connection, numpy: Any, wanted: Sequence[str], uuids: Sequence[str]) -> dict[str, Any]:
    """The optional facts ``wanted`` of each host of ``uuids`` (None for a host without a facts
    row yet, as the rows' outer join gives)."""
    if not wanted:
        return {}
    rows = {row[0]: row[1:] for row in driver_execute(db, select(
        F.hypervisor_uuid, *(_fact_column(F, name) for name in wanted)), cached=False).fetchall()}
    none = (None,) * len(wanted)
    builder = ColumnBuilder({name: COLUMN_KINDS[name] for name in wanted}, numpy)
    for first in range(0, len(uuids), _FETCH_ROWS):
        batch = [rows.get(uuid, none) for uuid in uuids[first:first + _FETCH_ROWS]]
        for name, values in zip(wanted, zip(*batch)):
            builder.add(name, values)
    return builder.columns()


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
    return parsed(texts, {})


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
            "fenced": fence_record(row._mapping),
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
