"""Reaching the ledger's database: its URL, the engine, migrations, and errors that say what to do.

SQLite takes its write lock when a writing transaction starts (BEGIN IMMEDIATE), so that a
claim's re-check and its write see the same state; readers take a snapshot beside it (WAL).
PostgreSQL locks rows with SELECT ... FOR UPDATE instead.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import re
import socket
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from sqlalchemy import DateTime, create_engine, event
# SQLite's dialect is imported here, with the action plugins, in Ansible's main process (which
# forks each task's worker from it): an engine imports its dialect when it is made, which would
# otherwise be once in every task that opens the ledger. (A PostgreSQL one: see below.)
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError

from ansible_collections.berth.fleet.plugins.module_utils._requirements import import_library
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError, LedgerError

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# The newest migration's revision (tests/unit check that it is alembic's head). Every action
# opens the ledger; one that is at this revision is opened without importing alembic, which
# costs a fifth of a second of each ansible-playbook run.
SCHEMA_REVISION = "0019"
SQLITE_LOCK_TIMEOUT_S = 30
# A SQLite ledger Berth creates is its owner's alone: the file, and the directory it creates for it.
SQLITE_FILE_MODE = 0o600
SQLITE_DIRECTORY_MODE = 0o700
# The PostgreSQL advisory lock that makes concurrent first opens of a ledger migrate it one
# after the other (gather.yml's per-host tasks all open a new ledger at once); any constant
# will do, this one reads "berth".
_MIGRATION_LOCK = 0x6265727468


# A PostgreSQL ledger named in the environment (as an AWX credential or a CI job gives it) has
# its driver and SQLAlchemy's dialect loaded with this module: Ansible's main process imports the
# action plugins before it forks each task's worker, so the workers inherit them instead of each
# importing them again (about 0.15 s per task that opens the ledger). A ledger named only in the
# inventory is loaded in each worker, as any import there.
if os.environ.get("BERTH_LEDGER_URL", "").startswith("postgresql"):
    try:
        import psycopg  # noqa: F401 pylint: disable=unused-import
        import sqlalchemy.dialects.postgresql.psycopg  # noqa: F401 pylint: disable=unused-import
    except ImportError:  # the engine says so, with the URL, when the ledger is opened
        pass


def default_url() -> str:
    """BERTH_LEDGER_URL, else a SQLite file under $XDG_STATE_HOME (~/.local/state)/berth/."""
    if os.environ.get("BERTH_LEDGER_URL"):
        return os.environ["BERTH_LEDGER_URL"]
    state_home = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return "sqlite:///" + os.path.join(state_home, "berth", "ledger.sqlite3")


# Query parameters of a ledger URL whose values are secrets: libpq's password, sslpassword (the
# client key's passphrase) and oauth_client_secret, and any other whose name says it holds one.
_SECRET_PARAMETER = re.compile(r"password|secret|token", re.IGNORECASE)
# The password of a URL written inside another's value (user:password@ after a scheme).
_NESTED_PASSWORD = re.compile(r"(://[^/@:\s]*:)([^/@\s]*)@")
MASK = "***"


def url_secrets(url: str) -> list[str]:
    """Every secret a ledger URL holds (its password, its secret parameters' values), longest
    first, so that a message can have each replaced before it is shown."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return []
    found = [str(parsed.password)] if parsed.password else []
    for name, values in parsed.query.items():
        for value in (values,) if isinstance(values, str) else values:
            if _SECRET_PARAMETER.search(name) and value:
                found.append(value)
            found += [match.group(2) for match in _NESTED_PASSWORD.finditer(value) if match.group(2)]
    return sorted(set(found), key=len, reverse=True)


def safe_url(url: str) -> str:
    """The URL as it may be shown, in a message, a record, a cache key or a page: its password,
    its secret parameters and any password of a URL inside a parameter masked."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return "<unparsable ledger URL>"

    def masked(name: str, value: str) -> str:
        return MASK if _SECRET_PARAMETER.search(name) else _NESTED_PASSWORD.sub(rf"\g<1>{MASK}@", value)

    query = {name: masked(name, values) if isinstance(values, str) else tuple(masked(name, v) for v in values)
             for name, values in parsed.query.items()}
    # The mask reads as itself, not percent-encoded as SQLAlchemy writes query values.
    return parsed.set(query=query).render_as_string(hide_password=True).replace("%2A%2A%2A", MASK)


def mask_secrets(url: str, text: str) -> str:
    """``text`` (a database error, say) with every secret of ``url`` replaced."""
    for secret in url_secrets(url):
        text = text.replace(secret, MASK)
    return text


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def run_owner() -> str:
    """Who holds a BUILDING claim: this controller process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def explain_database_error(url: str, exc: BaseException) -> str:
    """What went wrong with the ledger and what to do, naming the URL without its password."""
    shown = safe_url(url)
    text = mask_secrets(url, " ".join(str(getattr(exc, "orig", None) or exc).split()))
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


def database_errors(method: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a database failure in a Ledger method into a LedgerError that says what to do."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except SQLAlchemyError as exc:
            raise LedgerError(explain_database_error(self.url, exc)) from exc

    return wrapper


def sqlite_file(url_text: str) -> Path | None:
    """The file of a SQLite ledger URL (None for PostgreSQL or an in-memory SQLite)."""
    try:
        url = make_url(url_text)
    except ArgumentError:
        return None  # open_engine says why
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database).expanduser()


def missing_ledger_error(url_text: str) -> LedgerError:
    """What a reader says of a SQLite ledger whose file does not exist (a typo in a path would
    otherwise start an empty ledger, and its directories, where nothing will ever look)."""
    return LedgerError(f"no ledger at {sqlite_file(url_text)} ({safe_url(url_text)}): the tracker sync "
                       f"(playbooks/gather.yml) creates it; check ledger_url (or BERTH_LEDGER_URL)")


def create_sqlite_file(url_text: str) -> bool:
    """Make the file (0600) and directory (0700) of a SQLite ledger for its first writer: the
    ledger holds every hypervisor's URI and every decision, which are the operator's own (SQLite
    gives its -wal and -shm files the file's mode). True if this call made it (of several
    tracker syncs that start at once, one did)."""
    path = sqlite_file(url_text)
    if path is None or path.exists():
        return False
    try:
        if not path.parent.is_dir():
            path.parent.mkdir(mode=SQLITE_DIRECTORY_MODE, parents=True, exist_ok=True)
        # O_EXCL: exactly one of the runs that found no file says it created the ledger.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, SQLITE_FILE_MODE))
    except FileExistsError:
        return False
    except OSError as exc:
        raise LedgerError(f"cannot create the ledger or its directory at {safe_url(url_text)}: "
                          f"{exc.strerror}: choose a writable path in ledger_url") from exc
    return True


def open_engine(url_text: str) -> Engine:
    """The engine of a checked ledger URL, migrated to the newest schema. A SQLite ledger must
    exist (create_sqlite_file makes it, for the writers that may start one)."""
    try:
        url = make_url(url_text)
    except ArgumentError as exc:
        raise InputError("ledger_url", f"ledger_url is not a database URL ({safe_url(url_text)}): {exc}") from exc
    backend = url.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise InputError("ledger_url", f"ledger_url must be a sqlite:/// or postgresql+psycopg:// URL, "
                                       f"got {safe_url(url_text)}")
    if backend == "postgresql":
        import_library("psycopg", "psycopg[binary]", f"the ledger at {safe_url(url_text)}")
    path = sqlite_file(url_text)
    if path is not None:
        if not path.exists():
            raise missing_ledger_error(url_text)
        _warn_if_readable(path)
    try:
        engine = _engine(url)
        _migrate(engine, url_text)
    except SQLAlchemyError as exc:
        raise LedgerError(explain_database_error(url_text, exc)) from exc
    return engine


@functools.lru_cache(maxsize=None)
def insert_skipping(dialect: str, table: Any, key: str) -> Any:
    """INSERT into ``table`` that skips rows whose ``key`` is taken (ON CONFLICT DO NOTHING,
    which SQLite and PostgreSQL both know), returning the keys it inserted. Made once per
    dialect and table: claims run it every time."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        insert = sqlite_dialect.insert
    return insert(table).on_conflict_do_nothing(index_elements=[key]).returning(table.c[key])


def driver_execute(connection: Any, statement: Any, params: Mapping[str, Any] | None = None,
                   cached: bool = True) -> Any:
    """Run a Core statement on the connection's own DBAPI cursor and return that cursor.

    SQLAlchemy's work per execution (its execution context, result objects, type processing of
    every value) costs more than the database's own work for the small statements of a claim,
    the ledger's hottest write, and more than the driver's for the scheduler's wide read. So
    these statements are compiled for the dialect here - once per dialect and set of parameter
    names when ``cached`` - and handed to the driver with their parameters (see _driver_value
    for the few that need converting). Rows come back as the driver gives them: tuples.
    """
    shape = tuple(sorted((key, len(value) if isinstance(value, (list, tuple)) else None)
                         for key, value in (params or {}).items()))
    sql, names, values = (_compiled_cached if cached else _compiled)(connection.dialect, statement, shape)
    values = dict(values)
    for key, value in (params or {}).items():
        if isinstance(value, (list, tuple)):
            values.update((f"{key}_{number}", item) for number, item in enumerate(value, 1))
        else:
            values[key] = value
    convert = _datetime_processor(connection.dialect)
    values = {key: _driver_value(value, convert) for key, value in values.items()}
    cursor = connection.connection.driver_connection.cursor()
    driver_params = tuple(values[name] for name in names) if names is not None else values
    try:
        cursor.execute(sql, driver_params)
    except connection.dialect.loaded_dbapi.Error as exc:
        # As SQLAlchemy's own execution would raise it (IntegrityError, OperationalError...).
        raise DBAPIError.instance(sql, driver_params, exc, connection.dialect.loaded_dbapi.Error,
                                  dialect=connection.dialect) from exc
    return cursor


def _driver_value(value: Any, convert_datetime: Callable[[Any], Any] | None) -> Any:
    """A parameter as the driver takes it: a mapping as JSON text (the statement casts it for a
    JSON column), a datetime as the dialect stores it; a list here is always an expanding
    parameter's items, never a JSON value."""
    if isinstance(value, dict):  # (not typing's Mapping: its isinstance is a slow ABC check, per value)
        return json.dumps(value, sort_keys=True)
    if convert_datetime is not None and isinstance(value, dt.datetime):
        return convert_datetime(value)
    return value


def _compiled(dialect: Any, statement: Any, shape: tuple[tuple[str, int | None], ...]) -> tuple[str, Any, dict]:
    """The statement's SQL for parameters of this shape (each name, with the length of a list
    given for an expanding parameter), the parameter names in order for a positional driver
    (None for a named one), and the values it binds itself."""
    # An INSERT names the columns it is given, as SQLAlchemy's own execution does; an expanding
    # parameter gets one placeholder per item, named name_1, name_2... (SQLAlchemy's names).
    compiled = statement.compile(dialect=dialect, column_keys=[key for key, _length in shape])
    expanded = compiled.construct_expanded_state(
        {key: None if length is None else [None] * length for key, length in shape})
    names = list(expanded.positiontup) if expanded.positiontup is not None else None
    return expanded.statement, names, dict(expanded.parameters)


_compiled_cached = functools.lru_cache(maxsize=256)(_compiled)


@functools.lru_cache(maxsize=None)
def _datetime_processor(dialect: Any) -> Callable[[Any], Any] | None:
    return DateTime().dialect_impl(dialect).bind_processor(dialect)


def _warn_if_readable(path: Path) -> None:
    """An existing ledger file is left as it is, with a warning when others may read it."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        from ansible.utils.display import Display  # the controller's warnings, each shown once a run

        Display().warning(f"the ledger file {path} is readable by other users (mode {mode:o}); it holds the "
                          f"fleet's URIs and decisions: chmod {SQLITE_FILE_MODE:o} {path}")


def reader(engine: Engine) -> Engine:
    """The same engine for reading only: on SQLite its transactions take no write lock; on
    PostgreSQL they are REPEATABLE READ, so that every statement of one read sees the same
    snapshot, as SQLite's reads do (the scheduler's read takes a fleet in several statements:
    host_states.read_table). A transaction that only reads never fails to serialise."""
    if engine.dialect.name == "sqlite":
        return engine.execution_options(berth_read_only=True)
    return engine.execution_options(berth_read_only=True, isolation_level="REPEATABLE READ")


def _engine(url: Any) -> Engine:
    if url.get_backend_name() != "sqlite":
        return create_engine(url)
    connect_args = {} if "timeout" in url.query else {"timeout": SQLITE_LOCK_TIMEOUT_S}
    engine = create_engine(url, connect_args=connect_args)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" below start transactions, not the driver's lazy BEGIN.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        _write_ahead_log(cursor)
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


def _write_ahead_log(cursor: Any) -> None:
    """Put the file in WAL mode (it stays so: only a new ledger's first connection changes it).
    Switching needs the file to itself and SQLite does not wait for that, so when several runs
    open a new ledger at once (gather.yml's per-host tasks) the losers try again."""
    deadline = time.monotonic() + SQLITE_LOCK_TIMEOUT_S
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _migrate(engine: Engine, url_text: str) -> None:
    # Every action opens the ledger; an up-to-date one is only read, so concurrent runs do
    # not queue for SQLite's write lock just to learn that nothing needs migrating.
    # One query, not SQLAlchemy's inspector: this runs in every task that opens the ledger.
    try:
        with reader(engine).connect() as connection, connection.begin():
            if connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == SCHEMA_REVISION:
                return
    except DBAPIError as exc:
        if "alembic_version" not in str(exc.orig):  # anything but a ledger without tables yet
            raise
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    scripts = ScriptDirectory.from_config(config)
    head = scripts.get_current_head()
    known = {rev.revision for rev in scripts.walk_revisions()}
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # Migrations copy tables on SQLite; with foreign keys on, dropping the old copy
            # would cascade into its children. The pragma only works outside a transaction.
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")
        try:
            with connection.begin():
                if not sqlite:
                    # SQLite's write lock serialises this already; PostgreSQL needs the lock
                    # taken before the revision is read, or two runs both create the tables.
                    connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")
                current = MigrationContext.configure(connection).get_current_revision()
                if current is not None and current not in known:
                    raise LedgerError(
                        f"the ledger at {safe_url(url_text)} has schema revision {current}, newer than "
                        f"this Berth knows (head {head}): upgrade the berth.fleet collection on this "
                        f"controller to the version that wrote it"
                    )
                if current != head:
                    config.attributes["connection"] = connection
                    command.upgrade(config, "head")
        finally:
            if sqlite:
                connection.connection.driver_connection.execute("PRAGMA foreign_keys=ON")
