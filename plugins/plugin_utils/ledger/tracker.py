"""The tracker sync (Nova's ResourceTracker update): hypervisors' host states into the ledger.

A sync writes what each hypervisor that answered reports: capacity, the facts the filters
read, the URI it was reached at, its images and networks, and its orphans as unmanaged usage;
then it reconciles the ledger with the domains found there (instances gone missing, builds
abandoned past their lease). A hypervisor that did not answer is marked down with the reason
and keeps its last synced state (its age makes it stale to the scheduler). Nothing here looks
at hypervisors outside the states given, so slices of a fleet can sync at the same time;
``mark_missing`` is the separate step that looks at the rest.

Every step is a few statements for the whole batch, not a query per hypervisor.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import and_, bindparam, delete, insert, select, tuple_, update
from sqlalchemy.engine import Connection

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import DEFAULT_POLICY, UriPolicy
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import data_volume_name, is_data_volume
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import artefacts as builds
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.claims import find_hypervisor, refresh_usage, release
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.database import insert_skipping
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.evacuations import finish_evacuation
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import (
    ACTIVE,
    BUILDING,
    CAPACITY_FIELDS,
    COLD_FACT_FIELDS,
    DIGEST_COLUMNS,
    DOMAIN,
    DOMAIN_STATE_INSTANCE_STATES,
    HOT_FACT_FIELDS,
    HOST_MEMORY_FIELDS,
    HV_DOWN,
    HV_MISSING,
    HV_UP,
    PLACED_STATES,
    artefact_dict,
    artefacts,
    claim_dict,
    claims,
    fact_digest,
    hypervisor_facts,
    hypervisor_images,
    hypervisor_networks,
    hypervisors,
    instances,
    iso,
    unmanaged_usage,
    volumes,
)

H = hypervisors.c
HT = hypervisors
UT = unmanaged_usage
FT = hypervisor_facts
C = claims.c
# Copied from the host state, and compared to say whether the hypervisor changed: capacity
# (its usage depends on it) and name. Facts are written every time without moving anything.
_COMPARED = ("name", "nodename", *CAPACITY_FIELDS)


def _domain_instance(domain: Mapping[str, Any]) -> str | None:
    berth = domain.get("berth")
    return berth.get("instance_uuid") if berth else None


def _within_range(state: Mapping[str, Any]) -> Mapping[str, Any]:
    """A host state with numbers or names the ledger's columns cannot hold is recorded as down,
    with why (host_facts.host_state does the same; this covers states given by hand)."""
    refusal = limits.host_state_refusal(state) if state.get("service_up") else None
    return {**state, "service_up": False, "down_reason": refusal} if refusal else state


def _uri_allowed(state: Mapping[str, Any], uri_policy: UriPolicy) -> Mapping[str, Any]:
    """A state whose URI the operator's policy refuses is recorded as down, with why, and its
    URI is never written: a launch would open it."""
    refusal = uri_policy.refusal(state["uri"]) if state.get("uri") else None
    if refusal is None:
        return state
    return {**state, "uri": None, "service_up": False,
            "down_reason": f"its URI is refused by Berth's URI policy: {refusal}"}


def _identity_conflicts(db: Connection, states: Sequence[Mapping[str, Any]],
                        uri_policy: UriPolicy) -> tuple[list[Mapping[str, Any]], list[dict[str, Any]]]:
    """A hypervisor's identity is the host UUID it reports, and a copied SMBIOS, a copied
    host_uuid or a hostile host can report another's. A state whose UUID the ledger holds for
    another name, or for the same name at another address (the URI without its parameters), is
    not written: it becomes down with why, and the conflict naming both is reported. So is
    every state of a UUID that several hosts of this sync report and the ledger holds for none
    of them. Only the operator re-homes a UUID (berth.fleet.hypervisor, state=rehomed)."""
    answering = [state for state in states if state.get("service_up") and state.get("uuid")]
    if not answering:
        return list(states), []
    owners = {row.uuid: row for row in db.execute(
        select(H.uuid, H.name, H.uri).where(H.uuid.in_(sorted({state["uuid"] for state in answering}))))}
    claimants: dict[str, list[Mapping[str, Any]]] = {}
    for state in answering:
        claimants.setdefault(state["uuid"], []).append(state)
    refused: dict[int, dict[str, Any]] = {}
    for uuid, hosts in claimants.items():
        owner = owners.get(uuid)
        for state in hosts:
            if owner is not None and owner.name == state["host"] and _same_address(owner.uri, state.get("uri"),
                                                                                   uri_policy):
                continue
            if owner is None and len(hosts) == 1:
                continue
            if owner is not None:
                other = {"host": owner.name, "uri": owner.uri, "owns": True}
            else:
                other = next({"host": s["host"], "uri": s.get("uri"), "owns": False} for s in hosts if s is not state)
            refused[id(state)] = {"host": state["host"], "uri": state.get("uri"), "uuid": uuid,
                                  "owner": other["host"], "owner_uri": other["uri"], "owned": other["owns"]}
    if not refused:
        return list(states), []
    kept = []
    for state in states:
        conflict = refused.get(id(state))
        if conflict is None:
            kept.append(state)
            continue
        whose = (f"the ledger holds it for hypervisor {conflict['owner']}" if conflict["owned"]
                 else f"hypervisor {conflict['owner']} reports it too, and the ledger holds it for neither")
        conflict["reason"] = (f"identity conflict: {state['host']} reports host UUID {conflict['uuid']}, and {whose}; "
                              f"nothing is written for it until the operator re-homes the UUID "
                              f"(berth.fleet.hypervisor state=rehomed) or one host's UUID is made unique")
        kept.append({**state, "uri": None, "service_up": False, "down_reason": conflict["reason"],
                     "conflicting_uuid": conflict["uuid"]})
    return kept, sorted(refused.values(), key=lambda conflict: (conflict["uuid"], conflict["host"]))


def _same_address(recorded: str | None, reported: str | None, uri_policy: UriPolicy) -> bool:
    """Whether two URIs reach the same place: the same URI without its parameters (a key file
    or known_hosts file may differ between controllers). A state without a URI says nothing,
    and a recorded URI the policy refuses (written by someone else: Berth never records one) is
    no address to defend: the operator's inventory puts the right one back."""
    if not recorded or not reported or recorded.split("?", 1)[0] == reported.split("?", 1)[0]:
        return True
    return uri_policy.refusal(recorded) is not None


def _answering(states: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted((s for s in states if s.get("service_up") and s.get("uuid")), key=lambda s: s["uuid"])


_EMPTY = {"aggregates": [], "supported_instances": [], "cpu_info": {}, "numa_topology": {}, "pci_devices": [],
          "metrics": {}, "pools": []}


def _fact(state: Mapping[str, Any], name: str) -> Any:
    value = state.get(name)
    return _EMPTY.get(name) if value is None and name in _EMPTY else value


def _row_values(state: Mapping[str, Any]) -> dict[str, Any]:
    """The hypervisor row's columns from a host state (the host-state schema of docs/docsite/rst/design.rst)."""
    values = {"name": state["host"], "nodename": state.get("nodename") or state["host"]}
    for name in ("vcpus_total", "total_usable_ram_mb", "reserved_host_memory_mb", "total_usable_disk_gb",
                 "reserved_host_disk_mb"):
        values[name] = int(state[name])
    for name in ("cpu_allocation_ratio", "ram_allocation_ratio", "disk_allocation_ratio"):
        values[name] = float(state[name])
    values.update({name: _fact(state, name) for name in HOT_FACT_FIELDS})
    return values


def _facts_values(state: Mapping[str, Any]) -> dict[str, Any]:
    """The hypervisor_facts row's columns from a host state."""
    values = {name: _fact(state, name) for name in COLD_FACT_FIELDS}
    values["numa_topology"], values["free_pages"] = _without_free_pages(values["numa_topology"])
    values.update({column: fact_digest(values[name]) for name, column in DIGEST_COLUMNS.items()})
    values["host_memory"] = {name: state.get(name) for name in HOST_MEMORY_FIELDS}
    return values


def _without_free_pages(topology: Any) -> tuple[Any, dict[str, dict[str, int]] | None]:
    """A host state's numa_topology as the ledger keeps it, without its pages' ``free`` counts,
    and those counts apart: ``{cell id: {size_kb: count}}`` with text keys (as reserved_pages,
    the same after JSON), only the counts libvirt gave, None where it gave none.

    The counts (virNodeGetFreePages) differ from host to host and from sync to sync, and no fit
    reads them (docs/docsite/rst/numa.rst). Inside the topology they would give every host its
    own text, where the scheduler parses each distinct text once and the hosts that share it
    share the parsed topology (host_states._parsed), and would make every sync rewrite it."""
    cells = topology.get("cells") if isinstance(topology, Mapping) else None
    if not isinstance(cells, list):
        return topology, None
    free: dict[str, dict[str, int]] = {}
    stored_cells = []
    for cell in cells:
        if not isinstance(cell, Mapping) or not isinstance(cell.get("pages"), list):
            stored_cells.append(cell)
            continue
        for page in cell["pages"]:
            if isinstance(page, Mapping) and page.get("free") is not None:
                free.setdefault(str(cell.get("id")), {})[str(page.get("size_kb"))] = page["free"]
        stored_cells.append({**cell, "pages": [
            {key: value for key, value in page.items() if key != "free"} if isinstance(page, Mapping) else page
            for page in cell["pages"]]})
    return {**topology, "cells": stored_cells}, free or None


def sync(db: Connection, states: Sequence[Mapping[str, Any]], now: dt.datetime,
         uri_policy: UriPolicy = DEFAULT_POLICY) -> dict[str, Any]:
    """Write the answering hypervisors of ``states`` and mark the others down; then reconcile
    each answering one's instances and claims with the domains it reported.

    Returns the report: hypervisors (per answering one: host, uuid, generation, changed,
    orphans), down, missing_instances, found_again, released_claims, kept_expired_claims,
    finished_builds, finished_evacuations, and, on the answering hypervisors, what dead builds left there
    (leftovers, see artefacts.sort_out), their orphan volumes (orphan_volumes), and the data
    volumes no volume of the ledger is (unrecorded_volumes).
    """
    states, conflicts = _identity_conflicts(db, [_within_range(_uri_allowed(state, uri_policy)) for state in states],
                                            uri_policy)
    answering = _answering(states)
    uuids = [state["uuid"] for state in answering]
    report: dict[str, Any] = {"hypervisors": [], "down": [], "missing_instances": [], "found_again": [],
                              "released_claims": [], "kept_expired_claims": [], "finished_builds": [],
                              "finished_evacuations": [], "leftovers": [], "orphan_volumes": [],
                              "unrecorded_volumes": [], "power_states": [],
                              "unfenced": [], "identity_conflicts": conflicts}
    inserted = _insert_new(db, answering, now)
    down = [state for state in states if not state.get("service_up")]
    # The row a conflicting state claims is its owner's: it stays as it is.
    spared = {state["conflicting_uuid"] for state in down if state.get("conflicting_uuid")}
    down_uuids = set(db.execute(select(H.uuid).where(H.name.in_([state["host"] for state in down]))).scalars())
    down_uuids -= spared
    # Every row this sync writes is locked at once, in UUID order, as claims lock them.
    locked = db.execute(
        select(H.uuid, H.generation, H.sync_status, H.uri, H.fenced_at,
               *(getattr(H, name) for name in (*_COMPARED, *HOT_FACT_FIELDS)))
        .where(H.uuid.in_([*uuids, *down_uuids])).order_by(H.uuid).with_for_update()).mappings()
    current = {row["uuid"]: row for row in locked}
    changed = set(inserted)
    rewrites, unchanged = [], []
    for state in answering:
        values = _row_values(state)
        row = current[state["uuid"]]
        if any(row[name] != values[name] for name in _COMPARED) or row["sync_status"] != HV_UP \
                or row["fenced_at"] is not None:
            changed.add(state["uuid"])
        # The URI the hypervisor was reached at this time; a state without one keeps the last.
        if state.get("uri"):
            values["uri"] = state["uri"]
        if state["uuid"] in changed or any(not _same(row[name], values[name]) for name in values):
            # A host that answers is not fenced any more (whatever fenced it is undone): an
            # evacuation needs it fenced again after it next goes down.
            rewrites.append({"key": state["uuid"], **values, "synced_at": now, "sync_status": HV_UP,
                             "down_reason": None, **UNFENCED})
            if row["fenced_at"] is not None:
                report["unfenced"].append({"host": state["host"], "uuid": state["uuid"],
                                           "fenced_at": iso(row["fenced_at"])})
        else:
            unchanged.append(state["uuid"])
    # Incremental: a hypervisor whose row would be written as it is only has its sync time
    # moved, all of them in one statement; the others are written in one executemany per set of
    # columns (a state without a URI keeps the last one).
    if unchanged:
        db.execute(update(HT).where(H.uuid.in_(bindparam("keys", expanding=True))).values(synced_at=now),
                   {"keys": unchanged})
    for with_uri in (True, False):
        rows = [row for row in rewrites if ("uri" in row) is with_uri]
        if rows:
            columns = {name: bindparam(name) for name in rows[0] if name != "key"}
            db.execute(update(HT).where(HT.c.uuid == bindparam("key")).values(columns), rows)
    _write_facts(db, answering)
    _replace_names(db, hypervisor_images, answering, "images", refusals="refused_images")
    _replace_names(db, hypervisor_networks, answering, "networks")
    orphans = _sync_unmanaged(db, answering, now, changed)
    refresh_usage(db, changed)
    generations = dict(db.execute(select(H.uuid, H.generation).where(H.uuid.in_(uuids))).all())
    for state in answering:
        report["hypervisors"].append({
            "host": state["host"], "uuid": state["uuid"], "generation": generations[state["uuid"]],
            "changed": state["uuid"] in changed, "orphans": sorted(orphans.get(state["uuid"], [])),
        })
    report["down"] = _mark_down(db, down, spared)
    _reconcile(db, answering, now, report)
    _leftovers(db, answering, report)
    _follow_power_states(db, answering, now, report)
    for claim in db.execute(select(claims).where(
            C.lease_expires_at < now, C.hypervisor_uuid.in_(sorted(down_uuids))).order_by(C.id)):
        report["kept_expired_claims"].append({**claim_dict(claim._mapping), "why": "its hypervisor did not answer"})
    report["changed"] = bool(changed) or any(entry["changed"] for entry in report["down"]) or any(
        report[key] for key in ("missing_instances", "found_again", "released_claims", "finished_builds",
                                "finished_evacuations", "power_states", "unfenced"))
    return report


# A hypervisor row's fencing, cleared (schema: fenced_at...).
UNFENCED = {"fenced_at": None, "fenced_by": None, "fence_method": None, "fence_output": None}


def _insert_new(db: Connection, answering: Sequence[Mapping[str, Any]], now: dt.datetime) -> set[str]:
    """Rows for hypervisors the ledger has never seen. Several runs may sync a new hypervisor at
    once: on PostgreSQL nothing is locked yet, so a row is inserted unless another run just
    did (ON CONFLICT DO NOTHING), and locked afterwards with the others."""
    uuids = [state["uuid"] for state in answering]
    known = set(db.execute(select(H.uuid).where(H.uuid.in_(uuids))).scalars())
    new = [state for state in answering if state["uuid"] not in known]
    if not new:
        return set()
    rows = [{"uuid": state["uuid"], "synced_at": now, "generation": 0, "disabled": False, "sync_status": HV_UP,
             **_row_values(state)} for state in new]
    return set(db.execute(insert_skipping(db.dialect.name, HT, "uuid"), rows).scalars())


def _write_facts(db: Connection, answering: Sequence[Mapping[str, Any]]) -> None:
    """Each answering hypervisor's hypervisor_facts row, as this sync read it. Only the columns
    that moved are written, in one executemany per set of them: an idle fleet's steady sync
    rewrites nothing here, and one where only free page counts or metrics moved leaves the
    topology, capabilities and devices as they are."""
    if not answering:
        return
    rows = [{"key": state["uuid"], **_facts_values(state)} for state in answering]
    names = [name for name in rows[0] if name != "key"]
    have = {row.hypervisor_uuid: row._mapping for row in db.execute(
        select(FT.c.hypervisor_uuid, *(FT.c[name] for name in names))
        .where(FT.c.hypervisor_uuid.in_([r["key"] for r in rows])))}
    moved: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in rows:
        if row["key"] in have:
            columns = tuple(name for name in names if not _same(have[row["key"]][name], row[name]))
            if columns:
                moved.setdefault(columns, []).append({"key": row["key"], **{name: row[name] for name in columns}})
    for columns, changes in moved.items():
        db.execute(update(FT).where(FT.c.hypervisor_uuid == bindparam("key"))
                   .values({name: bindparam(name) for name in columns}), changes)
    new = [{"hypervisor_uuid": row.pop("key"), **row} for row in rows if row["key"] not in have]
    if new:
        db.execute(insert(FT), new)


def _same(stored: Any, value: Any) -> bool:
    """Whether a column holds ``value`` already; JSON columns give back lists where the state
    may hold tuples, so a value is compared as it would be stored too."""
    if stored == value:
        return True
    if isinstance(value, (list, tuple, dict)):
        return stored == json.loads(json.dumps(value))
    return False


def _replace_names(db: Connection, table: Any, answering: Sequence[Mapping[str, Any]], key: str,
                   refusals: str | None = None) -> None:
    """Make the rows of ``table`` (images or networks) those the states list, where they list any;
    with ``refusals``, each image's row keeps why it is refused (the state's ``refusals`` field)."""
    listed = {state["uuid"]: {name: None for name in state[key]} for state in answering if state.get(key) is not None}
    if refusals:
        for state in answering:
            if state["uuid"] in listed:
                listed[state["uuid"]].update(state.get(refusals) or {})
    if not listed:
        return
    columns = [table.c.hypervisor_uuid, table.c.name] + ([table.c.refused] if refusals else [])
    have: dict[str, dict[str, Any]] = {}
    for row in db.execute(select(*columns).where(table.c.hypervisor_uuid.in_(listed))):
        have.setdefault(row[0], {})[row[1]] = row[2] if refusals else None
    gone = [(hv_uuid, name) for hv_uuid, names in have.items() for name in names
            if name not in listed[hv_uuid] or names[name] != listed[hv_uuid][name]]
    new = [{"hypervisor_uuid": hv_uuid, "name": name, **({"refused": why} if refusals else {})}
           for hv_uuid, names in listed.items() for name, why in sorted(names.items())
           if name not in have.get(hv_uuid, {}) or have[hv_uuid][name] != why]
    if gone:
        db.execute(delete(table).where(tuple_(table.c.hypervisor_uuid, table.c.name).in_(gone)))
    if new:
        db.execute(insert(table), new)


def _sync_unmanaged(db: Connection, answering: Sequence[Mapping[str, Any]], now: dt.datetime,
                    changed: set[str]) -> dict[str, list[str]]:
    """Orphans (domains without a claim on their hypervisor) become unmanaged usage; those gone
    are dropped. A domain is managed when the ledger holds a claim for its instance on that very
    hypervisor (the domain UUID is the instance UUID). Adds the hypervisors whose unmanaged
    usage moved to ``changed``; returns the orphans' names per hypervisor."""
    uuids = [state["uuid"] for state in answering]
    claimed: dict[str, set[str]] = {}
    for hv_uuid, instance_uuid in db.execute(
            select(C.hypervisor_uuid, C.instance_uuid).where(C.hypervisor_uuid.in_(uuids))):
        claimed.setdefault(hv_uuid, set()).add(instance_uuid)
    known: dict[tuple[str, str], tuple[Any, ...]] = {
        (row.hypervisor_uuid, row.domain_uuid): (row.domain_name, row.vcpus, row.memory_mb, row.disk_mb,
                                                 row.assignment)
        for row in db.execute(select(UT).where(UT.c.hypervisor_uuid.in_(uuids)))
    }
    wanted: dict[tuple[str, str], tuple[Any, ...]] = {}
    names: dict[str, list[str]] = {}
    for state in answering:
        ours = claimed.get(state["uuid"], set())
        for dom in state.get("domains", []):
            if dom["uuid"] in ours or _domain_instance(dom) in ours:
                continue
            disk_mb = sum(int(d["capacity_mb"]) for d in dom.get("disks", []))
            wanted[(state["uuid"], dom["uuid"])] = (dom["name"], int(dom["vcpus"]), int(dom["memory_mb"]), disk_mb,
                                                    foreign_assignment(dom.get("holds"), state.get("numa_topology")))
            names.setdefault(state["uuid"], []).append(dom["name"])
    gone = [key for key in known if key not in wanted]
    new = [key for key in wanted if key not in known]
    moved = [key for key in wanted if key in known and known[key] != wanted[key]]
    if gone:
        db.execute(delete(UT).where(tuple_(UT.c.hypervisor_uuid, UT.c.domain_uuid).in_(gone)))
    if new:
        db.execute(insert(UT), [
            {"hypervisor_uuid": hv, "domain_uuid": dom, "domain_name": wanted[(hv, dom)][0],
             "vcpus": wanted[(hv, dom)][1], "memory_mb": wanted[(hv, dom)][2], "disk_mb": wanted[(hv, dom)][3],
             "assignment": wanted[(hv, dom)][4], "seen_at": now} for hv, dom in new])
    if moved:
        db.execute(
            update(UT).where(and_(UT.c.hypervisor_uuid == bindparam("hv"), UT.c.domain_uuid == bindparam("dom")))
            .values(domain_name=bindparam("domain_name"), vcpus=bindparam("vcpus"),
                    memory_mb=bindparam("memory_mb"), disk_mb=bindparam("disk_mb"),
                    assignment=bindparam("assignment")),
            [{"hv": hv, "dom": dom, "domain_name": wanted[(hv, dom)][0], "vcpus": wanted[(hv, dom)][1],
              "memory_mb": wanted[(hv, dom)][2], "disk_mb": wanted[(hv, dom)][3],
              "assignment": wanted[(hv, dom)][4]} for hv, dom in moved])
    changed.update(hv for hv, _dom in [*gone, *new, *moved])
    return names


def foreign_assignment(holds: Mapping[str, Any] | None,
                       topology: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The assignment of a domain Berth did not make (docs/docsite/rst/numa.rst), from what its
    XML holds (host_devices.domain_holdings): each vCPU pinned to one host CPU as a pinning on
    that CPU's cell, an emulator pinned to one CPU as isolated there, its PCI host devices. None
    when it holds none of these. Its memory is not placed on cells: libvirt does not say where
    a foreign guest's memory is, as Nova's tracker does not either."""
    if not holds:
        return None
    cell_of = {cpu: cell.get("id") for cell in (topology or {}).get("cells") or [] for cpu in cell.get("cpus") or []}
    cells: dict[Any, dict[str, Any]] = {}
    for vcpu, cpu in sorted((holds.get("pins") or {}).items(), key=lambda pin: int(pin[0])):
        cell = cells.setdefault(cell_of.get(cpu), {"id": len(cells), "host_cell": cell_of.get(cpu), "vcpus": [],
                                                   "memory_mb": 0, "page_size_kb": None, "pinning": {}})
        cell["vcpus"].append(int(vcpu))
        cell["pinning"][str(vcpu)] = cpu
    assignment: dict[str, Any] = {}
    emulator = holds.get("emulator")
    if cells or emulator is not None:
        assignment["numa"] = {"cpu_policy": "dedicated", "cells": list(cells.values()),
                              "emulator_cpus": [emulator] if emulator is not None else None,
                              "emulator_isolated": emulator is not None}
    if holds.get("pci"):
        assignment["pci"] = [{"address": address, "alias": None, "dev_type": None, "numa_node": None}
                             for address in holds["pci"]]
    return assignment or None


def _mark_down(db: Connection, down: Sequence[Mapping[str, Any]], spared: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Hypervisors that did not answer: down, with why; their last synced state stays. The rows
    of ``spared`` (UUIDs another host claimed) are not this sync's to touch."""
    reasons = {state["host"]: state.get("down_reason") or "did not answer" for state in down}
    entries: list[dict[str, Any]] = []
    if not reasons:
        return entries
    rows = db.execute(select(H.uuid, H.name, H.sync_status, H.down_reason, H.synced_at)
                      .where(H.name.in_(sorted(reasons))).order_by(H.uuid)).all()
    for uuid, name, status, old_reason, synced_at in rows:
        if uuid in spared:
            continue
        changed = (status, old_reason) != (HV_DOWN, reasons[name])
        if changed:
            db.execute(update(HT).where(H.uuid == uuid).values(sync_status=HV_DOWN, down_reason=reasons[name]))
        entries.append({"host": name, "uuid": uuid, "reason": reasons[name], "last_synced_at": iso(synced_at),
                        "changed": changed})
    return entries


def _reconcile(db: Connection, answering: Sequence[Mapping[str, Any]], now: dt.datetime,
               report: dict[str, Any]) -> None:
    """On the hypervisors that answered: instances placed there (ACTIVE, STOPPED, PAUSED) whose
    domain is gone are flagged missing (and found again); claims whose lease expired are settled
    (``_settle``)."""
    domains = {state["uuid"]: {d["uuid"] for d in state.get("domains", [])} for state in answering}
    active = db.execute(select(instances.c.uuid, instances.c.name, instances.c.host, instances.c.hypervisor_uuid,
                               instances.c.missing_since, instances.c.state)
                        .where(instances.c.state.in_(PLACED_STATES), instances.c.hypervisor_uuid.in_(list(domains)))
                        .order_by(instances.c.name)).all()
    for instance in active:
        entry = {"name": instance.name, "uuid": instance.uuid, "host": instance.host, "state": instance.state}
        if instance.uuid not in domains[instance.hypervisor_uuid]:
            missing_since = instance.missing_since or now
            if instance.missing_since is None:
                db.execute(update(instances).where(instances.c.uuid == instance.uuid).values(missing_since=now))
            report["missing_instances"].append({**entry, "missing_since": iso(missing_since)})
        elif instance.missing_since is not None:
            db.execute(update(instances).where(instances.c.uuid == instance.uuid).values(missing_since=None))
            report["found_again"].append(entry)
    _settle(db, answering, now, report)


def _settle(db: Connection, answering: Sequence[Mapping[str, Any]], now: dt.datetime,
            report: dict[str, Any]) -> None:
    """Claims whose lease expired on the hypervisors that answered: the run that held them died.

    - A BUILDING instance whose domain runs there got as far as starting it: only the last
      word to the ledger was lost, so the sync finishes the build (ACTIVE, no lease).
    - Any other BUILDING instance's build is dead: what it left there is recorded as
      artefacts (the sync reclaims them, see ``_leftovers``), then its claim is released and it
      becomes ERROR.
    - The claim of an instance being moved (not BUILDING) is released only when the instance's
      domain is not there.
    """
    states = {state["uuid"]: state for state in answering}
    domain_states = {state["uuid"]: {d["uuid"]: d.get("state") for d in state.get("domains", [])}
                     for state in answering}
    expired = db.execute(
        select(claims, instances.c.state.label("instance_state"), instances.c.name.label("instance_name"))
        .join(instances, instances.c.uuid == C.instance_uuid)
        .where(C.lease_expires_at < now, C.hypervisor_uuid.in_(list(states))).order_by(C.id)).all()
    touched = set()
    for claim in expired:
        state = states[claim.hypervisor_uuid]
        entry = {**claim_dict(claim._mapping, state["host"]), "instance_name": claim.instance_name}
        domain_state = domain_states[claim.hypervisor_uuid].get(claim.instance_uuid)
        if claim.instance_state == BUILDING and domain_state in builds.ACTIVE_DOMAIN_STATES:
            db.execute(update(instances).where(instances.c.uuid == claim.instance_uuid).values(
                state=ACTIVE, failure_reason=None, updated_at=now))
            db.execute(update(claims).where(C.id == claim.id).values(lease_expires_at=None))
            builds.drop(db, claim.instance_uuid, claim.hypervisor_uuid)
            report["finished_builds"].append({**entry, "domain_state": domain_state})
        elif claim.instance_state == BUILDING:
            builds.record_found(db, state, claim.instance_uuid, claim.instance_name, now)
            found = f"its domain is {domain_state}" if domain_state else "no domain"
            release(db, claim, f"build abandoned by {claim.owner}: lease expired at "
                               f"{iso(claim.lease_expires_at)} and {found} on {state['host']}", now)
            report["released_claims"].append({**entry, "domain_state": domain_state})
        elif domain_state in builds.ACTIVE_DOMAIN_STATES and _evacuated_from_fenced(db, claim):
            # An evacuation started the domain here and died before its last word: its old host
            # is fenced, so the copy here is the one that runs. Its domain there is recorded as
            # left (its volumes, which may be on a shared pool, are not: the sync that reaches
            # that host reports them as orphans).
            finish_evacuation(db, claim.instance_uuid, claim.id, [{"kind": DOMAIN, "pool": None,
                                                                   "name": claim.instance_name}], None, claim.owner, now)
            report["finished_evacuations"].append({**entry, "domain_state": domain_state})
        elif domain_state is not None:
            report["kept_expired_claims"].append({**entry, "why": "its domain exists"})
            continue
        else:
            release(db, claim, f"move abandoned by {claim.owner}: lease expired at "
                               f"{iso(claim.lease_expires_at)} and no domain on {state['host']}", now)
            report["released_claims"].append({**entry, "domain_state": None})
        touched.add(claim.hypervisor_uuid)
    refresh_usage(db, touched)


def _evacuated_from_fenced(db: Connection, claim: Any) -> bool:
    """Whether ``claim`` is an evacuation's: its instance is placed on another hypervisor, which
    is fenced."""
    fenced_at = db.execute(select(H.fenced_at).join(instances, instances.c.hypervisor_uuid == H.uuid).where(
        instances.c.uuid == claim.instance_uuid, instances.c.hypervisor_uuid != claim.hypervisor_uuid)).scalar()
    return fenced_at is not None


def _leftovers(db: Connection, answering: Sequence[Mapping[str, Any]], report: dict[str, Any]) -> None:
    """What dead builds left on the hypervisors that answered, and their orphan volumes
    (artefacts.sort_out), into the report; the tracker_sync action removes the leftovers."""
    uuids = [state["uuid"] for state in answering]
    claimed: dict[str, set[str]] = {}
    for hv_uuid, instance_uuid in db.execute(
            select(C.hypervisor_uuid, C.instance_uuid).where(C.hypervisor_uuid.in_(uuids))):
        claimed.setdefault(hv_uuid, set()).add(instance_uuid)
    recorded: dict[str, list[dict[str, Any]]] = {}
    for row in db.execute(select(artefacts).where(artefacts.c.hypervisor_uuid.in_(uuids))
                          .order_by(artefacts.c.id)):
        recorded.setdefault(row.hypervisor_uuid, []).append(artefact_dict(row._mapping))
    for state in answering:
        hv_uuid = state["uuid"]
        groups, orphans = builds.sort_out(state, claimed.get(hv_uuid, ()), recorded.get(hv_uuid, []))
        builds.why_left(db, groups, hv_uuid)
        report["leftovers"] += [{**group, "host": state["host"], "hypervisor_uuid": hv_uuid} for group in groups]
        report["orphan_volumes"] += [{"host": state["host"], "pool": state.get("storage_pool"), "name": name}
                                     for name in orphans]
    # Data volumes by name, whatever host their row says (a shared pool's is seen from every host).
    known = {data_volume_name(name) for name in db.execute(select(volumes.c.name)).scalars()}
    for state in answering:
        # A launch's volume a dead build left is that build's artefact, reported as its leftover.
        left = {row["name"] for row in recorded.get(state["uuid"], [])}
        report["unrecorded_volumes"] += [
            {"host": state["host"], "pool": state.get("storage_pool"), "name": name}
            for name in state.get("data_volumes", []) if is_data_volume(name) and name not in known | left]


def _follow_power_states(db: Connection, answering: Sequence[Mapping[str, Any]], now: dt.datetime,
                         report: dict[str, Any]) -> None:
    """The ledger's state of each placed instance follows its domain's power state, which the
    hypervisor alone knows: a guest that powered itself off is STOPPED (as Nova's power-state
    sync makes it), one that someone started or resumed with virsh is ACTIVE again, one paused
    there is PAUSED. Each change is reported. Left alone: an instance the ledger changed after
    these facts were gathered (a power action of Berth's is newer than what the sync saw), one
    with an action under way (a claim with a lease: a move or a resize), and libvirt's states
    in between (being shut down, no state). Nothing is ever done to a domain here."""
    seen: dict[tuple[str, str], tuple[str, dt.datetime]] = {}
    for state in answering:
        gathered = state.get("gathered_at")
        # Facts without their time count as read now (a state given by hand).
        read_at = dt.datetime.fromtimestamp(gathered, dt.timezone.utc).replace(tzinfo=None) if gathered else now
        for dom in state.get("domains", []):
            seen[(state["uuid"], dom["uuid"])] = (dom.get("state") or "", read_at)
    if not seen:
        return
    placed = db.execute(select(instances.c.uuid, instances.c.name, instances.c.host, instances.c.hypervisor_uuid,
                               instances.c.state, instances.c.updated_at)
                        .where(instances.c.state.in_(PLACED_STATES),
                               instances.c.hypervisor_uuid.in_(sorted({hv for hv, _dom in seen})))
                        .order_by(instances.c.name)).all()
    busy = set(db.execute(select(C.instance_uuid).where(
        C.lease_expires_at.is_not(None), C.instance_uuid.in_([row.uuid for row in placed]))).scalars())
    for row in placed:
        domain_state, read_at = seen.get((row.hypervisor_uuid, row.uuid), ("", now))
        follows = DOMAIN_STATE_INSTANCE_STATES.get(domain_state)
        if follows is None or follows == row.state or row.uuid in busy or row.updated_at > read_at:
            continue
        db.execute(update(instances).where(instances.c.uuid == row.uuid).values(state=follows, updated_at=now))
        report["power_states"].append({"name": row.name, "uuid": row.uuid, "host": row.host, "was": row.state,
                                       "domain_state": domain_state, "now": follows})


def mark_missing(db: Connection, listed: Iterable[str], stale_before: dt.datetime,
                 dry_run: bool) -> dict[str, Any]:
    """Hypervisors of the ledger that the inventory does not list (``listed``: its names).

    One that nothing has synced since ``stale_before`` is missing: marked so, and reported,
    never retired. One synced since then is left as it is: another slice or controller syncs
    it. Returns {missing, synced_elsewhere, changed}.
    """
    names = set(listed)
    report: dict[str, Any] = {"missing": [], "synced_elsewhere": [], "changed": False}
    rows = db.execute(select(H.uuid, H.name, H.sync_status, H.synced_at).order_by(H.name)).all()
    for uuid, name, status, synced_at in rows:
        if name in names:
            continue
        entry = {"host": name, "uuid": uuid, "last_synced_at": iso(synced_at)}
        if synced_at is not None and synced_at >= stale_before:
            report["synced_elsewhere"].append(entry)
            continue
        report["missing"].append(entry)
        if status != HV_MISSING:
            report["changed"] = True
            if not dry_run:
                db.execute(update(HT).where(H.uuid == uuid).values(sync_status=HV_MISSING))
    return report


# ---- operators' acts on hypervisors ------------------------------------------------------------

def set_disabled(db: Connection, host: str, disabled: bool, reason: str | None, dry_run: bool) -> dict[str, Any]:
    """Ledger.set_disabled's transaction (see there)."""
    row = find_hypervisor(db, host)
    wanted_reason = reason if disabled else None
    changed = row.disabled != disabled or row.disabled_reason != wanted_reason
    if changed and not dry_run:
        db.execute(update(HT).where(H.uuid == row.uuid).values(
            disabled=disabled, disabled_reason=wanted_reason, generation=H.generation + 1))
    return {"changed": changed, "host": row.name, "uuid": row.uuid, "disabled": disabled,
            "disabled_reason": wanted_reason}


def rehome(db: Connection, host: str, name: str | None, uri: str | None, reason: str, now: dt.datetime,
           dry_run: bool) -> dict[str, Any]:
    """Ledger.rehome_hypervisor's transaction (see there)."""
    row = find_hypervisor(db, host)
    name = name or row.name
    uri = uri or row.uri
    if name != row.name:
        holder = db.execute(select(H.uuid).where(H.name == name, H.uuid != row.uuid)).scalar()
        if holder is not None:
            raise InputError("name", f"hypervisor {name} is in the ledger already, with host UUID {holder}: retire it "
                                     f"first (berth.fleet.hypervisor state=retired) if {row.uuid} is that host now")
    changed = (row.name, row.uri) != (name, uri)
    if changed and not dry_run:
        db.execute(update(HT).where(H.uuid == row.uuid).values(
            name=name, uri=uri, rehomed_reason=reason, rehomed_at=now, generation=H.generation + 1))
        db.execute(update(instances).where(instances.c.hypervisor_uuid == row.uuid).values(host=name))
    return {"changed": changed, "host": name, "uuid": row.uuid, "was": {"host": row.name, "uri": row.uri},
            "uri": uri, "rehomed_reason": reason if changed else row.rehomed_reason}


def retire(db: Connection, host: str, now: dt.datetime, dry_run: bool) -> dict[str, Any]:
    """Ledger.retire_hypervisor's transaction (see there)."""
    row = find_hypervisor(db, host, missing_ok=True)
    if row is None:
        return {"changed": False, "host": host, "released_claims": []}
    held = db.execute(select(claims).where(C.hypervisor_uuid == row.uuid)).all()
    released = [claim_dict(claim._mapping, row.name) for claim in held]
    for claim in held:
        release(db, claim, f"hypervisor {row.name} was retired", now)
    db.execute(update(instances).where(instances.c.hypervisor_uuid == row.uuid).values(hypervisor_uuid=None))
    # Its facts, images, networks and unmanaged usage go with it (ON DELETE CASCADE); a dry run is
    # rolled back by the caller.
    db.execute(delete(HT).where(H.uuid == row.uuid))
    return {"changed": True, "host": row.name, "uuid": row.uuid, "released_claims": released}


# ---- CPU baseline groups (module_utils/cpu_baseline.py) ----------------------------------------

def cpu_baselines(db: Connection, names: Sequence[str]) -> dict[str, Any]:
    """{hypervisor name: the CPU baseline recorded on its guest CPU record} of those of ``names``
    that have one."""
    found = {}
    for name, cpu_info in db.execute(select(H.name, hypervisor_facts.c.cpu_info)
                                     .join(hypervisor_facts, hypervisor_facts.c.hypervisor_uuid == H.uuid)
                                     .where(H.name.in_(list(names)))):
        cpu_info = json.loads(cpu_info) if isinstance(cpu_info, str) else cpu_info
        guest = cpu_info.get("guest") if isinstance(cpu_info, Mapping) else None
        if isinstance(guest, Mapping) and isinstance(guest.get("baseline"), Mapping):
            found[name] = dict(guest["baseline"])
    return found


def record_cpu_baseline(db: Connection, names: Sequence[str], baseline: Mapping[str, Any]) -> list[str]:
    """Record ``baseline`` on the guest CPU record of each hypervisor of ``names``; the names of
    those whose record changed. A later sync keeps it as long as the host is in the group (the
    sync gives it back with the host's state)."""
    changed = []
    for name, uuid, cpu_info in db.execute(
            select(H.name, H.uuid, hypervisor_facts.c.cpu_info)
            .join(hypervisor_facts, hypervisor_facts.c.hypervisor_uuid == H.uuid)
            .where(H.name.in_(list(names))).order_by(H.uuid).with_for_update()).all():
        cpu_info = json.loads(cpu_info) if isinstance(cpu_info, str) else dict(cpu_info or {})
        guest = dict(cpu_info.get("guest") or {})
        if guest.get("baseline") == baseline:
            continue
        db.execute(update(hypervisor_facts).where(hypervisor_facts.c.hypervisor_uuid == uuid)
                   .values(cpu_info={**cpu_info, "guest": {**guest, "baseline": dict(baseline)}}))
        changed.append(name)
    return sorted(changed)
