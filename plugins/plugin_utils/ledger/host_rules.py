"""Host rules in the ledger (berth.fleet.host_rule): written by the operator, read by every
schedule, and their hard kinds re-checked by every claim under its locks, so that a rule written
between a decision and its claim is not broken by that claim."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_rules import (
    HARD_KINDS,
    SELECTORS,
    HostRule,
    broken_rule,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.database import utcnow
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import (
    BUILDING,
    PLACED_STATES,
    host_rules,
    hypervisors,
    instances,
    iso,
    server_group_members,
    server_groups,
)

R = host_rules.c


def _rule(row: Any) -> HostRule:
    return HostRule(name=row.name, kind=row.kind, aggregate=row.aggregate, weight=row.weight,
                    **{selector: getattr(row, selector) for selector in SELECTORS})


def _view(row: Any) -> dict[str, Any]:
    return {**_rule(row).to_dict(), "created_at": iso(row.created_at), "updated_at": iso(row.updated_at)}


def rules(db: Connection, hard_only: bool = False) -> list[HostRule]:
    """Every rule (or every hard one), by name."""
    query = select(host_rules).order_by(R.name)
    if hard_only:
        query = query.where(R.kind.in_(HARD_KINDS))
    return [_rule(row) for row in db.execute(query)]


def listing(db: Connection, name: str | None) -> list[dict[str, Any]]:
    query = select(host_rules).order_by(R.name)
    if name is not None:
        query = query.where(R.name == name)
    return [_view(row) for row in db.execute(query)]


def put(db: Connection, rule: HostRule) -> tuple[dict[str, Any] | None, bool]:
    """Ledger.put_host_rule's transaction: the rule as it was (None: new), and whether it changed."""
    row = db.execute(select(host_rules).where(R.name == rule.name)).first()
    columns = {key: value for key, value in rule.to_dict().items() if key != "name"}
    now = utcnow()
    if row is None:
        db.execute(insert(host_rules), {"name": rule.name, **columns, "created_at": now, "updated_at": now})
        return None, True
    if _rule(row) == rule:
        return _view(row), False
    db.execute(update(host_rules).where(R.name == rule.name).values(**columns, updated_at=now))
    return _view(row), True


def remove(db: Connection, name: str) -> dict[str, Any] | None:
    """Ledger.delete_host_rule's transaction: the rule deleted, None if there was none."""
    row = db.execute(select(host_rules).where(R.name == name)).first()
    if row is None:
        return None
    db.execute(delete(host_rules).where(R.name == name))
    return _view(row)


def known_aggregates(db: Connection) -> set[str]:
    """The names of the aggregates some hypervisor of the ledger is in."""
    return {str(aggregate.get("name")) for listed in db.execute(select(hypervisors.c.aggregates)).scalars()
            for aggregate in listed or [] if aggregate.get("name")}


def host_aggregates(db: Connection, hv_uuids: Iterable[str]) -> dict[str, list[str]]:
    """Each hypervisor's aggregate names, by its UUID."""
    rows = db.execute(select(hypervisors.c.uuid, hypervisors.c.aggregates)
                      .where(hypervisors.c.uuid.in_(sorted(set(hv_uuids)))))
    return {uuid: [str(aggregate.get("name")) for aggregate in listed or [] if aggregate.get("name")]
            for uuid, listed in rows}


def request_labels(request: Mapping[str, Any] | None) -> list[str]:
    """The labels an instance's recorded request holds (none in a record from before labels)."""
    labels = (request or {}).get("labels") or []
    return [label for label in labels if isinstance(label, str)]


def violation(db: Connection, entries: Sequence[Mapping[str, Any]]) -> tuple[str, str] | None:
    """(host, why) for the first of ``entries`` - each an instance's ``name``, ``server_group``
    (None: none), ``labels`` and the ``hypervisor_uuid`` and ``host`` it is claimed on - that
    would break a hard rule there; None when every one holds. Read inside the claim's
    transaction, after its hypervisors are locked."""
    hard = rules(db, hard_only=True)
    if not hard:
        return None
    aggregates = host_aggregates(db, [entry["hypervisor_uuid"] for entry in entries])
    for entry in entries:
        rule = broken_rule(hard, entry["name"], entry.get("server_group"), entry.get("labels") or (),
                           aggregates.get(entry["hypervisor_uuid"], []))
        if rule is not None:
            return entry["host"], f"{entry['name']} would break host rule {rule.describe()}"
    return None


def breaking(db: Connection, rule: HostRule) -> list[dict[str, str]]:
    """The instances placed now against ``rule`` (hard): {name, host}. A rule applies to what is
    placed or moved after it is written; these stay where they are until moved."""
    if not rule.hard:
        return []
    query = (select(instances.c.name, instances.c.request, instances.c.hypervisor_uuid, hypervisors.c.name.label("host"),
                    server_groups.c.name.label("group_name"))
             .join(hypervisors, hypervisors.c.uuid == instances.c.hypervisor_uuid)
             .outerjoin(server_group_members, server_group_members.c.instance_uuid == instances.c.uuid)
             .outerjoin(server_groups, server_groups.c.uuid == server_group_members.c.group_uuid)
             .where(instances.c.state.in_([BUILDING, *PLACED_STATES]))
             .order_by(instances.c.name))
    rows = db.execute(query).all()
    aggregates = host_aggregates(db, [row.hypervisor_uuid for row in rows])
    return [{"name": row.name, "host": row.host} for row in rows
            if broken_rule([rule], row.name, row.group_name, request_labels(row.request),
                           aggregates.get(row.hypervisor_uuid, [])) is not None]
