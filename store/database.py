"""Engines for the two backends, with the settings each needs.

SQLite: WAL (files), ``synchronous`` NORMAL by default (FULL on request), a busy timeout, foreign
keys on, and transactions begun by us: ``BEGIN IMMEDIATE`` for writes (so a read-modify-write never
upgrades a shared lock and deadlocks), plain ``BEGIN`` for reads. An in-memory database uses one shared
connection, serialised by a lock. PostgreSQL: psycopg 3, READ COMMITTED; the compare-and-set
``UPDATE ... WHERE version = :expected`` is what serialises writers.

A value the database or its driver refuses (an integer beyond 64 bits, a NUL byte or invalid UTF-8 on
PostgreSQL, a lone surrogate) is a problem of the request, never of the store: :meth:`Database.value_refused`
tells such errors apart so that callers raise ``InvalidInput`` (retrying would never succeed) rather than
``StoreUnavailable``. After :meth:`Database.dispose` every transaction raises :class:`~engine.errors.Closed`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.pool import StaticPool

from engine.errors import Closed, InvalidInput, StoreUnavailable

Dialect = Literal["sqlite", "postgresql"]


def placeholder(dialect: str, name: str) -> str:
    """A named parameter in driver-level SQL: ``%(name)s`` for psycopg, ``:name`` for sqlite3."""
    return f"%({name})s" if dialect == "postgresql" else f":{name}"


@dataclass(frozen=True)
class DatabaseOptions:
    """``pg_idle_in_transaction_ms``: PostgreSQL ends a session of ours that sits this long inside a
    transaction without sending a statement (its ``idle_in_transaction_session_timeout``; 0: never). A
    process paused (SIGSTOP, a VM freeze) or cut off inside a fenced commit otherwise keeps the row locks its
    fence took (the controller lease ``FOR SHARE``, the wake ``FOR UPDATE``) for as long as the pause lasts,
    and a standby's takeover or a wake's reclaim waits as long. Our transactions wait between statements at
    most for one PDP call (the claim decides inside its transaction): keep it well above the PDP deadline."""

    sqlite_synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    busy_timeout_ms: int = 30_000
    pg_idle_in_transaction_ms: int = 10_000


def _session_options(url: URL, options: DatabaseOptions) -> str | None:
    """The libpq ``options`` of our pooled sessions: what ``url`` names (a ``search_path`` among them) and our
    session settings (``None``: none to add). Passed as a connection argument, which replaces the URL's."""
    if options.pg_idle_in_transaction_ms <= 0:
        return None
    given = url.query.get("options", "")
    given = given if isinstance(given, str) else " ".join(given)
    ours = f"-cidle_in_transaction_session_timeout={int(options.pg_idle_in_transaction_ms)}"
    return f"{given} {ours}".strip()


class Database:
    """An engine plus the transaction discipline of its dialect."""

    def __init__(self, url: str, options: DatabaseOptions | None = None) -> None:
        self.options = options or DatabaseOptions()
        try:
            parsed = make_url(url)
        except ArgumentError as exc:
            raise InvalidInput("db_url", f"not a database URL: {url!r}") from exc
        backend = parsed.get_backend_name()
        if backend == "sqlite":
            self.dialect: Dialect = "sqlite"
            self.in_memory = parsed.database in (None, "", ":memory:")
            self.engine = self._sqlite_engine(parsed.render_as_string(hide_password=False))
        elif backend in ("postgresql", "postgres"):
            self.dialect = "postgresql"
            self.in_memory = False
            pg_url = parsed.set(drivername="postgresql+psycopg")
            session = _session_options(pg_url, self.options)  # the URL itself unchanged (a LISTEN connection's too)
            self.engine = create_engine(pg_url, pool_pre_ping=True, pool_size=5, max_overflow=10,
                                        **({"connect_args": {"options": session}} if session else {}))
        else:
            raise InvalidInput("db_url", f"unsupported backend {backend!r}; use sqlite:/// or postgresql://")
        self._serial: threading.RLock | None = threading.RLock() if self.in_memory else None
        self._local = threading.local()
        self._writers: list[Any] = []
        self._writers_lock = threading.Lock()
        self._closed = False

    def _sqlite_engine(self, url: str) -> Engine:
        kwargs: dict[str, Any] = {}
        if self.in_memory:
            kwargs = {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
        engine = create_engine(url, **kwargs)
        opts = self.options
        in_memory = self.in_memory

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            if not in_memory:
                cur.execute("PRAGMA journal_mode=WAL")
                # checkpoint every ~40 MB of WAL rather than 4 MB: fewer fsyncs of the database file
                cur.execute("PRAGMA wal_autocheckpoint=10000")
            cur.execute(f"PRAGMA synchronous={opts.sqlite_synchronous}")
            cur.execute(f"PRAGMA busy_timeout={int(opts.busy_timeout_ms)}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            mode = conn.get_execution_options().get("pmw_begin", "DEFERRED")
            conn.exec_driver_sql(f"BEGIN {mode}")

        return engine

    def _guard(self) -> AbstractContextManager[Any]:
        if self._closed:
            raise Closed("store")
        return self._serial if self._serial is not None else nullcontext()

    @property
    def closed(self) -> bool:
        """Whether :meth:`dispose` was called (every transaction then raises ``Closed``)."""
        return self._closed

    def value_refused(self, exc: BaseException) -> str | None:
        """Why ``exc`` is the database or its driver refusing a *value* of the request (so: invalid input,
        never retried), or ``None`` when it is not: an integer the driver cannot bind (sqlite3's
        ``OverflowError``, beyond 64 bits), a string that is not UTF-8 (a lone surrogate), or any error of
        SQL class 22, "data exception" (PostgreSQL: bigint out of range, a NUL byte, invalid byte sequence,
        a negative LIMIT; psycopg's own ``DataError`` for NUL in text)."""
        if isinstance(exc, OverflowError):
            return f"an integer does not fit a 64-bit column ({exc})"
        if isinstance(exc, UnicodeEncodeError):
            return f"a string is not valid UTF-8 (a lone surrogate at position {exc.start})"
        orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
        dbapi = self.engine.dialect.loaded_dbapi
        sqlstate = str(getattr(orig, "sqlstate", None) or getattr(getattr(orig, "diag", None), "sqlstate", "")
                       or "")
        if isinstance(orig, dbapi.DataError) or sqlstate.startswith("22"):
            return f"the database refused a value: {_first_line(orig)}"
        text = str(orig)
        if "invalid byte sequence" in text or "NUL (0x00)" in text or "\\u0000" in text:
            return f"the database refused a value: {_first_line(orig)}"
        return None

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction: committed on normal exit, rolled back on any exception."""
        with self._guard(), self.engine.connect() as raw:
            conn = raw.execution_options(pmw_begin="IMMEDIATE") if self.dialect == "sqlite" else raw
            with conn.begin():
                yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read transaction with one consistent view (SQLite WAL snapshot / PostgreSQL REPEATABLE READ)."""
        with self._guard(), self.engine.connect() as raw:
            conn = raw.execution_options(isolation_level="REPEATABLE READ") if self.dialect == "postgresql" else raw
            with conn.begin():
                yield conn

    def _sqlite_writer(self) -> Any:
        """This thread's own SQLite write connection (detached from the pool, pragmas applied)."""
        if self._closed:
            raise Closed("store")
        conn = getattr(self._local, "writer", None)
        if conn is None:
            conn = self.engine.raw_connection()
            conn.detach()
            self._local.writer = conn
            with self._writers_lock:
                self._writers.append(conn)
        return conn

    @contextmanager
    def _driver_connection(self) -> Iterator[Any]:
        """The driver connection for a hot-path transaction: on a SQLite file this thread's own, else one
        from the pool (returned afterwards)."""
        with self._guard():
            file_sqlite = self.dialect == "sqlite" and not self.in_memory
            raw = self._sqlite_writer() if file_sqlite else self.engine.raw_connection()
            try:
                yield raw
            finally:
                if not file_sqlite:
                    raw.close()

    @contextmanager
    def write_cursor(self) -> Iterator[Any]:
        """A write transaction on the driver's own cursor (the gateway's hot path: no statement
        compilation, and on a SQLite file no pool round trip). Committed on normal exit, rolled back on
        any exception."""
        with self._driver_connection() as raw:
            if self.dialect == "sqlite" and raw.in_transaction:  # this thread's read block holds the connection
                raise RuntimeError("a write inside this thread's open read transaction (World.reading(), "
                                   "Reader.snapshot(); e.g. an adapter that writes while it decides): "
                                   "nothing may write there")  # a programming error; nothing written
            cur = raw.cursor()
            if self.dialect == "sqlite":
                cur.execute("BEGIN IMMEDIATE")
            try:
                yield cur
            except BaseException:
                raw.rollback()
                raise
            raw.commit()

    @contextmanager
    def read_cursor(self) -> Iterator[Any]:
        """A read transaction on the driver's own cursor, for hot reads (one consistent view)."""
        with self._driver_connection() as raw:
            cur = raw.cursor()
            if self.dialect == "sqlite":
                cur.execute("BEGIN")
            try:
                yield cur
            finally:
                raw.rollback()  # ends the read transaction on both drivers

    @property
    def integrity_error(self) -> type[Exception]:
        error: type[Exception] = self.engine.dialect.loaded_dbapi.IntegrityError
        return error

    @property
    def database_error(self) -> type[Exception]:
        error: type[Exception] = self.engine.dialect.loaded_dbapi.DatabaseError
        return error

    def dispose(self) -> None:
        """Close every connection; from now on each transaction raises :class:`~engine.errors.Closed`
        (the engine would otherwise quietly open new connections, and an in-memory database would come
        back empty)."""
        self._closed = True
        with self._writers_lock:
            writers, self._writers = self._writers, []
        for conn in writers:
            conn.close()
        self._local = threading.local()
        self.engine.dispose()


_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def world_in_schema(url: str, schema: str) -> str:
    """A PostgreSQL world in schema ``schema`` of the database at ``url`` (created if missing): the URL to
    open it with (``options=-csearch_path=<schema>``), so several worlds can share one database, each with
    its own tables, log and log lock. ``InvalidInput`` for a bad name or a URL that is not PostgreSQL's;
    ``StoreUnavailable`` when the database cannot be reached."""
    if not _SCHEMA.match(schema):
        raise InvalidInput("schema", f"{schema!r}: lower-case letters, digits and _, at most 63")
    parsed = make_url(url)
    if parsed.get_backend_name() not in ("postgresql", "postgres"):
        raise InvalidInput("db_url", "a world in a schema needs a postgresql:// URL")
    engine = create_engine(parsed.set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA IF NOT EXISTS {schema}")  # the name is checked above
    except DBAPIError as exc:
        raise StoreUnavailable(f"cannot create schema {schema!r}: {_first_line(exc)}") from exc
    finally:
        engine.dispose()
    return parsed.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


__all__ = ["Database", "DatabaseOptions", "Dialect", "world_in_schema"]
