"""The ledger: Berth's placement state in a SQL database (SQLite file by default, or PostgreSQL).

This package is the only part of Berth that imports SQLAlchemy; it runs on the controller only.
``Ledger`` is its one entrance: each method is one transaction, and a database failure comes
out as a LedgerError that says what to do. Inside, one file per idea:

- schema.py: the tables; database.py: URL, engine, migrations (migrations/), errors;
- tracker.py: the tracker sync (hypervisors' host states in, reconciliation, missing hosts);
- host_states.py: the scheduler's read (every host state in one scan, as the engine's columns);
- claims.py: claims and the instances they belong to, with the re-check under lock;
- server_groups.py: groups, members, and the hard-policy check; decisions.py: decision records.

Usage the scheduler decides on (the tracker view) is the ledger's claims plus the unmanaged
usage a sync recorded; capacity is the last synced copy of the facts, with a generation that
moves whenever capacity or usage does.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from ansible_collections.berth.fleet.plugins.module_utils.errors import LedgerError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    claims,
    decisions,
    host_states,
    server_groups,
    tracker,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.claims import (
    DEFAULT_LEASE_S,
    UNSAFE_CLAIMS_ENV,
    ClaimConflict,
    instance_flavor,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.database import (
    MIGRATIONS_DIR,
    SCHEMA_REVISION,
    database_errors,
    default_url,
    open_engine,
    reader,
    run_owner,
    safe_url,
    utcnow,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import (
    ACTIVE,
    AFFINITY,
    ANTI_AFFINITY,
    BUILDING,
    ERROR,
    HV_DOWN,
    HV_MISSING,
    HV_UP,
    POLICIES,
    SOFT_AFFINITY,
    SOFT_ANTI_AFFINITY,
    Base,
    ClaimRow,
    HypervisorRow,
    InstanceRow,
)

__all__ = [
    "ACTIVE", "AFFINITY", "ANTI_AFFINITY", "BUILDING", "DEFAULT_LEASE_S", "ERROR", "HV_DOWN", "HV_MISSING",
    "HV_UP", "MIGRATIONS_DIR", "POLICIES", "SCHEMA_REVISION", "SOFT_AFFINITY", "SOFT_ANTI_AFFINITY",
    "UNSAFE_CLAIMS_ENV", "Base", "ClaimConflict", "Ledger", "default_url", "instance_flavor", "run_owner",
    "safe_url", "utcnow",
]


class Ledger:
    """The ledger at one URL; ``open()`` migrates it to the newest schema first."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or default_url()
        self.engine: Any = None
        self._reader: Any = None

    def open(self) -> Ledger:
        self.engine = open_engine(self.url)
        self._reader = reader(self.engine)
        return self

    def close(self) -> None:
        if self.engine is not None:
            self.engine.dispose()

    def session(self) -> Session:
        """A session for writing: on SQLite its transaction takes the write lock at once."""
        if self.engine is None:
            self.open()
        return Session(self.engine, expire_on_commit=False)

    def _read(self) -> Session:
        """A session for reading only: no write lock, a consistent snapshot."""
        if self.engine is None:
            self.open()
        return Session(self._reader, expire_on_commit=False)

    # ---- the tracker sync ----------------------------------------------------------------------

    @database_errors
    def sync_hypervisors(self, states: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Record each answering hypervisor's state (capacity, facts, images, networks, orphans).

        Returns, per answering hypervisor: host, uuid, generation, changed, orphans.
        """
        with self.session() as session, session.begin():
            return tracker.sync(session, list(states), utcnow())["hypervisors"]

    @database_errors
    def tracker_sync(self, states: Sequence[Mapping[str, Any]], dry_run: bool = False) -> dict[str, Any]:
        """The periodic tracker sync (playbooks/gather.yml) of these hypervisors only: their
        states, the down ones marked down, their instances and expired claims reconciled.

        - ACTIVE instances whose domain is not on their answering hypervisor are flagged missing.
        - a claim is released only when its lease has expired, its hypervisor answered and the
          instance's domain does not exist there; its BUILDING instance becomes ERROR.
        ``dry_run`` works it all out and writes nothing (check mode).
        """
        with self.session() as session, session.begin():
            report = tracker.sync(session, list(states), utcnow())
            if dry_run:
                session.rollback()
            return report

    @database_errors
    def mark_missing(self, listed: Iterable[str], stale_after_s: float, dry_run: bool = False) -> dict[str, Any]:
        """Hypervisors the inventory (``listed``: all its names) does not list and nothing has
        synced for ``stale_after_s`` seconds are missing: marked and reported, never retired."""
        stale_before = utcnow() - dt.timedelta(seconds=stale_after_s)
        with self.session() as session, session.begin():
            return tracker.mark_missing(session, listed, stale_before, dry_run)

    # ---- what the scheduler reads ------------------------------------------------------------

    @database_errors
    def host_table(self, fields: Iterable[str] = (), images: Sequence[str] = (),
                   networks: Sequence[str] = (), uuids: Sequence[str] | None = None) -> tuple[HostTable, list[int]]:
        """Every hypervisor as the engine's columns, with the generation each was read at (see
        host_states.read_table)."""
        with self._read() as session, session.begin():
            return host_states.read_table(session, utcnow(), fields, images, networks, uuids)

    @database_errors
    def tracker_states(self, states: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Live host states with their usage taken from the ledger instead of the hypervisor,
        the operator's disabled flag, and the generation the view was read at."""
        with self._read() as session, session.begin():
            return host_states.tracker_states(session, states)

    @database_errors
    def build_targets(self, uuids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """{uuid: {host, hypervisor_uuid, uri, domain_types}} for building on these hypervisors."""
        with self._read() as session, session.begin():
            return host_states.build_targets(session, uuids)

    @database_errors
    def hypervisors(self, uuids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Every hypervisor (or those of ``uuids``) with its inventories, usage and unmanaged domains."""
        with self._read() as session, session.begin():
            return host_states.hypervisor_list(session, uuids)

    # ---- operators' actions on hypervisors -------------------------------------------------

    @database_errors
    def set_disabled(self, host: str, disabled: bool, reason: str | None = None,
                     dry_run: bool = False) -> dict[str, Any]:
        """Disable (with a reason) or enable a hypervisor; ``changed`` says if anything moved."""
        with self.session() as session, session.begin():
            return tracker.set_disabled(session, host, disabled, reason, dry_run)

    @database_errors
    def retire_hypervisor(self, host: str, dry_run: bool = False) -> dict[str, Any]:
        """Forget a hypervisor for good: drop its claims (their instances become ERROR unless they
        hold another claim), its facts and unmanaged usage. The operator's explicit act."""
        with self.session() as session, session.begin():
            return tracker.retire(session, host, utcnow(), dry_run)

    # ---- instances and claims ------------------------------------------------------------------

    @database_errors
    def instances(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Instances by name, each with the URI of its hypervisor's last sync (``uri``)."""
        with self._read() as session, session.begin():
            query = (select(InstanceRow, HypervisorRow.uri)
                     .outerjoin(HypervisorRow, HypervisorRow.uuid == InstanceRow.hypervisor_uuid)
                     .order_by(InstanceRow.name))
            if names is not None:
                query = query.where(InstanceRow.name.in_(list(names)))
            return [{**row.to_dict(), "uri": uri} for row, uri in session.execute(query)]

    @database_errors
    def claims(self, instance_uuid: str | None = None) -> list[dict[str, Any]]:
        with self._read() as session, session.begin():
            query = select(ClaimRow, HypervisorRow.name).join(
                HypervisorRow, HypervisorRow.uuid == ClaimRow.hypervisor_uuid).order_by(ClaimRow.id)
            if instance_uuid is not None:
                query = query.where(ClaimRow.instance_uuid == instance_uuid)
            return [claim.to_dict(name) for claim, name in session.execute(query)]

    @database_errors
    def claim(self, placements: Sequence[Mapping[str, Any]], flavor: Flavor, owner: str,
              lease_s: int = DEFAULT_LEASE_S, server_group: str | None = None,
              image: str | None = None) -> list[dict[str, Any]]:
        """Write BUILDING instances and their claims in one transaction, or nothing.

        ``placements`` are dicts with ``name``, ``host`` and ``hypervisor_uuid`` (and optionally
        the ``generation`` the decision saw). The chosen hypervisors and the server group are
        locked; each host's room is re-checked from the ledger itself (capacity, claims,
        unmanaged usage) and the group's hard policy against its members' hosts; if anything no
        longer fits, ClaimConflict is raised and nothing is written. Each claim carries ``owner``
        and a lease of ``lease_s`` seconds. Instances of these names in ERROR are replaced.
        Returns the instances, each with ``claim_id`` and ``generation_moved`` (the host changed
        since the decision, and the re-check found it still fits).
        """
        with self.session() as session, session.begin():
            return claims.claim(session, placements, flavor, owner, lease_s, server_group, image)

    @database_errors
    def claim_move(self, instance_uuid: str, hypervisor_uuid: str, owner: str,
                   lease_s: int = DEFAULT_LEASE_S) -> dict[str, Any]:
        """Claim the destination of a move for an instance that keeps its current claim.

        Locked and re-checked as ``claim`` does (room, and the hard policy of the instance's
        server group with the destination added); raises ClaimConflict if it does not fit.
        Complete the move with ``finish_move``, or give the destination back with ``release_claim``.
        """
        with self.session() as session, session.begin():
            return claims.claim_instance_on(session, instance_uuid, hypervisor_uuid, owner, lease_s,
                                            keep_others=True)

    @database_errors
    def claim_alternate(self, instance_uuid: str, host: str, hypervisor_uuid: str, owner: str,
                        lease_s: int = DEFAULT_LEASE_S) -> dict[str, Any]:
        """Retry a failed build on an alternate host, in one transaction: the instance gives back
        every claim it holds, claims ``hypervisor_uuid`` (``host``) - locked and re-checked for
        room and its group's hard policy, as ``claim`` does - and moves there, BUILDING, keeping
        its uuid and name. Returns the instance with ``claim_id``; raises ClaimConflict, changing
        nothing, if the alternate has no room."""
        with self.session() as session, session.begin():
            claim = claims.claim_instance_on(session, instance_uuid, hypervisor_uuid, owner, lease_s,
                                             keep_others=False, host=host)
            instance = claims.find_instance(session, instance_uuid)
            instance.hypervisor_uuid, instance.host = hypervisor_uuid, claim["host"]
            instance.state, instance.failure_reason, instance.updated_at = BUILDING, None, utcnow()
            return {**instance.to_dict(), "claim_id": claim["id"]}

    @database_errors
    def finish_move(self, instance_uuid: str, claim_id: int) -> dict[str, Any]:
        """The instance now runs where claim ``claim_id`` is: it becomes its only claim."""
        with self.session() as session, session.begin():
            return claims.finish_move(session, instance_uuid, claim_id)

    @database_errors
    def release_claim(self, claim_id: int) -> bool:
        """Give one claim back (a move that did not happen); False if it was not there."""
        if isinstance(claim_id, bool) or not isinstance(claim_id, int):
            # Claims have ids of their own since schema 0002; an instance UUID here is a bug.
            raise LedgerError(f"release_claim takes a claim id (an integer), got {claim_id!r}")
        with self.session() as session, session.begin():
            return claims.release_claim(session, claim_id)

    @database_errors
    def adopt_instance(self, host: str, domain_uuid: str, name: str, flavor: Flavor, owner: str,
                       dry_run: bool = False) -> tuple[dict[str, Any], bool]:
        """Take a domain that already runs on ``host`` into the ledger, in one transaction: an
        ACTIVE instance with the domain's UUID, its claim (no lease: nothing is being built), and
        the domain no longer counted as unmanaged usage. Returns (instance, changed).

        Adoption records what already exists, so it is never refused for room: a host it leaves
        over its limits takes no new instances until something goes. An instance of this UUID
        already on ``host`` is no change; anywhere else, or a name taken by another instance, is
        refused. ``dry_run`` works it out and writes nothing (check mode).
        """
        with self.session() as session, session.begin():
            result = claims.adopt_instance(session, host, domain_uuid, name, flavor, owner, dry_run)
            if dry_run:
                session.rollback()
            return result

    @database_errors
    def mark_active(self, instance_uuid: str) -> None:
        """The domain runs: the instance is ACTIVE and its claim no longer needs a lease."""
        with self.session() as session, session.begin():
            claims.mark_active(session, instance_uuid)

    @database_errors
    def mark_error(self, instance_uuid: str, reason: str) -> None:
        """The build failed: release its claims (nothing is left on the host) and keep the why."""
        with self.session() as session, session.begin():
            claims.mark_error(session, instance_uuid, reason)

    @database_errors
    def delete_instance(self, instance_uuid: str) -> bool:
        """Forget an instance, its claims and group membership; False if it was not there."""
        with self.session() as session, session.begin():
            return claims.delete_instance(session, instance_uuid)

    # ---- server groups -------------------------------------------------------------------------

    @database_errors
    def create_server_group(self, name: str, policy: str, max_server_per_host: int | None = None,
                            dry_run: bool = False) -> tuple[dict[str, Any], bool]:
        """Create a group (idempotent); returns (the group, changed). A group's policy and rules
        never change once made (as in Nova): a different request for the same name is an error."""
        with self.session() as session, session.begin():
            return server_groups.create(session, name, policy, max_server_per_host, dry_run)

    @database_errors
    def delete_server_group(self, name: str, dry_run: bool = False) -> bool:
        """Delete a group (its instances stay, no longer grouped); False if there was none."""
        with self.session() as session, session.begin():
            return server_groups.remove(session, name, dry_run)

    @database_errors
    def server_groups(self, name: str | None = None) -> list[dict[str, Any]]:
        """Groups with their members and the hosts those hold claims on (Nova's group.hosts)."""
        with self._read() as session, session.begin():
            return server_groups.listing(session, name)

    @database_errors
    def scheduler_group(self, name: str) -> dict[str, Any] | None:
        """A group in the placement engine's form: {name, policy, rules, hosts, members}, where
        members counts the group's claims per host; None if there is no such group."""
        with self._read() as session, session.begin():
            return server_groups.scheduler_group(session, name)

    # ---- decisions -----------------------------------------------------------------------------

    @database_errors
    def record_decision(self, name: str, owner: str, request: Mapping[str, Any],
                        host_states: Sequence[Mapping[str, Any]], decision: Mapping[str, Any],
                        outcome: str) -> int:
        """Keep one decision with the request and host states it was made on; returns its id."""
        with self.session() as session, session.begin():
            return decisions.record(session, name, owner, request, host_states, decision, outcome)

    @database_errors
    def decisions(self, name: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        """The newest decisions first (only those of launch ``name`` if given)."""
        with self._read() as session, session.begin():
            return decisions.listing(session, name, limit)
