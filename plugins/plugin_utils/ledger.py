"""The ledger: Berth's placement state in a SQL database (SQLite file by default).

This is the only Berth module that imports SQLAlchemy. It runs on the controller only.

Usage the scheduler decides on (the tracker view) is the ledger's claims plus the unmanaged
usage a sync recorded; capacity (totals, reserved, ratios) is the last synced copy of the facts.
A claim re-checks that capacity inside the transaction that writes it, with the placement
engine's own resource filters, so a claim never relies on a filter's earlier answer.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import socket
import uuid as uuidlib
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import (
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    create_engine,
    event,
    func,
    select,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, LedgerError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor, HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import FILTERS

MIGRATIONS_DIR = Path(__file__).with_name("ledger_migrations")

# Instance states, as Nova's vm_state names them.
BUILDING = "BUILDING"
ACTIVE = "ACTIVE"
ERROR = "ERROR"

# The filters a claim re-checks: the resources, never the policy filters.
CLAIM_CHECK_FILTERS = ("RamFilter", "CoreFilter", "DiskFilter")
DEFAULT_LEASE_S = 3600


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


class Base(DeclarativeBase):
    pass


class HypervisorRow(Base):
    """The last synced copy of a hypervisor's capacity, keyed by its libvirt host UUID."""

    __tablename__ = "hypervisors"
    uuid: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    nodename: Mapped[str] = mapped_column(String(255))
    vcpus_total: Mapped[int] = mapped_column(Integer)
    total_usable_ram_mb: Mapped[int] = mapped_column(Integer)
    total_usable_disk_gb: Mapped[int] = mapped_column(Integer)
    cpu_allocation_ratio: Mapped[float] = mapped_column(Float)
    ram_allocation_ratio: Mapped[float] = mapped_column(Float)
    disk_allocation_ratio: Mapped[float] = mapped_column(Float)
    reserved_host_memory_mb: Mapped[int] = mapped_column(Integer)
    reserved_host_disk_mb: Mapped[int] = mapped_column(Integer)
    # Domains the ledger does not know (orphans), counted as usage so nothing lands on them.
    unmanaged_vcpus: Mapped[int] = mapped_column(Integer, default=0)
    unmanaged_memory_mb: Mapped[int] = mapped_column(Integer, default=0)
    unmanaged_disk_mb: Mapped[int] = mapped_column(Integer, default=0)
    unmanaged_instances: Mapped[int] = mapped_column(Integer, default=0)
    generation: Mapped[int] = mapped_column(Integer, default=0)
    synced_at: Mapped[dt.datetime] = mapped_column(DateTime)


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
    hypervisor_uuid: Mapped[str | None] = mapped_column(ForeignKey("hypervisors.uuid"), nullable=True)
    host: Mapped[str | None] = mapped_column(String(255), nullable=True)
    state: Mapped[str] = mapped_column(String(16))
    failure_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime)

    def to_dict(self) -> dict[str, Any]:
        return {
            "uuid": self.uuid, "name": self.name, "flavor": self.flavor_name, "vcpus": self.vcpus,
            "memory_mb": self.memory_mb, "root_gb": self.root_gb, "ephemeral_gb": self.ephemeral_gb,
            "swap": self.swap, "hypervisor_uuid": self.hypervisor_uuid, "host": self.host,
            "state": self.state, "failure_reason": self.failure_reason,
            "created_at": self.created_at.isoformat(), "updated_at": self.updated_at.isoformat(),
        }


class ClaimRow(Base):
    """The resources one instance holds on one hypervisor; one claim per instance."""

    __tablename__ = "claims"
    instance_uuid: Mapped[str] = mapped_column(ForeignKey("instances.uuid", ondelete="CASCADE"), primary_key=True)
    hypervisor_uuid: Mapped[str] = mapped_column(ForeignKey("hypervisors.uuid"), index=True)
    vcpus: Mapped[int] = mapped_column(Integer)
    memory_mb: Mapped[int] = mapped_column(Integer)
    disk_mb: Mapped[int] = mapped_column(Integer)
    owner: Mapped[str] = mapped_column(String(255))
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime)


class ClaimConflict(BerthError):
    """A host no longer had room when the claim re-checked it; decide again."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"{host}: {reason}")
        self.host = host
        self.reason = reason


def _database_errors(method: Any) -> Any:
    """Turn a database failure into a LedgerError naming the ledger (without its password)."""

    @functools.wraps(method)
    def wrapper(self: Ledger, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except SQLAlchemyError as exc:
            raise LedgerError(
                f"ledger at {safe_url(self.url)}: {exc.__class__.__name__}: {getattr(exc, 'orig', None) or exc}"
            ) from exc

    return wrapper


def run_owner() -> str:
    """Who holds a BUILDING claim: this controller process."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Ledger:
    """The ledger at one URL; ``open()`` migrates it to the newest schema first."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or default_url()
        self.engine: Engine | None = None

    # ---- opening and migrating ---------------------------------------------------------------

    def open(self) -> Ledger:
        try:
            url = make_url(self.url)
        except ArgumentError as exc:
            raise LedgerError(f"ledger_url is not a database URL ({safe_url(self.url)}): {exc}") from exc
        if url.get_backend_name() == "sqlite" and url.database:
            Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        try:
            self.engine = _engine(url)
            self._migrate()
        except OperationalError as exc:
            raise LedgerError(
                f"cannot use the ledger at {safe_url(self.url)}: {exc.orig}. "
                "Check the path or server, its permissions, and that no other process holds it locked."
            ) from exc
        return self

    def _migrate(self) -> None:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        head = ScriptDirectory.from_config(config).get_current_head()
        known = {rev.revision for rev in ScriptDirectory.from_config(config).walk_revisions()}
        with self.engine.begin() as connection:
            current = MigrationContext.configure(connection).get_current_revision()
            if current is not None and current not in known:
                raise LedgerError(
                    f"the ledger at {safe_url(self.url)} has schema revision {current}, newer than "
                    f"this Berth knows (head {head}): upgrade the berth.fleet collection"
                )
            if current == head:
                return
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    def session(self) -> Session:
        if self.engine is None:
            self.open()
        return Session(self.engine, expire_on_commit=False)

    # ---- the tracker sync of one run's facts ------------------------------------------------

    @_database_errors
    def sync_hypervisors(self, states: Iterable[Mapping[str, Any]]) -> None:
        """Record each answering hypervisor's capacity and its unmanaged usage (orphans).

        A domain is managed when the ledger holds a claim for it on that very hypervisor;
        anything else running there (made by hand, or left by another tool) is unmanaged.
        """
        with self.session() as session, session.begin():
            for state in states:
                if not state.get("service_up") or not state.get("uuid"):
                    continue
                claimed = set(session.scalars(
                    select(ClaimRow.instance_uuid).where(ClaimRow.hypervisor_uuid == state["uuid"])
                ))
                orphans = [dom for dom in state.get("domains", []) if _domain_instance(dom) not in claimed]
                values = {
                    "name": state["host"], "nodename": state["nodename"],
                    "vcpus_total": state["vcpus_total"],
                    "total_usable_ram_mb": state["total_usable_ram_mb"],
                    "total_usable_disk_gb": state["total_usable_disk_gb"],
                    "cpu_allocation_ratio": state["cpu_allocation_ratio"],
                    "ram_allocation_ratio": state["ram_allocation_ratio"],
                    "disk_allocation_ratio": state["disk_allocation_ratio"],
                    "reserved_host_memory_mb": state["reserved_host_memory_mb"],
                    "reserved_host_disk_mb": state["reserved_host_disk_mb"],
                    "unmanaged_vcpus": sum(dom["vcpus"] for dom in orphans),
                    "unmanaged_memory_mb": sum(dom["memory_mb"] for dom in orphans),
                    "unmanaged_disk_mb": sum(d["capacity_mb"] for dom in orphans for d in dom["disks"]),
                    "unmanaged_instances": len(orphans),
                }
                row = session.get(HypervisorRow, state["uuid"])
                if row is None:
                    row = HypervisorRow(uuid=state["uuid"], generation=0, synced_at=utcnow(), **values)
                    session.add(row)
                if any(getattr(row, key, None) != value for key, value in values.items()):
                    for key, value in values.items():
                        setattr(row, key, value)
                    row.generation = (row.generation or 0) + 1
                row.synced_at = utcnow()

    # ---- the tracker view --------------------------------------------------------------------

    @_database_errors
    def tracker_states(self, states: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The host states with their usage taken from the ledger instead of the hypervisor."""
        with self.session() as session:
            views = []
            for state in states:
                row = session.get(HypervisorRow, state.get("uuid") or "")
                if not state.get("service_up") or row is None:
                    views.append(dict(state))
                    continue
                view = dict(state)
                view.update(_usage_fields(session, row))
                views.append(view)
            return views

    # ---- instances and claims ------------------------------------------------------------------

    @_database_errors
    def instances(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        with self.session() as session:
            query = select(InstanceRow).order_by(InstanceRow.name)
            if names is not None:
                query = query.where(InstanceRow.name.in_(list(names)))
            return [row.to_dict() for row in session.scalars(query)]

    @_database_errors
    def claims(self) -> list[dict[str, Any]]:
        with self.session() as session:
            return [
                {"instance_uuid": c.instance_uuid, "hypervisor_uuid": c.hypervisor_uuid, "vcpus": c.vcpus,
                 "memory_mb": c.memory_mb, "disk_mb": c.disk_mb, "owner": c.owner}
                for c in session.scalars(select(ClaimRow).order_by(ClaimRow.instance_uuid))
            ]

    @_database_errors
    def claim(self, placements: Sequence[Mapping[str, Any]], flavor: Flavor, owner: str,
              lease_s: int = DEFAULT_LEASE_S) -> list[dict[str, Any]]:
        """Write BUILDING instances and their claims in one transaction, or nothing.

        ``placements`` are dicts with ``name``, ``host`` and ``hypervisor_uuid``. Each host's room
        is re-checked from the ledger itself (synced capacity, claims, unmanaged usage); if any
        no longer fits, ClaimConflict is raised and nothing is written. Instances of these names
        in ERROR are replaced.
        """
        spec = RequestSpec(flavor=flavor, count=1)
        checks = [FILTERS[name]() for name in CLAIM_CHECK_FILTERS]
        now = utcnow()
        created = []
        with self.session() as session, session.begin():
            views: dict[str, HostState] = {}
            for placement in placements:
                hv_uuid = placement["hypervisor_uuid"]
                if hv_uuid not in views:
                    row = session.get(HypervisorRow, hv_uuid)
                    if row is None:
                        raise ClaimConflict(placement["host"], "not in the ledger (no facts synced)")
                    views[hv_uuid] = _host_view(session, row)
                view = views[hv_uuid]
                for check in checks:
                    rejection = check.host_passes(view, spec)
                    if rejection is not None:
                        raise ClaimConflict(placement["host"], rejection.message())
                view.consume(flavor)
                old = session.scalars(select(InstanceRow).where(InstanceRow.name == placement["name"])).first()
                if old is not None:
                    if old.state != ERROR:
                        raise ClaimConflict(placement["host"], f"instance {old.name} was launched meanwhile")
                    session.delete(old)
                    session.flush()
                instance = InstanceRow(
                    uuid=str(uuidlib.uuid4()), name=placement["name"], flavor_name=flavor.name,
                    vcpus=flavor.vcpus, memory_mb=flavor.memory_mb, root_gb=flavor.root_gb,
                    ephemeral_gb=flavor.ephemeral_gb, swap=flavor.swap, hypervisor_uuid=hv_uuid,
                    host=placement["host"], state=BUILDING, created_at=now, updated_at=now,
                )
                session.add(instance)
                session.flush()  # the claim's foreign key needs the instance row first
                session.add(ClaimRow(
                    instance_uuid=instance.uuid, hypervisor_uuid=hv_uuid, vcpus=flavor.vcpus,
                    memory_mb=flavor.memory_mb, disk_mb=flavor.requested_disk_mb, owner=owner,
                    lease_expires_at=now + dt.timedelta(seconds=lease_s), created_at=now,
                ))
                created.append(instance)
            session.flush()
            return [row.to_dict() for row in created]

    @_database_errors
    def mark_active(self, instance_uuid: str) -> None:
        """The domain runs: the instance is ACTIVE and its claim no longer needs a lease."""
        with self.session() as session, session.begin():
            instance = self._instance(session, instance_uuid)
            instance.state = ACTIVE
            instance.failure_reason = None
            instance.updated_at = utcnow()
            claim = session.get(ClaimRow, instance_uuid)
            if claim is not None:
                claim.lease_expires_at = None

    @_database_errors
    def mark_error(self, instance_uuid: str, reason: str) -> None:
        """The build failed: release the claim (nothing is left on the host) and keep the why."""
        with self.session() as session, session.begin():
            instance = self._instance(session, instance_uuid)
            instance.state = ERROR
            instance.failure_reason = reason
            instance.updated_at = utcnow()
            claim = session.get(ClaimRow, instance_uuid)
            if claim is not None:
                session.delete(claim)

    @_database_errors
    def delete_instance(self, instance_uuid: str) -> bool:
        """Forget an instance and release its claim; False if it was not there."""
        with self.session() as session, session.begin():
            instance = session.get(InstanceRow, instance_uuid)
            if instance is None:
                return False
            claim = session.get(ClaimRow, instance_uuid)
            if claim is not None:
                session.delete(claim)
            session.delete(instance)
            return True

    @staticmethod
    def _instance(session: Session, instance_uuid: str) -> InstanceRow:
        instance = session.get(InstanceRow, instance_uuid)
        if instance is None:
            raise LedgerError(f"instance {instance_uuid} is not in the ledger")
        return instance


def _engine(url: Any) -> Engine:
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    engine = create_engine(url, connect_args={"timeout": 30})

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
        # Take the write lock when the transaction starts, so a claim's re-check and its write
        # see the same state: two runs cannot both find the last slot free.
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _domain_instance(domain: Mapping[str, Any]) -> str | None:
    berth = domain.get("berth")
    return berth.get("instance_uuid") if berth else None


def _usage_fields(session: Session, row: HypervisorRow) -> dict[str, Any]:
    """Usage from the ledger: reserved + claims + unmanaged, in host-state field names."""
    vcpus, memory_mb, disk_mb, count = session.execute(
        select(
            func.coalesce(func.sum(ClaimRow.vcpus), 0),
            func.coalesce(func.sum(ClaimRow.memory_mb), 0),
            func.coalesce(func.sum(ClaimRow.disk_mb), 0),
            func.count(ClaimRow.instance_uuid),
        ).where(ClaimRow.hypervisor_uuid == row.uuid)
    ).one()
    return {
        "vcpus_used": vcpus + row.unmanaged_vcpus,
        "free_ram_mb": row.total_usable_ram_mb - row.reserved_host_memory_mb - memory_mb - row.unmanaged_memory_mb,
        "free_disk_mb": row.total_usable_disk_gb * 1024 - row.reserved_host_disk_mb - disk_mb - row.unmanaged_disk_mb,
        "num_instances": count + row.unmanaged_instances,
    }


def _host_view(session: Session, row: HypervisorRow) -> HostState:
    """The host as the ledger alone sees it, for a claim's re-check."""
    state = {
        "host": row.name, "nodename": row.nodename, "uuid": row.uuid, "service_up": True,
        "disabled": False, "vcpus_total": row.vcpus_total,
        "total_usable_ram_mb": row.total_usable_ram_mb, "total_usable_disk_gb": row.total_usable_disk_gb,
        "num_io_ops": 0, "cpu_allocation_ratio": row.cpu_allocation_ratio,
        "ram_allocation_ratio": row.ram_allocation_ratio, "disk_allocation_ratio": row.disk_allocation_ratio,
        "reserved_host_memory_mb": row.reserved_host_memory_mb, "reserved_host_disk_mb": row.reserved_host_disk_mb,
    }
    state.update(_usage_fields(session, row))
    return HostState.from_dict(state)
