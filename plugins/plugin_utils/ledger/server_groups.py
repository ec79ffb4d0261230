"""Server groups (Nova's affinity and anti-affinity), their members, and the hard-policy check a
claim makes with the group locked, so that two concurrent runs cannot break either policy."""

from __future__ import annotations

import collections
import uuid as uuidlib
from typing import Any, Sequence

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.database import utcnow
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import (
    AFFINITY,
    ANTI_AFFINITY,
    POLICIES,
    claims,
    hypervisors,
    server_group_members,
    server_groups,
)

G = server_groups.c
M = server_group_members.c


def lock(db: Connection, name: str) -> Any:
    """The group's row, locked until the transaction ends."""
    row = db.execute(select(server_groups).where(G.name == name).with_for_update()).first()
    if row is None:
        raise InputError("server_group", f"no server group named {name!r} in the ledger: create it with "
                                         f"berth.fleet.server_group first")
    return row


def lock_uuid(db: Connection, group_uuid: str) -> Any:
    return db.execute(select(server_groups).where(G.uuid == group_uuid).with_for_update()).one()


def violation(db: Connection, group: Any, new_hosts: Sequence[str],
              moving: str | None = None) -> tuple[str, str] | None:
    """(host, why) if adding members on ``new_hosts`` breaks the group's hard policy, against
    its members as they are now (the group is locked); None if it holds."""
    hosts = member_hosts(db, group, moving) + list(new_hosts)
    if group.policy == ANTI_AFFINITY:
        limit = group.max_server_per_host or 1
        for host in sorted(set(new_hosts)):
            if hosts.count(host) > limit:
                return host, (f"anti-affinity group {group.name} would have {hosts.count(host)} "
                              f"members on it (at most {limit})")
    elif group.policy == AFFINITY and len(set(hosts)) > 1:
        return new_hosts[0], f"affinity group {group.name} would span {', '.join(sorted(set(hosts)))}"
    return None


def member_hosts(db: Connection, group: Any, moving: str | None = None) -> list[str]:
    """The host of each claim the group's members hold, one entry per claim (so counts work);
    a moving member's own claims are left out."""
    query = (select(hypervisors.c.name)
             .join(claims, claims.c.hypervisor_uuid == hypervisors.c.uuid)
             .join(server_group_members, M.instance_uuid == claims.c.instance_uuid)
             .where(M.group_uuid == group.uuid))
    if moving is not None:
        query = query.where(claims.c.instance_uuid != moving)
    return list(db.execute(query).scalars())


def view(db: Connection, row: Any) -> dict[str, Any]:
    members = sorted(db.execute(select(M.instance_uuid).where(M.group_uuid == row.uuid)).scalars())
    return {
        "uuid": row.uuid, "name": row.name, "policy": row.policy,
        "rules": {"max_server_per_host": row.max_server_per_host} if row.max_server_per_host else {},
        "members": members, "hosts": sorted(set(member_hosts(db, row))),
    }


def check_args(name: Any, policy: Any, max_server_per_host: Any) -> None:
    if not isinstance(name, str) or not name:
        raise InputError("name", f"name must be a non-empty string, got {name!r}")
    limits.NAME.check(name)
    if policy not in POLICIES:
        raise InputError("policy", f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    if max_server_per_host is not None:
        if policy != ANTI_AFFINITY:
            raise InputError("max_server_per_host", "max_server_per_host is a rule of the anti-affinity policy only")
        limits.MAX_SERVER_PER_HOST.check(max_server_per_host)


def create(db: Connection, name: str, policy: str, max_server_per_host: int | None,
           dry_run: bool) -> tuple[dict[str, Any], bool]:
    """Ledger.create_server_group's transaction (see there); a dry run is rolled back by the caller."""
    check_args(name, policy, max_server_per_host)
    row = db.execute(select(server_groups).where(G.name == name)).first()
    if row is not None:
        if (row.policy, row.max_server_per_host) != (policy, max_server_per_host):
            raise InputError("policy", f"server group {name} exists with policy {row.policy} and "
                                       f"max_server_per_host {row.max_server_per_host}; a group's "
                                       f"rules cannot change: delete it first, or use another name")
        return view(db, row), False
    db.execute(insert(server_groups), {"uuid": str(uuidlib.uuid4()), "name": name, "policy": policy,
                                       "max_server_per_host": max_server_per_host, "created_at": utcnow()})
    return view(db, db.execute(select(server_groups).where(G.name == name)).one()), True


def remove(db: Connection, name: str, dry_run: bool) -> bool:
    row = db.execute(select(server_groups.c.uuid).where(G.name == name)).first()
    if row is None:
        return False
    if not dry_run:
        db.execute(delete(server_group_members).where(M.group_uuid == row.uuid))
        db.execute(delete(server_groups).where(G.uuid == row.uuid))
    return True


def listing(db: Connection, name: str | None) -> list[dict[str, Any]]:
    query = select(server_groups).order_by(G.name)
    if name is not None:
        query = query.where(G.name == name)
    return [view(db, row) for row in db.execute(query).all()]


def scheduler_group(db: Connection, name: str) -> dict[str, Any] | None:
    row = db.execute(select(server_groups).where(G.name == name)).first()
    return None if row is None else _scheduler_form(db, row)


def moving_member_group(db: Connection, instance_uuid: str) -> dict[str, Any] | None:
    """The server group of the instance ``instance_uuid`` as the scheduler sees it for a move of
    that instance: its members' hosts without the moving one's own claims, exactly what the
    move's claim re-checks (violation with ``moving``). None if it is in no group."""
    row = db.execute(select(server_groups).join(server_group_members, M.group_uuid == G.uuid)
                     .where(M.instance_uuid == instance_uuid)).first()
    return None if row is None else _scheduler_form(db, row, moving=instance_uuid)


def _scheduler_form(db: Connection, row: Any, moving: str | None = None) -> dict[str, Any]:
    per_host = collections.Counter(member_hosts(db, row, moving))
    return {"name": row.name, "policy": row.policy,
            "rules": {"max_server_per_host": row.max_server_per_host} if row.max_server_per_host else {},
            "hosts": sorted(per_host), "members": dict(sorted(per_host.items()))}
