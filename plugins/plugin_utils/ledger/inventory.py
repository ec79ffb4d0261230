"""What the instances inventory (berth.fleet.instances) reads: the instances in some states, each
with its server group and what its hypervisor's last sync recorded (the URI to reach it, whether
it answered)."""

from __future__ import annotations

from typing import Any, Sequence

from sqlalchemy import select
from sqlalchemy.engine import Connection

from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import (
    hypervisors,
    instance_dict,
    instances,
    server_group_members,
    server_groups,
)

N = instances.c
H = hypervisors.c
M = server_group_members.c
G = server_groups.c


def listing(db: Connection, states: Sequence[str]) -> list[dict[str, Any]]:
    """The instances in ``states``, by name: each its ledger row plus ``server_group`` ({name,
    policy} or None), ``uri`` (its hypervisor's, as the last sync recorded it; None if unknown)
    and ``hypervisor_status`` (up, down or missing; None without a hypervisor)."""
    # Not the recorded launch request (what moves schedule and define with, user options
    # included): a host's variables have no use for it.
    columns = [column for column in instances.c if column.name != "request"]
    query = (select(*columns, H.uri, H.sync_status, G.name.label("group_name"), G.policy.label("group_policy"))
             .outerjoin(hypervisors, H.uuid == N.hypervisor_uuid)
             .outerjoin(server_group_members, M.instance_uuid == N.uuid)
             .outerjoin(server_groups, G.uuid == M.group_uuid)
             .where(N.state.in_(list(states)))
             .order_by(N.name))
    found = []
    for row in db.execute(query):
        group = {"name": row.group_name, "policy": row.group_policy} if row.group_name else None
        instance = instance_dict(row._mapping)
        del instance["request"]
        found.append({**instance, "server_group": group, "uri": row.uri, "hypervisor_status": row.sync_status})
    return found
