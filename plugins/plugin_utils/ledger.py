"""The ledger: Berth's placement state in a SQL database (SQLite file by default, or PostgreSQL).

This is the only Berth module that imports SQLAlchemy. It runs on the controller only.

Usage the scheduler decides on (the tracker view) is the ledger's claims plus the unmanaged
usage a sync recorded; capacity (per resource: total, reserved, allocation ratio) is the last
synced copy of the facts, with a generation that moves whenever capacity or usage does.

A claim is one transaction that locks the chosen hypervisors (and the server group, if any),
re-reads their usage, re-checks it with the placement engine's own resource filters and the
group's hard policy, and commits only if everything still fits. On SQLite the write lock is
taken when the transaction starts (BEGIN IMMEDIATE); on PostgreSQL the rows are locked with
SELECT ... FOR UPDATE, hypervisors in UUID order so that two claims never deadlock.
"""

from __future__ import annotations

import collections
import datetime as dt
import functools
import os
import socket
import uuid as uuidlib
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    create_engine,
    delete,
    event,
    func,
    inspect,
    select,
)
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError, LedgerError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor, HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import FILTERS

MIGRATIONS_DIR = Path(__file__).with_name("ledger_migrations")
# The newest migration's revision (tests/unit check that it is alembic's head). Every action
# opens the ledger; one that is at this revision is opened without importing alembic, which
# costs a fifth of a second of each ansible-playbook run.
SCHEMA_REVISION = "0002"

# Instance states, as Nova's vm_state names them.
BUILDING = "BUILDING"
ACTIVE = "ACTIVE"
ERROR = "ERROR"

# Hypervisor sync status: answered the last sync; in the inventory but did not answer; not in
# the last complete sync at all (kept, with its claims, until an operator retires it).
HV_UP = "up"
HV_DOWN = "down"
HV_MISSING = "missing"

# Placement's resource classes, one inventory row each.
VCPU = "VCPU"
MEMORY_MB = "MEMORY_MB"
DISK_MB = "DISK_MB"

# Server group policies (Nova's names); only the hard ones are enforced by the claim, the soft
# ones are preferences for the weighers.
AFFINITY = "affinity"
ANTI_AFFINITY = "anti-affinity"
SOFT_AFFINITY = "soft-affinity"
SOFT_ANTI_AFFINITY = "soft-anti-affinity"
POLICIES = (AFFINITY, ANTI_AFFINITY, SOFT_AFFINITY, SOFT_ANTI_AFFINITY)

# The filters a claim re-checks: the resources. Group policy is re-checked by _check_group.
CLAIM_CHECK_FILTERS = ("RamFilter", "CoreFilter", "DiskFilter")
DEFAULT_LEASE_S = 3600
SQLITE_LOCK_TIMEOUT_S = 30

# TEST ONLY: set to 1 to switch off the claim's locks and re-check, so that the concurrency
# test can show it catches the race they prevent. Never set it anywhere else.
UNSAFE_CLAIMS_ENV = "BERTH_TEST_UNSAFE_CLAIMS"


def default_url() -> str:
    """BERTH_LEDGER_URL, else a SQLite file under $XDG_STATE_HOME (~/.local/state)/berth/."""
    if os.environ.get("BERTH_LEDGER_URL"):
        return os.environ["BERTH_LEDGER_URL"]
    state_home = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return "sqlite:///" + os.path.join(state_home, "berth", "ledger.sqlite3")


def safe_url(url: str) -> str:
    """The URL as it may be shown: never with its password."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparsable ledger URL>"


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def run_owner() -> str:
    """Who holds a BUILDING claim: this controller process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


class Base(DeclarativeBase):
    pass


class HypervisorRow(Base):
    """A hypervisor, keyed by its libvirt host UUID; its capacity is in InventoryRow."""

    __tablename__ = "hypervisors"
    uuid: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    nodename: Mapped[str] = mapped_column(String(255))
    generation: Mapped[int] = mapped_column(Integer, default=0)
    synced_at: Mapped[dt.datetime] = mapped_column(DateTime)
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    disabled_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    sync_status: Mapped[str] = mapped_column(String(16), default=HV_UP)
    last_seen_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)


class InventoryRow(Base):
    """One resource of one hypervisor, as Placement's inventories: total, reserved, ratio."""

    __tablename__ = "inventories"
    hypervisor_uuid: Mapped[str] = mapped_column(ForeignKey("hypervisors.uuid", ondelete="CASCADE"), primary_key=True)
    resource_class: Mapped[str] = mapped_column(String(32), primary_key=True)
    total: Mapped[int] = mapped_column(Integer)
    reserved: Mapped[int] = mapped_column(Integer)
    allocation_ratio: Mapped[float] = mapped_column(Float)


class UnmanagedRow(Base):
    """A domain on a hypervisor that the ledger does not know (an orphan), counted as usage."""

    __tablename__ = "unmanaged_usage"
    hypervisor_uuid: Mapped[str] = mapped_column(ForeignKey("hypervisors.uuid", ondelete="CASCADE"), primary_key=True)
    domain_uuid: Mapped[str] = mapped_column(String(36), primary_key=True)
    domain_name: Mapped[str] = mapped_column(String(255))
    vcpus: Mapped[int] = mapped_column(Integer)
    memory_mb: Mapped[int] = mapped_column(Integer)
    disk_mb: Mapped[int] = mapped_column(Integer)
    seen_at: Mapped[dt.datetime] = mapped_column(DateTime)


class InstanceRow(Base):
    __tablename__ = "instances"
    uuid: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    flavor_name: Mapped[str] = mapped_column(String(255))
    vcpus: Mapped[int] = mapped_column(Integer)
    memory_mb: Mapped[int] = mapped_column(Integer)
    root_gb: Mapped[int] = mapped_column(Integer)
    ephemeral_gb: Mapped[int] = mapped_column(Integer)
    swap: Mapped[int] = mapped_column(Integer)
    image: Mapped[str | None] = mapped_column(String(255), nullable=True)
    hypervisor_uuid: Mapped[str | None] = mapped_column(ForeignKey("hypervisors.uuid"), nullable=True)
    host: Mapped[str | None] = mapped_column(String(255), nullable=True)
    state: Mapped[str] = mapped_column(String(16))
    failure_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    missing_since: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime)

    def to_dict(self) -> dict[str, Any]:
        return {
            "uuid": self.uuid, "name": self.name, "flavor": self.flavor_name, "vcpus": self.vcpus,
            "memory_mb": self.memory_mb, "root_gb": self.root_gb, "ephemeral_gb": self.ephemeral_gb,
            "swap": self.swap, "image": self.image, "hypervisor_uuid": self.hypervisor_uuid,
            "host": self.host, "state": self.state, "failure_reason": self.failure_reason,
            "missing_since": _iso(self.missing_since), "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at),
        }


class ClaimRow(Base):
    """Resources one instance holds on one hypervisor. An instance holds one claim, or two while
    it moves (the destination is claimed before the move, the source released after)."""

    __tablename__ = "claims"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    instance_uuid: Mapped[str] = mapped_column(ForeignKey("instances.uuid", ondelete="CASCADE"), index=True)
    hypervisor_uuid: Mapped[str] = mapped_column(ForeignKey("hypervisors.uuid"), index=True)
    vcpus: Mapped[int] = mapped_column(Integer)
    memory_mb: Mapped[int] = mapped_column(Integer)
    disk_mb: Mapped[int] = mapped_column(Integer)
    owner: Mapped[str] = mapped_column(String(255))
    # Set while the instance is BUILDING (or moving): a sync may release the claim once this has
    # passed and no domain exists. None once the instance runs.
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime)

    def to_dict(self, host: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id, "instance_uuid": self.instance_uuid, "hypervisor_uuid": self.hypervisor_uuid,
            "host": host, "vcpus": self.vcpus, "memory_mb": self.memory_mb, "disk_mb": self.disk_mb,
            "owner": self.owner, "lease_expires_at": _iso(self.lease_expires_at),
            "created_at": _iso(self.created_at),
        }


class ServerGroupRow(Base):
    __tablename__ = "server_groups"
    uuid: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    policy: Mapped[str] = mapped_column(String(32))
    max_server_per_host: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime)


class MemberRow(Base):
    __tablename__ = "server_group_members"
    group_uuid: Mapped[str] = mapped_column(ForeignKey("server_groups.uuid", ondelete="CASCADE"), primary_key=True)
    instance_uuid: Mapped[str] = mapped_column(ForeignKey("instances.uuid", ondelete="CASCADE"), primary_key=True,
                                               index=True)


class DecisionRow(Base):
    """One scheduling decision with what it was made on, so the engine can replay it."""

    __tablename__ = "decisions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime)
    owner: Mapped[str] = mapped_column(String(255))
    name: Mapped[str] = mapped_column(String(63), index=True)
    ok: Mapped[bool] = mapped_column(Boolean)
    outcome: Mapped[str] = mapped_column(String(32))  # claimed, no_valid_host, claim_conflict, planned
    summary: Mapped[str] = mapped_column(Text)
    request: Mapped[Any] = mapped_column(JSON)
    host_states: Mapped[Any] = mapped_column(JSON)
    decision: Mapped[Any] = mapped_column(JSON)

    def to_dict(self) -> dict[str, Any]:
        placements = (self.decision or {}).get("placements", [])
        return {
            "id": self.id, "created_at": _iso(self.created_at), "owner": self.owner, "name": self.name,
            "ok": self.ok, "outcome": self.outcome, "summary": self.summary,
            "choice": [p.get("host") for p in placements],
            "alternates": [p.get("alternates", []) for p in placements],
            "request": self.request, "host_states": self.host_states, "decision": self.decision,
        }


class ClaimConflict(BerthError):
    """A host no longer had room (or the group's policy no longer allowed it) when the claim
    re-checked it; decide again with fresh usage."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"{host}: {reason}")
        self.host = host
        self.reason = reason


def explain_database_error(url: str, exc: BaseException) -> str:
    """What went wrong with the ledger and what to do, naming the URL without its password."""
    shown = safe_url(url)
    text = " ".join(str(getattr(exc, "orig", None) or exc).split())
    try:
        password = make_url(url).password
    except ArgumentError:
        password = None
    if password:
        text = text.replace(str(password), "***")
    low = text.lower()
    if "database is locked" in low or "lock timeout" in low or "could not obtain lock" in low:
        return (f"the ledger at {shown} is locked by another process ({text}). A launch or sync "
                f"probably still runs: wait for it and retry; if none runs, find the process "
                f"that holds the ledger open (fuser on the file) and stop it")
    if "not a database" in low or "malformed" in low or "corrupt" in low:
        return (f"the ledger at {shown} is corrupt ({text}). Restore it from a backup, or move the "
                f"file aside to start an empty ledger and run playbooks/gather.yml to record the "
                f"hypervisors again (instances and claims are then lost)")
    if "does not exist" in low and "database" in low:
        return (f"the ledger database at {shown} does not exist ({text}): create it "
                f"(createdb, as its owner) or fix the database name in the URL")
    if "unable to open database file" in low or "readonly" in low or "read-only" in low:
        return (f"cannot open the ledger at {shown} for writing ({text}): check that its "
                f"directory exists and that this user may write there")
    if "password authentication failed" in low or "authentication" in low:
        return f"the ledger at {shown} refused the login ({text}): check the user and password"
    if "connection refused" in low or "could not connect" in low or "connection failed" in low \
            or "timeout expired" in low or "could not translate host name" in low:
        return (f"cannot reach the ledger at {shown} ({text}): is the PostgreSQL server running, "
                f"and are the host and port in the URL right?")
    return f"the ledger at {shown} failed: {exc.__class__.__name__}: {text}"


def _database_errors(method: Any) -> Any:
    """Turn a database failure into a LedgerError that says what to do."""

    @functools.wraps(method)
    def wrapper(self: Ledger, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except SQLAlchemyError as exc:
            raise LedgerError(explain_database_error(self.url, exc)) from exc

    return wrapper


class Ledger:
    """The ledger at one URL; ``open()`` migrates it to the newest schema first."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or default_url()
        self.engine: Engine | None = None
        self._reader: Engine | None = None

    # ---- opening and migrating ---------------------------------------------------------------

    def open(self) -> Ledger:
        try:
            url = make_url(self.url)
        except ArgumentError as exc:
            raise InputError("ledger_url", f"ledger_url is not a database URL ({safe_url(self.url)}): {exc}") from exc
        backend = url.get_backend_name()
        if backend not in ("sqlite", "postgresql"):
            raise InputError("ledger_url", f"ledger_url must be a sqlite:/// or postgresql+psycopg:// URL, "
                                           f"got {safe_url(self.url)}")
        if backend == "sqlite" and url.database and url.database != ":memory:":
            directory = Path(url.database).expanduser().parent
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise LedgerError(f"cannot create the directory of the ledger at {safe_url(self.url)}: "
                                  f"{exc.strerror}: choose a writable path in ledger_url") from exc
        try:
            self.engine = _engine(url)
            self._reader = self.engine.execution_options(berth_read_only=True)
            self._migrate()
        except SQLAlchemyError as exc:
            raise LedgerError(explain_database_error(self.url, exc)) from exc
        return self

    def close(self) -> None:
        if self.engine is not None:
            self.engine.dispose()

    def _migrate(self) -> None:
        # Every action opens the ledger; an up-to-date one is only read, so concurrent runs do
        # not queue for SQLite's write lock just to learn that nothing needs migrating.
        with self._reader.connect() as connection, connection.begin():
            if inspect(connection).has_table("alembic_version"):
                current = connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
                if current == SCHEMA_REVISION:
                    return
        from alembic import command
        from alembic.config import Config
        from alembic.runtime.migration import MigrationContext
        from alembic.script import ScriptDirectory

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        scripts = ScriptDirectory.from_config(config)
        head = scripts.get_current_head()
        known = {rev.revision for rev in scripts.walk_revisions()}
        with self.engine.connect() as connection:
            sqlite = connection.dialect.name == "sqlite"
            if sqlite:
                # Migrations copy tables on SQLite; with foreign keys on, dropping the old copy
                # would cascade into its children. The pragma only works outside a transaction.
                connection.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")
            try:
                with connection.begin():
                    current = MigrationContext.configure(connection).get_current_revision()
                    if current is not None and current not in known:
                        raise LedgerError(
                            f"the ledger at {safe_url(self.url)} has schema revision {current}, newer than "
                            f"this Berth knows (head {head}): upgrade the berth.fleet collection on this "
                            f"controller to the version that wrote it"
                        )
                    if current != head:
                        config.attributes["connection"] = connection
                        command.upgrade(config, "head")
            finally:
                if sqlite:
                    connection.connection.driver_connection.execute("PRAGMA foreign_keys=ON")

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

    # ---- the tracker sync of one run's facts ------------------------------------------------

    @_database_errors
    def sync_hypervisors(self, states: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Record each answering hypervisor's inventories and its unmanaged usage (orphans).

        Returns, per answering hypervisor: host, uuid, generation, changed, orphans.
        """
        with self.session() as session, session.begin():
            return _sync(session, states, utcnow())

    @_database_errors
    def tracker_sync(self, states: Sequence[Mapping[str, Any]], limited: bool = False,
                     dry_run: bool = False) -> dict[str, Any]:
        """The periodic tracker sync (playbooks/gather.yml): inventories, orphans, reconciliation.

        - hypervisors of the ledger that are not in ``states`` are marked missing and reported;
          on a ``limited`` run (--limit) they are only reported. Nothing is ever retired here.
        - ACTIVE instances whose domain is not on their answering hypervisor are flagged missing.
        - a claim is released only when its lease has expired, its hypervisor answered and the
          instance's domain does not exist there; its BUILDING instance becomes ERROR.
        ``dry_run`` works it all out and writes nothing (check mode).
        """
        now = utcnow()
        with self.session() as session, session.begin():
            report = {"hypervisors": _sync(session, states, now), "down": [], "missing_hypervisors": [],
                      "not_in_limited_run": [], "missing_instances": [], "found_again": [],
                      "released_claims": [], "kept_expired_claims": []}
            answered = {s["uuid"]: s for s in states if s.get("service_up") and s.get("uuid")}
            named = {s["host"] for s in states}
            changed = any(entry["changed"] for entry in report["hypervisors"])
            rows = session.scalars(select(HypervisorRow).order_by(HypervisorRow.name)).all()
            names = {row.uuid: row.name for row in rows}
            for row in rows:
                if row.uuid in answered:
                    continue
                entry = {"host": row.name, "uuid": row.uuid, "last_seen_at": _iso(row.last_seen_at)}
                if row.name in named:
                    status, key = HV_DOWN, "down"
                elif limited:
                    status, key = row.sync_status, "not_in_limited_run"
                else:
                    status, key = HV_MISSING, "missing_hypervisors"
                changed = changed or row.sync_status != status
                row.sync_status = status
                report[key].append(entry)
            domains = {hv: {d["uuid"] for d in s.get("domains", [])} for hv, s in answered.items()}
            for instance in session.scalars(select(InstanceRow).where(InstanceRow.state == ACTIVE)):
                if instance.hypervisor_uuid not in domains:
                    continue
                entry = {"name": instance.name, "uuid": instance.uuid, "host": instance.host}
                if instance.uuid not in domains[instance.hypervisor_uuid]:
                    if instance.missing_since is None:
                        instance.missing_since = now
                        changed = True
                    report["missing_instances"].append({**entry, "missing_since": _iso(instance.missing_since)})
                elif instance.missing_since is not None:
                    instance.missing_since = None
                    changed = True
                    report["found_again"].append(entry)
            expired = session.scalars(
                select(ClaimRow).where(ClaimRow.lease_expires_at < now).order_by(ClaimRow.id)
            ).all()
            for claim in expired:
                entry = {**claim.to_dict(names.get(claim.hypervisor_uuid))}
                if claim.hypervisor_uuid not in domains:
                    report["kept_expired_claims"].append({**entry, "why": "its hypervisor did not answer"})
                elif claim.instance_uuid in domains[claim.hypervisor_uuid]:
                    report["kept_expired_claims"].append({**entry, "why": "its domain exists"})
                else:
                    _release(session, claim, f"build abandoned by {claim.owner}: lease expired at "
                                             f"{_iso(claim.lease_expires_at)} and no domain on "
                                             f"{names.get(claim.hypervisor_uuid)}", now)
                    report["released_claims"].append(entry)
                    changed = True
            report["changed"] = changed
            if dry_run:
                session.rollback()
            return report

    # ---- the tracker view --------------------------------------------------------------------

    @_database_errors
    def tracker_states(self, states: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The host states with their usage taken from the ledger instead of the hypervisor,
        the operator's disabled flag, and the generation the view was read at."""
        with self._read() as session:
            views = []
            for state in states:
                row = session.get(HypervisorRow, state.get("uuid") or "")
                view = dict(state)
                if row is not None:
                    view["disabled"] = bool(state.get("disabled")) or row.disabled
                    view["disabled_reason"] = row.disabled_reason if row.disabled else state.get("disabled_reason")
                    view["generation"] = row.generation
                    if state.get("service_up"):
                        view.update(_usage_fields(session, row))
                views.append(view)
            return views

    @_database_errors
    def hypervisors(self) -> list[dict[str, Any]]:
        """Every hypervisor with its inventories and its usage from the ledger."""
        with self._read() as session:
            result = []
            for row in session.scalars(select(HypervisorRow).order_by(HypervisorRow.name)):
                inventories = {inv.resource_class: {"total": inv.total, "reserved": inv.reserved,
                                                    "allocation_ratio": inv.allocation_ratio}
                               for inv in _inventories(session, row.uuid).values()}
                unmanaged = session.scalars(select(UnmanagedRow).where(UnmanagedRow.hypervisor_uuid == row.uuid)
                                            .order_by(UnmanagedRow.domain_name)).all()
                result.append({
                    "uuid": row.uuid, "host": row.name, "nodename": row.nodename,
                    "generation": row.generation, "disabled": row.disabled,
                    "disabled_reason": row.disabled_reason, "sync_status": row.sync_status,
                    "last_seen_at": _iso(row.last_seen_at), "synced_at": _iso(row.synced_at),
                    "inventories": inventories,
                    "unmanaged": [{"name": u.domain_name, "uuid": u.domain_uuid, "vcpus": u.vcpus,
                                   "memory_mb": u.memory_mb, "disk_mb": u.disk_mb} for u in unmanaged],
                    "usage": _usage_fields(session, row) if inventories else {},
                })
            return result

    # ---- operators' actions on hypervisors -------------------------------------------------

    @_database_errors
    def set_disabled(self, host: str, disabled: bool, reason: str | None = None,
                     dry_run: bool = False) -> dict[str, Any]:
        """Disable (with a reason) or enable a hypervisor; ``changed`` says if anything moved."""
        with self.session() as session, session.begin():
            row = _find_hypervisor(session, host)
            wanted_reason = reason if disabled else None
            changed = row.disabled != disabled or row.disabled_reason != wanted_reason
            if changed and not dry_run:
                row.disabled = disabled
                row.disabled_reason = wanted_reason
                row.generation += 1
            return {"changed": changed, "host": row.name, "uuid": row.uuid, "disabled": disabled,
                    "disabled_reason": wanted_reason}

    @_database_errors
    def retire_hypervisor(self, host: str, dry_run: bool = False) -> dict[str, Any]:
        """Forget a hypervisor for good: drop its claims (their instances become ERROR unless they
        hold another claim), its inventories and unmanaged usage. The operator's explicit act."""
        now = utcnow()
        with self.session() as session, session.begin():
            row = _find_hypervisor(session, host, missing_ok=True)
            if row is None:
                return {"changed": False, "host": host, "released_claims": []}
            claims = session.scalars(select(ClaimRow).where(ClaimRow.hypervisor_uuid == row.uuid)).all()
            released = [claim.to_dict(row.name) for claim in claims]
            for claim in claims:
                _release(session, claim, f"hypervisor {row.name} was retired", now)
            session.execute(delete(InventoryRow).where(InventoryRow.hypervisor_uuid == row.uuid))
            session.execute(delete(UnmanagedRow).where(UnmanagedRow.hypervisor_uuid == row.uuid))
            for instance in session.scalars(select(InstanceRow).where(InstanceRow.hypervisor_uuid == row.uuid)):
                instance.hypervisor_uuid = None
            result = {"changed": True, "host": row.name, "uuid": row.uuid, "released_claims": released}
            session.flush()
            session.delete(row)
            if dry_run:
                session.rollback()
            return result

    # ---- instances and claims ------------------------------------------------------------------

    @_database_errors
    def instances(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        with self._read() as session:
            query = select(InstanceRow).order_by(InstanceRow.name)
            if names is not None:
                query = query.where(InstanceRow.name.in_(list(names)))
            return [row.to_dict() for row in session.scalars(query)]

    @_database_errors
    def claims(self, instance_uuid: str | None = None) -> list[dict[str, Any]]:
        with self._read() as session:
            query = select(ClaimRow, HypervisorRow.name).join(
                HypervisorRow, HypervisorRow.uuid == ClaimRow.hypervisor_uuid).order_by(ClaimRow.id)
            if instance_uuid is not None:
                query = query.where(ClaimRow.instance_uuid == instance_uuid)
            return [claim.to_dict(name) for claim, name in session.execute(query)]

    @_database_errors
    def claim(self, placements: Sequence[Mapping[str, Any]], flavor: Flavor, owner: str,
              lease_s: int = DEFAULT_LEASE_S, server_group: str | None = None,
              image: str | None = None) -> list[dict[str, Any]]:
        """Write BUILDING instances and their claims in one transaction, or nothing.

        ``placements`` are dicts with ``name``, ``host`` and ``hypervisor_uuid`` (and optionally
        the ``generation`` the decision saw). The chosen hypervisors and the server group are
        locked; each host's room is re-checked from the ledger itself (inventories, claims,
        unmanaged usage) and the group's hard policy against its members' hosts; if anything no
        longer fits, ClaimConflict is raised and nothing is written. Each claim carries ``owner``
        and a lease of ``lease_s`` seconds. Instances of these names in ERROR are replaced.
        Returns the instances, each with ``claim_id`` and ``generation_moved`` (the host changed
        since the decision, and the re-check found it still fits).
        """
        unsafe = os.environ.get(UNSAFE_CLAIMS_ENV) == "1"
        now = utcnow()
        created = []
        try:
            with self.session() as session, session.begin():
                group = _lock_group(session, server_group) if server_group else None
                rows = _lock_hypervisors(session, {p["hypervisor_uuid"] for p in placements}, unsafe)
                views: dict[str, HostState] = {}
                for placement in placements:
                    hv_uuid = placement["hypervisor_uuid"]
                    row = rows.get(hv_uuid)
                    if row is None:
                        raise ClaimConflict(placement["host"], "not in the ledger (no facts synced)")
                    if not unsafe:
                        if hv_uuid not in views:
                            views[hv_uuid] = _host_view(session, row)
                        _check_room(views[hv_uuid], flavor, placement["host"])
                        views[hv_uuid].consume(flavor)
                    old = session.scalars(select(InstanceRow).where(InstanceRow.name == placement["name"])).first()
                    if old is not None:
                        if old.state != ERROR:
                            raise ClaimConflict(placement["host"], f"instance {old.name} was launched meanwhile")
                        session.delete(old)
                        session.flush()
                    instance = InstanceRow(
                        uuid=str(uuidlib.uuid4()), name=placement["name"], flavor_name=flavor.name,
                        vcpus=flavor.vcpus, memory_mb=flavor.memory_mb, root_gb=flavor.root_gb,
                        ephemeral_gb=flavor.ephemeral_gb, swap=flavor.swap, image=image,
                        hypervisor_uuid=hv_uuid, host=row.name, state=BUILDING, created_at=now, updated_at=now,
                    )
                    session.add(instance)
                    session.flush()  # the claim's foreign key needs the instance row first
                    claim = _new_claim(instance, hv_uuid, flavor.requested_disk_mb, owner, lease_s, now)
                    session.add(claim)
                    session.flush()
                    moved = placement.get("generation") is not None and placement["generation"] != row.generation
                    created.append({**instance.to_dict(), "claim_id": claim.id, "generation_moved": moved})
                if group is not None:
                    if not unsafe:
                        _check_group(session, group, [p["host"] for p in placements])
                    for entry in created:
                        session.add(MemberRow(group_uuid=group.uuid, instance_uuid=entry["uuid"]))
                for row in rows.values():
                    row.generation += 1
            return created
        except IntegrityError as exc:
            # Another run inserted one of these names between our read and our write.
            raise ClaimConflict(placements[0]["host"] if placements else "-",
                                f"an instance of this launch was created meanwhile ({exc.orig})") from exc
        except OperationalError as exc:
            # PostgreSQL broke a lock cycle with another transaction: a lost race like any other.
            if "deadlock detected" not in str(exc.orig):
                raise
            raise ClaimConflict(placements[0]["host"] if placements else "-", "deadlock, decide again") from exc

    @_database_errors
    def claim_move(self, instance_uuid: str, hypervisor_uuid: str, owner: str,
                   lease_s: int = DEFAULT_LEASE_S) -> dict[str, Any]:
        """Claim the destination of a move for an instance that keeps its current claim.

        Locked and re-checked as ``claim`` does (room, and the hard policy of the instance's
        server group with the destination added); raises ClaimConflict if it does not fit.
        Complete the move with ``finish_move``, or give the destination back with ``release_claim``.
        """
        with self.session() as session, session.begin():
            return _claim_instance_on(session, instance_uuid, hypervisor_uuid, owner, lease_s, keep_others=True)

    @_database_errors
    def claim_alternate(self, instance_uuid: str, host: str, hypervisor_uuid: str, owner: str,
                        lease_s: int = DEFAULT_LEASE_S) -> dict[str, Any]:
        """Retry a failed build on an alternate host, in one transaction: the instance gives back
        every claim it holds, claims ``hypervisor_uuid`` (``host``) - locked and re-checked for
        room and its group's hard policy, as ``claim`` does - and moves there, BUILDING, keeping
        its uuid and name. Returns the instance with ``claim_id``; raises ClaimConflict, changing
        nothing, if the alternate has no room."""
        with self.session() as session, session.begin():
            claim = _claim_instance_on(session, instance_uuid, hypervisor_uuid, owner, lease_s, keep_others=False,
                                       host=host)
            instance = _instance(session, instance_uuid)
            instance.hypervisor_uuid, instance.host = hypervisor_uuid, claim["host"]
            instance.state, instance.failure_reason, instance.updated_at = BUILDING, None, utcnow()
            return {**instance.to_dict(), "claim_id": claim["id"]}

    @_database_errors
    def finish_move(self, instance_uuid: str, claim_id: int) -> dict[str, Any]:
        """The instance now runs where claim ``claim_id`` is: it becomes its only claim."""
        with self.session() as session, session.begin():
            instance = _instance(session, instance_uuid)
            target = session.get(ClaimRow, claim_id)
            if target is None or target.instance_uuid != instance_uuid:
                raise LedgerError(f"claim {claim_id} is not a claim of instance {instance.name}")
            hv = session.get(HypervisorRow, target.hypervisor_uuid)
            for claim in session.scalars(select(ClaimRow).where(ClaimRow.instance_uuid == instance_uuid)):
                if claim.id != claim_id:
                    _drop(session, claim)
            instance.hypervisor_uuid = hv.uuid
            instance.host = hv.name
            instance.missing_since = None
            instance.updated_at = utcnow()
            if instance.state == ACTIVE:
                target.lease_expires_at = None
            return instance.to_dict()

    @_database_errors
    def release_claim(self, claim_id: int) -> bool:
        """Give one claim back (a move that did not happen); False if it was not there."""
        if isinstance(claim_id, bool) or not isinstance(claim_id, int):
            # Claims have ids of their own since schema 0002; an instance UUID here is a bug.
            raise LedgerError(f"release_claim takes a claim id (an integer), got {claim_id!r}")
        with self.session() as session, session.begin():
            claim = session.get(ClaimRow, claim_id)
            if claim is None:
                return False
            _drop(session, claim)
            return True

    @_database_errors
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
        now = utcnow()
        with self.session() as session, session.begin():
            # A dry run may come before the hypervisor's first sync (check mode syncs nothing).
            row = _find_hypervisor(session, host, missing_ok=dry_run)
            existing = session.get(InstanceRow, domain_uuid)
            if existing is not None:
                if row is None or existing.hypervisor_uuid != row.uuid:
                    raise InputError("domain", f"domain {domain_uuid} is instance {existing.name} of the ledger, "
                                               f"which places it on {existing.host}, not {row.name}")
                return existing.to_dict(), False
            taken = session.scalars(select(InstanceRow).where(InstanceRow.name == name)).first()
            if taken is not None:
                raise InputError("name", f"name {name} is already instance {taken.uuid} on {taken.host}; "
                                         f"pass another name")
            instance = InstanceRow(
                uuid=domain_uuid, name=name, flavor_name=flavor.name, vcpus=flavor.vcpus,
                memory_mb=flavor.memory_mb, root_gb=flavor.root_gb, ephemeral_gb=flavor.ephemeral_gb,
                swap=flavor.swap, image=None, hypervisor_uuid=row.uuid if row else None,
                host=row.name if row else host, state=ACTIVE, created_at=now, updated_at=now,
            )
            if row is None:
                return instance.to_dict(), True
            session.add(instance)
            session.flush()  # the claim's foreign key needs the instance row first
            claim = _new_claim(instance, row.uuid, flavor.requested_disk_mb, owner, None, now)
            session.add(claim)
            session.execute(delete(UnmanagedRow).where(UnmanagedRow.hypervisor_uuid == row.uuid,
                                                       UnmanagedRow.domain_uuid == domain_uuid))
            row.generation += 1
            session.flush()
            adopted = {**instance.to_dict(), "claim_id": claim.id}
            if dry_run:
                session.rollback()
            return adopted, True

    @_database_errors
    def mark_active(self, instance_uuid: str) -> None:
        """The domain runs: the instance is ACTIVE and its claim no longer needs a lease."""
        with self.session() as session, session.begin():
            instance = _instance(session, instance_uuid)
            instance.state = ACTIVE
            instance.failure_reason = None
            instance.updated_at = utcnow()
            for claim in session.scalars(select(ClaimRow).where(ClaimRow.instance_uuid == instance_uuid,
                                                                ClaimRow.hypervisor_uuid == instance.hypervisor_uuid)):
                claim.lease_expires_at = None

    @_database_errors
    def mark_error(self, instance_uuid: str, reason: str) -> None:
        """The build failed: release its claims (nothing is left on the host) and keep the why."""
        with self.session() as session, session.begin():
            instance = _instance(session, instance_uuid)
            for claim in session.scalars(select(ClaimRow).where(ClaimRow.instance_uuid == instance_uuid)):
                _release(session, claim, reason, utcnow())
            instance.state = ERROR
            instance.failure_reason = reason

    @_database_errors
    def delete_instance(self, instance_uuid: str) -> bool:
        """Forget an instance, its claims and group membership; False if it was not there."""
        with self.session() as session, session.begin():
            instance = session.get(InstanceRow, instance_uuid)
            if instance is None:
                return False
            # The group first, then hypervisors: the order a claim takes its locks in.
            session.execute(delete(MemberRow).where(MemberRow.instance_uuid == instance_uuid))
            for claim in session.scalars(select(ClaimRow).where(ClaimRow.instance_uuid == instance_uuid)):
                _drop(session, claim)
            session.delete(instance)
            return True

    # ---- server groups -------------------------------------------------------------------------

    @_database_errors
    def create_server_group(self, name: str, policy: str, max_server_per_host: int | None = None,
                            dry_run: bool = False) -> tuple[dict[str, Any], bool]:
        """Create a group (idempotent); returns (the group, changed). A group's policy and rules
        never change once made (as in Nova): a different request for the same name is an error."""
        _check_group_args(name, policy, max_server_per_host)
        with self.session() as session, session.begin():
            row = session.scalars(select(ServerGroupRow).where(ServerGroupRow.name == name)).first()
            if row is not None:
                if (row.policy, row.max_server_per_host) != (policy, max_server_per_host):
                    raise InputError("policy", f"server group {name} exists with policy {row.policy} and "
                                               f"max_server_per_host {row.max_server_per_host}; a group's "
                                               f"rules cannot change: delete it first, or use another name")
                return _group_view(session, row), False
            row = ServerGroupRow(uuid=str(uuidlib.uuid4()), name=name, policy=policy,
                                 max_server_per_host=max_server_per_host, created_at=utcnow())
            session.add(row)
            session.flush()
            view = _group_view(session, row)
            if dry_run:
                session.rollback()
            return view, True

    @_database_errors
    def delete_server_group(self, name: str, dry_run: bool = False) -> bool:
        """Delete a group (its instances stay, no longer grouped); False if there was none."""
        with self.session() as session, session.begin():
            row = session.scalars(select(ServerGroupRow).where(ServerGroupRow.name == name)).first()
            if row is None:
                return False
            if not dry_run:
                session.execute(delete(MemberRow).where(MemberRow.group_uuid == row.uuid))
                session.delete(row)
            return True

    @_database_errors
    def server_groups(self, name: str | None = None) -> list[dict[str, Any]]:
        """Groups with their members and the hosts those hold claims on (Nova's group.hosts)."""
        with self._read() as session:
            query = select(ServerGroupRow).order_by(ServerGroupRow.name)
            if name is not None:
                query = query.where(ServerGroupRow.name == name)
            return [_group_view(session, row) for row in session.scalars(query)]

    @_database_errors
    def scheduler_group(self, name: str) -> dict[str, Any] | None:
        """A group in the placement engine's form: {name, policy, rules, hosts, members}, where
        members counts the group's claims per host; None if there is no such group."""
        with self._read() as session:
            row = session.scalars(select(ServerGroupRow).where(ServerGroupRow.name == name)).first()
            if row is None:
                return None
            per_host = collections.Counter(_member_hosts(session, row))
            return {"name": row.name, "policy": row.policy,
                    "rules": {"max_server_per_host": row.max_server_per_host} if row.max_server_per_host else {},
                    "hosts": sorted(per_host), "members": dict(sorted(per_host.items()))}

    # ---- decisions -----------------------------------------------------------------------------

    @_database_errors
    def record_decision(self, name: str, owner: str, request: Mapping[str, Any],
                        host_states: Sequence[Mapping[str, Any]], decision: Mapping[str, Any],
                        outcome: str) -> int:
        """Keep one decision with the request and host states it was made on; returns its id."""
        with self.session() as session, session.begin():
            row = DecisionRow(created_at=utcnow(), owner=owner, name=name, ok=bool(decision.get("ok")),
                              outcome=outcome, summary=str(decision.get("summary", "")),
                              request=dict(request), host_states=[dict(s) for s in host_states],
                              decision=dict(decision))
            session.add(row)
            session.flush()
            return row.id

    @_database_errors
    def decisions(self, name: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        """The newest decisions first (only those of launch ``name`` if given)."""
        with self._read() as session:
            query = select(DecisionRow).order_by(DecisionRow.id.desc()).limit(limit)
            if name is not None:
                query = query.where(DecisionRow.name == name)
            return [row.to_dict() for row in session.scalars(query)]


# ---- transaction helpers (all take the caller's session) -------------------------------------


def instance_flavor(instance: Mapping[str, Any]) -> Flavor:
    """The flavor an instance row (``to_dict()``) was built with."""
    return Flavor(name=instance["flavor"], vcpus=instance["vcpus"], memory_mb=instance["memory_mb"],
                  root_gb=instance["root_gb"], ephemeral_gb=instance["ephemeral_gb"], swap=instance["swap"])


def _engine(url: Any) -> Engine:
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    connect_args = {} if "timeout" in url.query else {"timeout": SQLITE_LOCK_TIMEOUT_S}
    engine = create_engine(url, connect_args=connect_args)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" below start transactions, not the driver's lazy BEGIN.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        # Take the write lock when a writing transaction starts, so a claim's re-check and its
        # write see the same state: two runs cannot both find the last slot free. Readers take
        # a snapshot without it (WAL lets them read beside a writer).
        if connection.get_execution_options().get("berth_read_only"):
            connection.exec_driver_sql("BEGIN")
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _domain_instance(domain: Mapping[str, Any]) -> str | None:
    berth = domain.get("berth")
    return berth.get("instance_uuid") if berth else None


def _inventories(session: Session, hv_uuid: str) -> dict[str, InventoryRow]:
    rows = session.scalars(select(InventoryRow).where(InventoryRow.hypervisor_uuid == hv_uuid))
    return {row.resource_class: row for row in rows}


def _wanted_inventories(state: Mapping[str, Any]) -> dict[str, tuple[int, int, float]]:
    return {
        VCPU: (int(state["vcpus_total"]), 0, float(state["cpu_allocation_ratio"])),
        MEMORY_MB: (int(state["total_usable_ram_mb"]), int(state["reserved_host_memory_mb"]),
                    float(state["ram_allocation_ratio"])),
        DISK_MB: (int(state["total_usable_disk_gb"]) * 1024, int(state["reserved_host_disk_mb"]),
                  float(state["disk_allocation_ratio"])),
    }


def _sync(session: Session, states: Iterable[Mapping[str, Any]], now: dt.datetime) -> list[dict[str, Any]]:
    """Write each answering hypervisor's inventories and orphans; the generation moves on change.

    A domain is managed when the ledger holds a claim for its instance on that very hypervisor
    (the domain UUID is the instance UUID); anything else there is unmanaged usage.
    """
    answering = sorted((s for s in states if s.get("service_up") and s.get("uuid")), key=lambda s: s["uuid"])
    known = set(session.scalars(select(HypervisorRow.uuid).where(
        HypervisorRow.uuid.in_([s["uuid"] for s in answering]))))
    new = set()
    for state in answering:
        if state["uuid"] not in known:
            # Several first launches may sync a new hypervisor at once: on PostgreSQL nothing is
            # locked yet, so the row is inserted unless another run just did, then locked below.
            insert = _insert(session)(HypervisorRow).values(
                uuid=state["uuid"], name=state["host"], nodename=state.get("nodename") or state["host"],
                generation=0, synced_at=now, disabled=False, sync_status=HV_UP)
            if session.execute(insert.on_conflict_do_nothing(index_elements=["uuid"])).rowcount == 1:
                new.add(state["uuid"])
    rows = _lock_hypervisors(session, {s["uuid"] for s in answering}, unsafe=False)
    result = []
    for state in answering:
        row = rows[state["uuid"]]
        changed = state["uuid"] in new
        if (row.name, row.nodename) != (state["host"], state.get("nodename") or state["host"]):
            row.name, row.nodename = state["host"], state.get("nodename") or state["host"]
            changed = True
        current = _inventories(session, row.uuid)
        for resource, (total, reserved, ratio) in _wanted_inventories(state).items():
            inv = current.get(resource)
            if inv is None:
                session.add(InventoryRow(hypervisor_uuid=row.uuid, resource_class=resource, total=total,
                                         reserved=reserved, allocation_ratio=ratio))
                changed = True
            elif (inv.total, inv.reserved, inv.allocation_ratio) != (total, reserved, ratio):
                inv.total, inv.reserved, inv.allocation_ratio = total, reserved, ratio
                changed = True
        claimed = set(session.scalars(select(ClaimRow.instance_uuid).where(ClaimRow.hypervisor_uuid == row.uuid)))
        orphans = {
            dom["uuid"]: dom for dom in state.get("domains", [])
            if dom["uuid"] not in claimed and _domain_instance(dom) not in claimed
        }
        known = {u.domain_uuid: u for u in session.scalars(
            select(UnmanagedRow).where(UnmanagedRow.hypervisor_uuid == row.uuid))}
        for domain_uuid, unmanaged in known.items():
            if domain_uuid not in orphans:
                session.delete(unmanaged)
                changed = True
        for domain_uuid, dom in orphans.items():
            usage = (dom["name"], int(dom["vcpus"]), int(dom["memory_mb"]),
                     sum(int(d["capacity_mb"]) for d in dom.get("disks", [])))
            unmanaged = known.get(domain_uuid)
            if unmanaged is None:
                session.add(UnmanagedRow(hypervisor_uuid=row.uuid, domain_uuid=domain_uuid, domain_name=usage[0],
                                         vcpus=usage[1], memory_mb=usage[2], disk_mb=usage[3], seen_at=now))
                changed = True
            else:
                if (unmanaged.domain_name, unmanaged.vcpus, unmanaged.memory_mb, unmanaged.disk_mb) != usage:
                    unmanaged.domain_name, unmanaged.vcpus, unmanaged.memory_mb, unmanaged.disk_mb = usage
                    changed = True
                unmanaged.seen_at = now
        changed = changed or row.sync_status != HV_UP
        if changed:
            row.generation += 1
        row.synced_at = now
        row.last_seen_at = now
        row.sync_status = HV_UP
        result.append({"host": row.name, "uuid": row.uuid, "generation": row.generation, "changed": changed,
                       "orphans": sorted(dom["name"] for dom in orphans.values())})
    return result


def _insert(session: Session) -> Any:
    """The dialect's INSERT, which knows ON CONFLICT DO NOTHING (SQLite and PostgreSQL both do)."""
    return postgresql_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert


def _lock_hypervisors(session: Session, uuids: Iterable[str], unsafe: bool) -> dict[str, HypervisorRow]:
    """The hypervisor rows, locked FOR UPDATE in UUID order (a no-op on SQLite, which holds the
    write lock already) so that concurrent claims on PostgreSQL queue instead of deadlocking."""
    query = select(HypervisorRow).where(HypervisorRow.uuid.in_(sorted(uuids))).order_by(HypervisorRow.uuid)
    if not unsafe:
        query = query.with_for_update()
    return {row.uuid: row for row in session.scalars(query)}


def _claim_instance_on(session: Session, instance_uuid: str, hv_uuid: str, owner: str, lease_s: int,
                       keep_others: bool, host: str | None = None) -> dict[str, Any]:
    """A new claim for an existing instance, locked (its group, then the hypervisor) and
    re-checked as ``claim`` does; unless ``keep_others``, its other claims are given back first."""
    now = utcnow()
    instance = _instance(session, instance_uuid)
    membership = session.scalars(select(MemberRow).where(MemberRow.instance_uuid == instance_uuid)).first()
    group = None
    if membership is not None:
        group = session.scalars(select(ServerGroupRow).where(ServerGroupRow.uuid == membership.group_uuid)
                                .with_for_update()).one()
    row = _lock_hypervisors(session, {hv_uuid}, unsafe=False).get(hv_uuid)
    if row is None:
        raise ClaimConflict(host or hv_uuid, "not in the ledger (no facts synced)")
    if keep_others and row.uuid == instance.hypervisor_uuid:
        raise InputError("host", f"instance {instance.name} already runs on {row.name}")
    if not keep_others:
        for old in session.scalars(select(ClaimRow).where(ClaimRow.instance_uuid == instance_uuid)):
            _drop(session, old)
        session.flush()
    flavor = instance_flavor(instance.to_dict())
    _check_room(_host_view(session, row), flavor, row.name)
    if group is not None:
        _check_group(session, group, [row.name], moving=instance_uuid)
    claim = _new_claim(instance, row.uuid, flavor.requested_disk_mb, owner, lease_s, now)
    session.add(claim)
    row.generation += 1
    session.flush()
    return claim.to_dict(row.name)


def _lock_group(session: Session, name: str) -> ServerGroupRow:
    row = session.scalars(select(ServerGroupRow).where(ServerGroupRow.name == name).with_for_update()).first()
    if row is None:
        raise InputError("server_group", f"no server group named {name!r} in the ledger: create it with "
                                         f"berth.fleet.server_group first")
    return row


def _drop(session: Session, claim: ClaimRow) -> None:
    """Delete a claim; its hypervisor's generation moves, as with every change to its usage."""
    _bump(session, claim.hypervisor_uuid)
    session.delete(claim)


def _bump(session: Session, hv_uuid: str) -> None:
    row = session.get(HypervisorRow, hv_uuid)
    if row is not None:
        row.generation += 1


def _release(session: Session, claim: ClaimRow, reason: str, now: dt.datetime) -> None:
    """Drop a claim; an instance left without any claim is ERROR with ``reason``."""
    instance = session.get(InstanceRow, claim.instance_uuid)
    _drop(session, claim)
    session.flush()
    if instance is not None:
        left = session.scalar(select(func.count(ClaimRow.id)).where(ClaimRow.instance_uuid == instance.uuid))
        if not left:
            instance.state = ERROR
            instance.failure_reason = reason
            instance.updated_at = now


def _new_claim(instance: InstanceRow, hv_uuid: str, disk_mb: int, owner: str, lease_s: int | None,
               now: dt.datetime) -> ClaimRow:
    """A claim of the instance's amounts; ``lease_s`` None for one that needs no lease (nothing is built)."""
    lease = None if lease_s is None else now + dt.timedelta(seconds=lease_s)
    return ClaimRow(instance_uuid=instance.uuid, hypervisor_uuid=hv_uuid, vcpus=instance.vcpus,
                    memory_mb=instance.memory_mb, disk_mb=disk_mb, owner=owner,
                    lease_expires_at=lease, created_at=now)


def _instance(session: Session, instance_uuid: str) -> InstanceRow:
    instance = session.get(InstanceRow, instance_uuid)
    if instance is None:
        raise LedgerError(f"instance {instance_uuid} is not in the ledger")
    return instance


def _find_hypervisor(session: Session, host: str, missing_ok: bool = False) -> HypervisorRow | None:
    row = session.scalars(
        select(HypervisorRow).where((HypervisorRow.name == host) | (HypervisorRow.uuid == host)).with_for_update()
    ).first()
    if row is None and not missing_ok:
        known = ", ".join(session.scalars(select(HypervisorRow.name).order_by(HypervisorRow.name))) or "none"
        raise InputError("host", f"no hypervisor {host!r} in the ledger (known: {known}); run "
                                 f"playbooks/gather.yml to record the inventory's hypervisors")
    return row


def _check_group_args(name: Any, policy: Any, max_server_per_host: Any) -> None:
    if not isinstance(name, str) or not name or len(name) > 255:
        raise InputError("name", f"name must be a non-empty string of at most 255 characters, got {name!r}")
    if policy not in POLICIES:
        raise InputError("policy", f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    if max_server_per_host is not None:
        if policy != ANTI_AFFINITY:
            raise InputError("max_server_per_host", "max_server_per_host is a rule of the anti-affinity policy only")
        if isinstance(max_server_per_host, bool) or not isinstance(max_server_per_host, int) \
                or max_server_per_host < 1:
            raise InputError("max_server_per_host",
                             f"max_server_per_host must be an integer of at least 1, got {max_server_per_host!r}")


def _member_hosts(session: Session, group: ServerGroupRow, moving: str | None = None) -> list[str]:
    """The host of each claim the group's members hold, one entry per claim (so counts work);
    a moving member's own claims are left out."""
    query = (select(HypervisorRow.name)
             .join(ClaimRow, ClaimRow.hypervisor_uuid == HypervisorRow.uuid)
             .join(MemberRow, MemberRow.instance_uuid == ClaimRow.instance_uuid)
             .where(MemberRow.group_uuid == group.uuid))
    if moving is not None:
        query = query.where(ClaimRow.instance_uuid != moving)
    return list(session.scalars(query))


def _group_view(session: Session, row: ServerGroupRow) -> dict[str, Any]:
    members = sorted(session.scalars(select(MemberRow.instance_uuid).where(MemberRow.group_uuid == row.uuid)))
    return {
        "uuid": row.uuid, "name": row.name, "policy": row.policy,
        "rules": {"max_server_per_host": row.max_server_per_host} if row.max_server_per_host else {},
        "members": members, "hosts": sorted(set(_member_hosts(session, row))),
    }


def _check_group(session: Session, group: ServerGroupRow, new_hosts: Sequence[str],
                 moving: str | None = None) -> None:
    """The hard policies, against the group's members as they are now (the group is locked)."""
    hosts = _member_hosts(session, group, moving) + list(new_hosts)
    if group.policy == ANTI_AFFINITY:
        limit = group.max_server_per_host or 1
        for host in sorted(set(new_hosts)):
            if hosts.count(host) > limit:
                raise ClaimConflict(host, f"anti-affinity group {group.name} would have {hosts.count(host)} "
                                          f"members on it (at most {limit})")
    elif group.policy == AFFINITY and len(set(hosts)) > 1:
        raise ClaimConflict(new_hosts[0], f"affinity group {group.name} would span {', '.join(sorted(set(hosts)))}")


def _sums(session: Session, model: Any, hv_uuid: str) -> tuple[int, int, int, int]:
    """vCPUs, memory, disk and rows of the claims or unmanaged usage on one hypervisor."""
    return tuple(session.execute(
        select(func.coalesce(func.sum(model.vcpus), 0), func.coalesce(func.sum(model.memory_mb), 0),
               func.coalesce(func.sum(model.disk_mb), 0), func.count())
        .select_from(model).where(model.hypervisor_uuid == hv_uuid)
    ).one())


def _usage_fields(session: Session, row: HypervisorRow) -> dict[str, Any]:
    """Usage from the ledger: reserved + claims + unmanaged, in host-state field names."""
    inventories = _inventories(session, row.uuid)
    vcpus, memory_mb, disk_mb, count = _sums(session, ClaimRow, row.uuid)
    o_vcpus, o_memory_mb, o_disk_mb, o_count = _sums(session, UnmanagedRow, row.uuid)
    cpu, ram, disk = inventories[VCPU], inventories[MEMORY_MB], inventories[DISK_MB]
    return {
        "vcpus_total": cpu.total,
        "vcpus_used": cpu.reserved + vcpus + o_vcpus,
        "total_usable_ram_mb": ram.total,
        "free_ram_mb": ram.total - ram.reserved - memory_mb - o_memory_mb,
        "total_usable_disk_gb": disk.total // 1024,
        "free_disk_mb": disk.total - disk.reserved - disk_mb - o_disk_mb,
        "num_instances": count + o_count,
        "cpu_allocation_ratio": cpu.allocation_ratio,
        "ram_allocation_ratio": ram.allocation_ratio,
        "disk_allocation_ratio": disk.allocation_ratio,
        "reserved_host_memory_mb": ram.reserved,
        "reserved_host_disk_mb": disk.reserved,
    }


def _host_view(session: Session, row: HypervisorRow) -> HostState:
    """The host as the ledger alone sees it, for a claim's re-check."""
    state = {"host": row.name, "nodename": row.nodename, "uuid": row.uuid, "service_up": True,
             "disabled": False, "num_io_ops": 0}
    state.update(_usage_fields(session, row))
    return HostState.from_dict(state)


def _check_room(view: HostState, flavor: Flavor, host: str) -> None:
    spec = RequestSpec(flavor=flavor, count=1)
    for name in CLAIM_CHECK_FILTERS:
        rejection = FILTERS[name]().host_passes(view, spec)
        if rejection is not None:
            raise ClaimConflict(host, rejection.message())
