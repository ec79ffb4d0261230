"""The ledger: Berth's placement state in a SQL database (SQLite file by default, or PostgreSQL).

This package is the only part of Berth that imports SQLAlchemy; it runs on the controller only.
``Ledger`` is its one entrance: each method is one transaction, and a database failure comes
out as a LedgerError that says what to do. Inside, one file per idea:

- schema.py: the tables; database.py: URL, engine, migrations (migrations/), errors;
- tracker.py: the tracker sync (hypervisors' host states in, reconciliation, missing hosts);
- host_states.py: the scheduler's read (every host state as the engine's columns), with
  columns.py (the driver's values into those columns: arrays of numbers, shared texts);
- claims.py: claims and the instances they belong to, with the re-check under lock;
- artefacts.py: what builds make on hypervisors, recorded before they make it, and what builds
  that died left there;
- server_groups.py: groups, members, and the hard-policy check; decisions.py: decision records;
- inventory.py: what the instances inventory reads;
- evacuations.py: fencing a down hypervisor, and its instances' claims moved as they are rebuilt;
- volumes.py: data volumes, each claimed against its hypervisor's disk by its own row.

Usage the scheduler decides on (the tracker view) is the ledger's claims plus the unmanaged
usage a sync recorded; capacity is the last synced copy of the facts, with a generation that
moves whenever capacity or usage does.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from typing import Any, Iterable, Iterator, Mapping, Sequence

# First: names the package to install if SQLAlchemy or alembic is missing.
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import _libraries  # noqa: F401 pylint: disable=unused-import
from sqlalchemy import select
from sqlalchemy.engine import Connection

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils.errors import LedgerError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import ExactRequest
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_rules import HostRule
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import DEFAULT_POLICY, UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import (
    artefacts,
    claims,
    decisions,
    evacuations,
    host_rules,
    host_states,
    inventory,
    server_groups,
    tracker,
    volumes,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.claims import (
    DEFAULT_LEASE_S,
    ClaimConflict,
    ClaimLost,
    instance_flavor,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.database import (
    MIGRATIONS_DIR,
    SCHEMA_REVISION,
    create_sqlite_file,
    database_errors,
    default_url,
    mask_secrets,
    open_engine,
    reader,
    run_owner,
    safe_url,
    sqlite_file,
    utcnow,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import (
    ACTIVE,
    AFFINITY,
    ANTI_AFFINITY,
    BUILDING,
    DOMAIN,
    ERROR,
    FENCE_COMMAND,
    FENCE_CONFIRMED,
    HV_DOWN,
    HV_MISSING,
    HV_UP,
    PAUSED,
    PLACED_STATES,
    POLICIES,
    RESCUED,
    SOFT_AFFINITY,
    SOFT_ANTI_AFFINITY,
    STOPPED,
    VOLUME,
    claim_dict,
    hypervisors,
    metadata,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.schema import claims as claims_table

__all__ = [
    "ACTIVE", "AFFINITY", "ANTI_AFFINITY", "BUILDING", "DEFAULT_LEASE_S", "DOMAIN", "ERROR", "FENCE_COMMAND",
    "FENCE_CONFIRMED", "HV_DOWN",
    "HV_MISSING", "HV_UP", "MIGRATIONS_DIR", "PAUSED", "PLACED_STATES", "POLICIES", "RESCUED", "SCHEMA_REVISION",
    "SOFT_AFFINITY", "SOFT_ANTI_AFFINITY", "STOPPED", "VOLUME", "ClaimConflict", "ClaimLost",
    "Ledger", "default_url", "instance_flavor", "run_owner",
    "mask_secrets", "metadata", "safe_url", "utcnow",
]


class Ledger:
    """The ledger at one URL; ``open()`` migrates it to the newest schema first.

    A SQLite ledger whose file does not exist is made only by a writer that may start one: the
    tracker sync (``tracker_sync``, ``sync_hypervisors``, ``mark_missing``), an adoption (which
    syncs its hypervisor), ``create_server_group``, or ``start_if_missing`` (a launch on live
    inventory facts, which syncs them first).
    Anything else on it fails with "no ledger at PATH", and makes no file or directory.
    """

    def __init__(self, url: str | None = None) -> None:
        self.url = url or default_url()
        self.engine: Any = None
        self._reader: Any = None
        # This object made the ledger's SQLite file (the tracker sync reports it).
        self.created = False

    @property
    def shown_url(self) -> str:
        """The URL as results and messages show it: never with its password."""
        return safe_url(self.url)

    @property
    def label(self) -> str:
        """How messages name this ledger: "the ledger at URL" (an operator with two ledgers, or an
        inventory that names one, sees which was opened)."""
        return f"the ledger at {self.shown_url}"

    def open(self, create: bool = False) -> Ledger:
        """Connect and migrate. A SQLite ledger that does not exist is created with ``create``;
        without it, opening is left to the first use, where a writer that may start a ledger
        creates it and anything else fails with "no ledger at PATH"."""
        path = sqlite_file(self.url)
        if path is None or path.exists() or create:
            self._connect(create)
        return self

    def start_if_missing(self) -> Ledger:
        """For a writer that may start a ledger before it reads (a launch on live inventory facts,
        which syncs them first): a SQLite ledger that does not exist is created now."""
        self._opened(create=True)
        return self

    def _connect(self, create: bool) -> None:
        if create:
            self.created = create_sqlite_file(self.url)
        self.engine = open_engine(self.url)
        self._reader = reader(self.engine)

    def _opened(self, create: bool = False) -> Any:
        """The engine, connected on first use (``create``: for a writer that may start a ledger)."""
        if self.engine is None:
            self._connect(create)
        return self.engine

    def close(self) -> None:
        if self.engine is not None:
            self.engine.dispose()

    @contextlib.contextmanager
    def _write(self, dry_run: bool = False, create: bool = False) -> Iterator[Connection]:
        """One writing transaction (on SQLite it takes the write lock at once), committed at the
        end, or rolled back on an error or for a ``dry_run`` (check mode). ``create``: this
        writer may start a ledger that does not exist yet."""
        with self._opened(create).connect() as db:
            transaction = db.begin()
            try:
                yield db
            except BaseException:
                transaction.rollback()
                raise
            if dry_run:
                transaction.rollback()
            else:
                transaction.commit()

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection]:
        """One transaction for reading only: no write lock, a consistent snapshot."""
        self._opened()
        with self._reader.connect() as db, db.begin():
            yield db

    # ---- data volumes ---------------------------------------------------------------------------

    @database_errors
    def volumes(self, name: str | None = None, instance_uuid: str | None = None) -> list[dict[str, Any]]:
        """The data volumes (one by ``name``, those attached to ``instance_uuid``, or all)."""
        with self._read() as db:
            return volumes.listing(db, name, instance_uuid)

    @database_errors
    def create_volume(self, name: str, host: str, pool: str, size_gb: int, owner: str,
                      dry_run: bool = False, shared: bool = False) -> tuple[dict[str, Any], bool]:
        """Record (and so claim) a data volume of ``size_gb`` on ``host``'s ``pool``, before it is
        made there: the hypervisor locked and its disk re-checked under the lock as a claim does
        (ClaimConflict if it has no room). ``shared``: ``pool`` is one every hypervisor sees,
        whose volume is charged to none (nothing checked; ``host`` only makes it). The same
        volume recorded already is returned unchanged (False); another of that name is refused."""
        with self._write(dry_run) as db:
            return volumes.create(db, name, host, pool, size_gb, owner, shared)

    @database_errors
    def delete_volume(self, name: str, dry_run: bool = False) -> bool:
        """Forget a data volume (after it was removed from its pool), which gives its disk back;
        refused while it is attached. False if there was none."""
        with self._write(dry_run) as db:
            return volumes.remove(db, name)

    @database_errors
    def attach_volume(self, name: str, instance: str, devices: Sequence[str],
                      dry_run: bool = False) -> tuple[dict[str, Any], bool]:
        """Record the volume ``name`` as attached to ``instance``, on the first of ``devices``
        that none of its other volumes holds; refused when the volume is attached elsewhere or
        lives on another host than the instance (a shared pool's volume goes where the instance
        runs). Already attached to it: unchanged (False)."""
        with self._write(dry_run) as db:
            return volumes.attach(db, name, instance, devices)

    @database_errors
    def detach_volume(self, name: str, dry_run: bool = False) -> dict[str, Any]:
        """Record the volume ``name`` as attached to none; returns it as it was."""
        with self._write(dry_run) as db:
            return volumes.detach(db, name)

    # ---- the tracker sync ----------------------------------------------------------------------

    @database_errors
    def sync_hypervisors(self, states: Iterable[Mapping[str, Any]],
                         uri_policy: UriPolicy = DEFAULT_POLICY) -> list[dict[str, Any]]:
        """Record each answering hypervisor's state (capacity, facts, images, networks, orphans).

        Returns, per answering hypervisor: host, uuid, generation, changed, orphans.
        """
        with self._write(create=True) as db:
            return tracker.sync(db, list(states), utcnow(), uri_policy)["hypervisors"]

    @database_errors
    def tracker_sync(self, states: Sequence[Mapping[str, Any]], dry_run: bool = False,
                     uri_policy: UriPolicy = DEFAULT_POLICY) -> dict[str, Any]:
        """The periodic tracker sync (playbooks/gather.yml) of these hypervisors only: their
        states, the down ones marked down, their instances and expired claims reconciled.

        - instances placed on an answering hypervisor (ACTIVE, STOPPED, PAUSED) whose domain is
          not there are flagged missing; where it is, their state follows its power state
          (reported in ``power_states``; see tracker._follow_power_states).
        - a claim is settled only once its lease has expired and its hypervisor answered: a
          BUILDING instance whose domain runs there is finished (ACTIVE); any other BUILDING
          instance's build is dead - what it left there is recorded, its claim released, the
          instance ERROR; a moving instance's claim is released when its domain is not there.
        - reports what dead builds left on the answering hypervisors (``leftovers``, for the
          caller to remove and then ``forget_artefacts``) and their ``orphan_volumes``.
        - a URI ``uri_policy`` refuses is never recorded: its hypervisor is down, with why.
        - a hypervisor that reports a host UUID the ledger holds for another name or URI is not
          written: it is down, and the pair is reported in ``identity_conflicts``.
        ``dry_run`` works it all out and writes nothing (check mode); a SQLite ledger that does
        not exist is created all the same (empty: the schema only), and ``created`` says so.
        """
        with self._write(dry_run, create=True) as db:
            return tracker.sync(db, list(states), utcnow(), uri_policy)

    @database_errors
    def cpu_baselines(self, names: Sequence[str]) -> dict[str, Any]:
        """{hypervisor name: its recorded CPU baseline} of those of ``names`` that have one."""
        with self._read() as db:
            return tracker.cpu_baselines(db, names)

    @database_errors
    def record_cpu_baseline(self, names: Sequence[str], baseline: Mapping[str, Any],
                            dry_run: bool = False) -> list[str]:
        """Record a CPU baseline group's ``baseline`` on each of its members (``names``); the
        names of those whose record changed."""
        with self._write(dry_run) as db:
            return tracker.record_cpu_baseline(db, names, baseline)

    @database_errors
    def mark_missing(self, listed: Iterable[str], stale_after_s: float, dry_run: bool = False) -> dict[str, Any]:
        """Hypervisors the inventory (``listed``: all its names) does not list and nothing has
        synced for ``stale_after_s`` seconds are missing: marked and reported, never retired."""
        stale_before = utcnow() - dt.timedelta(seconds=stale_after_s)
        with self._write(create=True) as db:
            return tracker.mark_missing(db, listed, stale_before, dry_run)

    # ---- what the scheduler reads ------------------------------------------------------------

    @database_errors
    def host_table(self, fields: Iterable[str] = (), images: Sequence[str] = (),
                   networks: Sequence[str] = (), uuids: Sequence[str] | None = None) -> tuple[HostTable, list[int]]:
        """Every hypervisor as the engine's columns, with the generation each was read at (see
        host_states.read_table)."""
        with self._read() as db:
            return host_states.read_table(db, utcnow(), fields, images, networks, uuids)

    @database_errors
    def tracker_states(self, states: Sequence[Mapping[str, Any]], fields: Iterable[str] = ()) -> list[dict[str, Any]]:
        """Live host states with their usage taken from the ledger instead of the hypervisor,
        the operator's disabled flag, and the generation the view was read at (see
        host_states.tracker_states for ``fields``)."""
        with self._read() as db:
            return host_states.tracker_states(db, states, fields)

    @database_errors
    def build_targets(self, uuids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """{uuid: {host, hypervisor_uuid, uri, domain_types}} for building on these hypervisors."""
        with self._read() as db:
            return host_states.build_targets(db, uuids)

    @database_errors
    def hypervisors_named(self, names: Iterable[str]) -> list[str]:
        """The hypervisors' names (as recorded) that are one of ``names``, compared in any case."""
        with self._read() as db:
            return host_states.named(db, names)

    @database_errors
    def hypervisors(self, uuids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Every hypervisor (or those of ``uuids``) with its inventories, usage and unmanaged domains."""
        with self._read() as db:
            return host_states.hypervisor_list(db, utcnow(), uuids)

    @database_errors
    def fleet_view(self, decisions_limit: int = 20) -> dict[str, Any]:
        """What the fleet report shows, read in one transaction so that its parts agree: every
        hypervisor (as ``hypervisors`` gives them), every instance, every server group, the
        newest ``decisions_limit`` decisions, and ``read_at``, the time the ages are counted to."""
        with self._read() as db:
            now = utcnow()
            return {
                "read_at": now,
                "hypervisors": host_states.hypervisor_list(db, now),
                "instances": claims.instance_listing(db),
                "server_groups": server_groups.listing(db, None),
                "decisions": decisions.listing(db, None, decisions_limit),
            }

    # ---- operators' actions on hypervisors -------------------------------------------------

    @database_errors
    def set_disabled(self, host: str, disabled: bool, reason: str | None = None,
                     dry_run: bool = False) -> dict[str, Any]:
        """Disable (with a reason) or enable a hypervisor; ``changed`` says if anything moved."""
        with self._write() as db:
            return tracker.set_disabled(db, host, disabled, reason, dry_run)

    @database_errors
    def rehome_hypervisor(self, host: str, name: str | None, uri: str | None, reason: str,
                          dry_run: bool = False) -> dict[str, Any]:
        """Give a host UUID (``host``: the hypervisor's name or UUID) to another inventory name
        and/or URI, with why: the operator's act that a sync never does (a sync whose UUID the
        ledger holds for another name or URI is an identity conflict). Its instances follow."""
        with self._write(dry_run) as db:
            return tracker.rehome(db, host, name, uri, reason, utcnow(), dry_run)

    @database_errors
    def retire_hypervisor(self, host: str, dry_run: bool = False) -> dict[str, Any]:
        """Forget a hypervisor for good: drop its claims (their instances become ERROR unless they
        hold another claim), its facts and unmanaged usage. The operator's explicit act."""
        with self._write(dry_run) as db:
            return tracker.retire(db, host, utcnow(), dry_run)

    # ---- instances and claims ------------------------------------------------------------------

    @database_errors
    def instances(self, names: Iterable[str] | None = None, launch: str | None = None) -> list[dict[str, Any]]:
        """Instances by name (``names``), or those of a launch (``launch``: the name itself and
        ``<launch>-<index>``), or all; each with the URI of its hypervisor's last sync (``uri``)."""
        with self._read() as db:
            return claims.instance_listing(db, names, launch)

    @database_errors
    def instances_on(self, hypervisor_uuids: Sequence[str],
                     states: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The instances the ledger places on ``hypervisor_uuids`` (in ``states``, or any), by
        name, as ``instances`` gives them."""
        with self._read() as db:
            return claims.instance_listing(db, hypervisor_uuids=hypervisor_uuids, states=states)

    def launch_instances(self, name: str) -> list[dict[str, Any]]:
        """The instances a name stands for, as playbooks take it (``-e name=web``): ``web`` itself
        (an adopted instance keeps the name it was given) and ``web-<n>``, in index order;
        ``web-a`` or ``web-2b`` are not web's."""
        wanted = re.compile(re.escape(name) + r"(?:-([0-9]+))?")
        indexed = []
        for row in self.instances(launch=name):
            match = wanted.fullmatch(row["name"])
            if match:
                indexed.append((int(match.group(1) or 0), row))
        return [row for _index, row in sorted(indexed, key=lambda pair: pair[0])]

    @database_errors
    def inventory_instances(self, states: Sequence[str]) -> list[dict[str, Any]]:
        """The instances in ``states`` for the instances inventory, by name: each with its server
        group, its hypervisor's URI and sync status (see inventory.listing)."""
        with self._read() as db:
            return inventory.listing(db, states)

    @database_errors
    def claims(self, instance_uuid: str | None = None) -> list[dict[str, Any]]:
        with self._read() as db:
            held = claims_table.c
            query = (select(claims_table, hypervisors.c.name.label("host_name"))
                     .join(hypervisors, hypervisors.c.uuid == held.hypervisor_uuid).order_by(held.id))
            if instance_uuid is not None:
                query = query.where(held.instance_uuid == instance_uuid)
            return [claim_dict(row._mapping, row.host_name) for row in db.execute(query)]

    @database_errors
    def claim(self, placements: Sequence[Mapping[str, Any]], flavor: Flavor, owner: str,
              lease_s: int = DEFAULT_LEASE_S, server_group: str | None = None,
              image: str | None = None, request: Mapping[str, Any] | None = None,
              exact: ExactRequest | None = None, ha: bool = False, ha_priority: int = 0,
              user_data: str | None = None, volumes: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
              pool: str | None = None) -> list[dict[str, Any]]:
        """Write BUILDING instances and their claims in one transaction, or nothing.

        ``placements`` are dicts with ``name``, ``host`` and ``hypervisor_uuid`` (and optionally
        the ``generation`` the decision saw). The chosen hypervisors and the server group are
        locked; each host's room is re-checked from the ledger itself (capacity, claims,
        unmanaged usage) and the group's hard policy against its members' hosts; if anything no
        longer fits, ClaimConflict is raised and nothing is written. Each claim carries ``owner``
        and a lease of ``lease_s`` seconds. Instances of these names in ERROR are replaced.
        Each instance records ``request``, the request it was launched with (its typed
        Request's record, module_utils/request.py), which its moves schedule with. With ``exact`` (the
        request's NUMA cells, dedicated CPUs, pages and devices: assignment.of_spec), each claim
        fits it again on its locked host and records what it took as its ``assignment``.
        Returns the instances, each with ``claim_id``, ``generation_moved`` (the host changed
        since the decision, and the re-check found it still fits) and ``assignment``. ``ha`` and
        ``ha_priority`` (the request's) mark the instances restarted elsewhere when their host fails.
        ``user_data`` (the request's) is kept apart from the rows, never listed (see user_data).
        ``volumes``: the data volumes each instance's build makes with it in the storage pool
        ``pool`` (by instance name, Request.volume_rows'), claimed on its host with it and
        recorded as attached to it; a volume of such a name in the ledger already is refused.
        """
        with self._write() as db:
            return claims.claim(db, placements, flavor, owner, lease_s, server_group, image, request, exact,
                                ha, ha_priority, user_data, volumes or {}, pool)

    @database_errors
    def claim_batch(self, entries: Sequence[Mapping[str, Any]], owner: str,
                    lease_s: int = DEFAULT_LEASE_S) -> list[list[dict[str, Any]]]:
        """Claim every entry of a deployment in one transaction, or nothing: each entry is a mapping
        of Ledger.claim's arguments (``placements``, ``flavor``, and optionally ``server_group``,
        ``request``, ``ha``, ``ha_priority``), re-checked as claim re-checks them, each seeing the
        entries before it. Every group (by name) and then every hypervisor (in UUID order) is locked
        first, as one claim locks its own, so two batches never hold them crosswise. Returns each
        entry's instances, as claim returns them; ClaimConflict if any no longer fits."""
        with self._write() as db:
            for name in sorted({entry["server_group"] for entry in entries if entry.get("server_group")}):
                server_groups.lock(db, name)
            host_states.locked_views(db, {placement["hypervisor_uuid"]
                                          for entry in entries for placement in entry["placements"]})
            return [claims.claim(db, entry["placements"], entry["flavor"], owner, lease_s, entry.get("server_group"),
                                 None, entry.get("request"), None, entry.get("ha", False), entry.get("ha_priority", 0))
                    for entry in entries]

    @database_errors
    def user_data(self, instance_uuid: str) -> str | None:
        """The user_data the instance was launched with (None: without, or before schema 0014),
        checked against the launch's limit: a ledger row is not trusted. Only a rebuild from the
        image reads it, to make the seed again; no listing returns it, for it may hold secrets."""
        with self._read() as db:
            found = claims.recorded_user_data(db, instance_uuid)
        return None if found is None else limits.USER_DATA.check(found)

    @database_errors
    def ha_instances(self, states: Sequence[str] = (BUILDING, *PLACED_STATES)) -> list[dict[str, Any]]:
        """The HA instances on a hypervisor in one of ``states`` (by default those placed there:
        BUILDING, ACTIVE, STOPPED or PAUSED), each with its server group's name
        (``server_group``, None outside any) and its hypervisor's URI, highest ha_priority first,
        then by name: the order an HA run restarts them in."""
        with self._read() as db:
            return claims.ha_listing(db, states)

    @database_errors
    def placed_instances(self) -> list[dict[str, Any]]:
        """Every instance placed on a hypervisor (BUILDING, ACTIVE, STOPPED or PAUSED), each with
        its server group's name (``server_group``) and its hypervisor's URI: what the rebalancer
        plans with."""
        with self._read() as db:
            return claims.ha_listing(db, (BUILDING, *PLACED_STATES), ha_only=False)

    @database_errors
    def set_instance_ha(self, name: str, ha: bool | None, ha_priority: int | None,
                        dry_run: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
        """Set the instance ``name``'s ``ha`` and ``ha_priority`` (None: left as they are);
        returns the instance before and after. LedgerError if there is no such instance."""
        with self._write(dry_run) as db:
            return claims.set_ha(db, name, ha, ha_priority)

    @database_errors
    def claim_move(self, instance_uuid: str, hypervisor_uuid: str, owner: str,
                   lease_s: int = DEFAULT_LEASE_S, flavor: Flavor | None = None,
                   exact: ExactRequest | None = None) -> dict[str, Any]:
        """Claim the destination of a move for an instance that keeps its current claim.

        Locked and re-checked as ``claim`` does (room, and the hard policy of the instance's
        server group with the destination added); raises ClaimConflict if it does not fit. The
        claim is for the instance's flavor, or for ``flavor`` (a resize onto another host); with
        ``exact`` it fits the instance's CPUs, cells, pages and devices anew there (its
        ``assignment``). Complete the move with ``finish_move``, or give the destination back
        with ``release_claim``.
        """
        with self._write() as db:
            return claims.claim_instance_on(db, instance_uuid, hypervisor_uuid, owner, lease_s,
                                            keep_others=True, flavor=flavor, exact=exact)

    @database_errors
    def claim_alternate(self, instance_uuid: str, host: str, hypervisor_uuid: str, owner: str,
                        lease_s: int = DEFAULT_LEASE_S, exact: ExactRequest | None = None) -> dict[str, Any]:
        """Retry a failed build on an alternate host, in one transaction: the instance gives back
        every claim it holds, claims ``hypervisor_uuid`` (``host``) - locked and re-checked for
        room and its group's hard policy, as ``claim`` does - and moves there, BUILDING, keeping
        its uuid and name, with the exact CPUs, cells, pages and devices of ``exact`` fitted
        there (an instance that held some is refused without it). Returns the instance with
        ``claim_id`` and ``assignment``; raises ClaimConflict, changing nothing, if the
        alternate has no room. The volumes its launch makes with it (nothing is made of them
        yet) move there too, their room re-checked."""
        with self._write() as db:
            return claims.claim_alternate(db, instance_uuid, host, hypervisor_uuid, owner, lease_s, exact)

    @database_errors
    def finish_move(self, instance_uuid: str, claim_id: int, flavor: Flavor | None = None) -> dict[str, Any]:
        """The instance now runs where claim ``claim_id`` is: it becomes its only claim, without
        a lease unless the instance is still BUILDING. With ``flavor`` (a resize, done) the
        instance has that flavor from now on and the claim holds its amounts."""
        with self._write() as db:
            return claims.finish_move(db, instance_uuid, claim_id, flavor)

    @database_errors
    def resize_claim(self, instance_uuid: str, flavor: Flavor, owner: str,
                     lease_s: int = DEFAULT_LEASE_S, exact: ExactRequest | None = None) -> dict[str, Any]:
        """Resize an instance's claim on its own host, in one transaction: the hypervisor is
        locked and its room re-checked, from the ledger, as ``claim`` does, with the instance's
        own claim given back first; then the claim holds, for ``owner`` with a lease of
        ``lease_s`` seconds, the larger of the old and new sizes in each resource. Raises
        ClaimConflict, changing nothing, where the new size does not fit. Complete with
        ``finish_move(instance, claim, flavor)``; after a failure ``restore_claim`` gives it its
        old size back. An instance that holds or (``exact``, of the new flavor) asks for pinned
        CPUs, NUMA cells, pages or devices is refused (InputError): those are fitted anew on
        another host. Returns the claim."""
        with self._write() as db:
            return claims.resize_in_place(db, instance_uuid, flavor, owner, lease_s, exact)

    @database_errors
    def restore_claim(self, claim_id: int, flavor: Flavor) -> dict[str, Any]:
        """A resize on the instance's own host did not happen: its claim holds ``flavor`` (the
        old size) again, without a lease. Never more than the claim held (that needs the
        re-check of ``resize_claim``): a LedgerError otherwise."""
        with self._write() as db:
            return claims.resize_claim_to(db, claim_id, flavor)

    @database_errors
    def set_instance_state(self, instance_uuid: str, state: str) -> tuple[dict[str, Any], bool]:
        """A power action's outcome: the instance (ACTIVE, STOPPED or PAUSED) is now ``state``
        (one of those three); its claim stays, as in Nova. Returns (instance, changed)."""
        with self._write() as db:
            return claims.set_state(db, instance_uuid, state)

    @database_errors
    def release_claim(self, claim_id: int) -> bool:
        """Give one claim back (a move that did not happen); False if it was not there."""
        if isinstance(claim_id, bool) or not isinstance(claim_id, int):
            # Claims have ids of their own since schema 0002; an instance UUID here is a bug.
            raise LedgerError(f"release_claim takes a claim id (an integer), got {claim_id!r}")
        with self._write() as db:
            return claims.release_claim(db, claim_id)

    @database_errors
    def adopt_instance(self, host: str, domain_uuid: str, name: str, flavor: Flavor, owner: str,
                       dry_run: bool = False) -> tuple[dict[str, Any], bool]:
        """Take a domain that already runs on ``host`` into the ledger, in one transaction: an
        ACTIVE instance with the domain's UUID, its claim (no lease: nothing is being built), and
        the domain no longer counted as unmanaged usage. Returns (instance, changed).

        Adoption records what already exists, so it is never refused for room: a host it leaves
        over its limits takes no new instances until something goes. An instance of this UUID
        already on ``host`` is no change; anywhere else, or a name taken by another instance, is
        refused. ``dry_run`` works it out and writes nothing (check mode). An adoption syncs its
        hypervisor itself, so, as a tracker sync, it may start a SQLite ledger.
        """
        with self._write(dry_run, create=True) as db:
            return claims.adopt_instance(db, host, domain_uuid, name, flavor, owner, dry_run)

    @database_errors
    def mark_active(self, instance_uuid: str, built: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The domain runs: the instance is ACTIVE and its claim no longer needs a lease; what its
        build recorded on that hypervisor is the instance's own from now on, and that
        hypervisor's failed builds are forgiven (a build succeeded there). Returns the
        instance as the ledger now has it. ClaimLost if a sync released its claim meanwhile.
        ``built``: what the build made beside the request (request.Built's record: its seed,
        local disks and guest CPU), kept in the instance's request as ``build``: every move
        defines the domain again from the two."""
        with self._write() as db:
            return claims.mark_active(db, instance_uuid, built)

    @database_errors
    def start_rebuild(self, instance_uuid: str, reason: str) -> dict[str, Any]:
        """A rebuild is about to remove the instance's disks on its host: ERROR with ``reason``
        until it is ACTIVE again (finish_rebuild), so that a run that dies half way leaves it
        saying so; its one claim stays, and a sync leaves an ERROR instance alone. Refused for
        an instance that holds no claim on its host, or another action's (a lease)."""
        with self._write() as db:
            return claims.hold_on_own_claim(db, instance_uuid, ERROR, reason, "rebuilt")

    @database_errors
    def rescue(self, instance_uuid: str, reason: str) -> dict[str, Any]:
        """The instance is RESCUED with ``reason`` (being rescued, or rescued with which image),
        until it is unrescued (mark_active); its one claim stays, and a sync leaves it alone.
        Refused for an instance that holds no claim on its host, or another action's (a lease)."""
        with self._write() as db:
            return claims.hold_on_own_claim(db, instance_uuid, RESCUED, reason, "rescued")

    @database_errors
    def finish_rebuild(self, instance_uuid: str, request: Mapping[str, Any], image: str | None,
                       image_properties: Mapping[str, Any]) -> dict[str, Any]:
        """The instance runs again from its new image: its recorded ``request`` (with the new
        image and build record), its ``image`` and ``image_properties`` (canonical) replaced,
        and ACTIVE as mark_active makes it. Returns the instance."""
        with self._write() as db:
            return claims.finish_rebuild(db, instance_uuid, request, image, image_properties)

    @database_errors
    def build_failed(self, instance_uuid: str) -> int:
        """A build of the instance failed on the hypervisor it is placed on (before it is retried
        elsewhere or marked ERROR): that hypervisor's ``failed_builds`` goes up by one, as Nova's
        compute manager counts them for BuildFailureWeigher; ``mark_active`` resets it. Returns
        the new count."""
        with self._write() as db:
            return claims.build_failed(db, instance_uuid)

    @database_errors
    def mark_error(self, instance_uuid: str, reason: str) -> None:
        """The build failed: release its claims (nothing is left on the host) and keep the why."""
        with self._write() as db:
            claims.mark_error(db, instance_uuid, reason)

    @database_errors
    def delete_instance(self, instance_uuid: str, removed_artefacts: Iterable[int] = ()) -> bool:
        """Forget an instance, its claims and group membership, and the artefacts of
        ``removed_artefacts`` (ids: the caller removed them); False if it was not there. Its
        volumes marked delete_on_termination are forgotten (the caller removed them), the
        others detached."""
        with self._write() as db:
            return claims.delete_instance(db, instance_uuid, removed_artefacts)

    # ---- fencing and evacuation (evacuations.py) --------------------------------------------

    @database_errors
    def fence(self, host: str, method: str, fenced_by: str, output: str | None = None) -> dict[str, Any]:
        """Record that ``host`` is fenced (it cannot run its guests any more), now, by
        ``fenced_by``, and how: FENCE_CONFIRMED (the operator said so) or FENCE_COMMAND (the
        operator's fence command succeeded; ``output``, bounded, is what it printed). The first
        sync that reaches the host clears it. Returns the fencing as results show it."""
        with self._write() as db:
            return evacuations.fence(db, host, method, fenced_by, output, utcnow())

    @database_errors
    def claim_evacuation(self, instance_uuid: str, source_uuid: str, destination_uuid: str, owner: str,
                         lease_s: int = DEFAULT_LEASE_S, exact: ExactRequest | None = None) -> dict[str, Any]:
        """Claim ``destination_uuid`` for an instance of the fenced hypervisor ``source_uuid``, in
        one transaction: locked and re-checked as ``claim_move`` does (room, its group's hard
        policy), and only while the instance is still on the source and no other run holds a
        claim of it elsewhere - the claim decides which run evacuates it (ClaimConflict for the
        other, with why), and while the source is still fenced (NotFenced once a sync reached it
        again). The source's claim stays until ``finish_evacuation``; give the destination back
        with ``release_claim``."""
        with self._write() as db:
            return evacuations.claim_evacuation(db, instance_uuid, source_uuid, destination_uuid, owner, lease_s,
                                                exact)

    @database_errors
    def finish_evacuation(self, instance_uuid: str, claim_id: int, left: Sequence[Mapping[str, Any]],
                          built: Mapping[str, Any] | None, owner: str) -> dict[str, Any]:
        """The instance runs where claim ``claim_id`` is, ACTIVE: its only claim, without a lease
        (``built``: its new build record, kept in its request). What it left on the host it was
        evacuated from (``left``: {kind, pool, name}) is recorded there as evacuated, for the
        sync that reaches that host again to remove. Its data volumes of a shared pool follow
        it; those of a local pool stay there, attached to none. Returns the instance."""
        with self._write() as db:
            return evacuations.finish_evacuation(db, instance_uuid, claim_id, left, built, owner, utcnow())

    @database_errors
    def evacuation_failed(self, instance_uuid: str, reason: str) -> dict[str, Any]:
        """No host could take the evacuated instance: ERROR with ``reason``, still on its old
        host, whose claim it keeps; any other claim of it is given back. Returns the instance."""
        with self._write() as db:
            return evacuations.evacuation_failed(db, instance_uuid, reason, utcnow())

    # ---- what builds make --------------------------------------------------------------------

    @database_errors
    def record_artefacts(self, instance_uuid: str, host: str, items: Sequence[Mapping[str, Any]],
                         owner: str) -> str:
        """Record what a build of the instance is about to make on ``host``, before it makes it:
        ``items`` are {kind: DOMAIN or VOLUME, pool, name}. Only while the instance holds a
        claim there whose lease has not expired (BerthError otherwise: a sync may release it at
        any moment, so nothing may be built). Returns the hypervisor's UUID."""
        with self._write() as db:
            return artefacts.record(db, instance_uuid, host, items, owner, utcnow())

    @database_errors
    def artefacts(self, instance_uuid: str | None = None, name: str | None = None) -> list[dict[str, Any]]:
        """Recorded artefacts - of the instance ``instance_uuid`` and of every instance ever named
        ``name`` (one a relaunch replaced), or all -, each with its hypervisor's host and uri."""
        with self._read() as db:
            return artefacts.listing(db, instance_uuid, name)

    @database_errors
    def forget_artefacts(self, ids: Iterable[int]) -> int:
        """Forget artefacts that were removed (or found gone); returns how many were recorded."""
        with self._write() as db:
            return artefacts.forget(db, ids)

    # ---- server groups -------------------------------------------------------------------------

    @database_errors
    def create_server_group(self, name: str, policy: str, max_server_per_host: int | None = None,
                            dry_run: bool = False) -> tuple[dict[str, Any], bool]:
        """Create a group (idempotent); returns (the group, changed). A group's policy and rules
        never change once made (as in Nova): a different request for the same name is an error.
        A group may be made before the first tracker sync: this creates a SQLite ledger too."""
        with self._write(dry_run, create=True) as db:
            return server_groups.create(db, name, policy, max_server_per_host, dry_run)

    @database_errors
    def delete_server_group(self, name: str, dry_run: bool = False) -> bool:
        """Delete a group (its instances stay, no longer grouped); False if there was none."""
        with self._write() as db:
            return server_groups.remove(db, name, dry_run)

    @database_errors
    def server_groups(self, name: str | None = None) -> list[dict[str, Any]]:
        """Groups with their members and the hosts those hold claims on (Nova's group.hosts)."""
        with self._read() as db:
            return server_groups.listing(db, name)

    @database_errors
    def scheduler_group(self, name: str) -> dict[str, Any] | None:
        """A group in the placement engine's form: {name, policy, rules, hosts, members}, where
        members counts the group's claims per host; None if there is no such group."""
        with self._read() as db:
            return server_groups.scheduler_group(db, name)

    @database_errors
    def moving_member_group(self, instance_uuid: str) -> dict[str, Any] | None:
        """The server group of an instance about to move, as the scheduler reads a group, with
        that instance left out (see server_groups.moving_member_group); None if it has none."""
        with self._read() as db:
            return server_groups.moving_member_group(db, instance_uuid)

    # ---- host rules ----------------------------------------------------------------------------

    @database_errors
    def put_host_rule(self, rule: HostRule, dry_run: bool = False) -> dict[str, Any]:
        """Write a host rule by its name (idempotent: a rule of that name is changed to this
        one). Returns ``before`` (the rule as it was, None if new), ``changed``, ``breaking`` (the
        instances placed now against it, if hard: it holds for what is placed or moved from now
        on, they stay until moved) and ``known_aggregate`` (whether any hypervisor of the ledger
        is in its aggregate: a must rule on an aggregate none is in rejects every host). May be
        written before the first tracker sync: this creates a SQLite ledger too."""
        with self._write(dry_run, create=True) as db:
            before, changed = host_rules.put(db, rule)
            return {"before": before, "changed": changed, "breaking": host_rules.breaking(db, rule),
                    "known_aggregate": rule.aggregate in host_rules.known_aggregates(db)}

    @database_errors
    def delete_host_rule(self, name: str, dry_run: bool = False) -> dict[str, Any] | None:
        """Delete a host rule; returns it as it was, None if there was none."""
        with self._write(dry_run) as db:
            return host_rules.remove(db, name)

    @database_errors
    def host_rules(self, name: str | None = None) -> list[dict[str, Any]]:
        """Every host rule (or the one named), by name, with when it was written."""
        with self._read() as db:
            return host_rules.listing(db, name)

    @database_errors
    def scheduler_rules(self) -> list[HostRule]:
        """Every host rule in the engine's form, for a schedule to select the request's from."""
        with self._read() as db:
            return host_rules.rules(db)

    # ---- decisions -----------------------------------------------------------------------------

    @database_errors
    def record_decision(self, name: str, owner: str, request: Mapping[str, Any],
                        host_states: Sequence[Mapping[str, Any]], decision: Mapping[str, Any],
                        outcome: str) -> int:
        """Keep one decision with the request and host states it was made on; returns its id."""
        with self._write() as db:
            return decisions.record(db, name, owner, request, host_states, decision, outcome)

    @database_errors
    def prune_decisions(self, max_age_days: int, max_count: int, dry_run: bool = False) -> int:
        """Drop the decisions older than ``max_age_days`` or beyond the newest ``max_count``;
        returns how many (would have) gone."""
        with self._write(dry_run=dry_run) as db:
            return decisions.prune(db, max_age_days, max_count, dry_run)

    @database_errors
    def decisions(self, name: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        """The newest decisions first (only those of launch ``name`` if given)."""
        with self._read() as db:
            return decisions.listing(db, name, limit)
