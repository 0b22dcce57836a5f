"""Engines for the two backends, with the settings each needs.

SQLite: WAL (files), ``synchronous`` NORMAL by default (FULL on request), a busy timeout, foreign
keys on, and transactions begun by us: ``BEGIN IMMEDIATE`` for writes (so a read-modify-write never
upgrades a shared lock and deadlocks), plain ``BEGIN`` for reads. An in-memory database uses one shared
connection, serialised by a lock. PostgreSQL: psycopg 3, READ COMMITTED; the compare-and-set
``UPDATE ... WHERE version = :expected`` is what serialises writers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import StaticPool

from engine.errors import InvalidInput

Dialect = Literal["sqlite", "postgresql"]


def placeholder(dialect: str, name: str) -> str:
    """A named parameter in driver-level SQL: ``%(name)s`` for psycopg, ``:name`` for sqlite3."""
    return f"%({name})s" if dialect == "postgresql" else f":{name}"


@dataclass(frozen=True)
class DatabaseOptions:
    sqlite_synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    busy_timeout_ms: int = 30_000


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
            self.engine = create_engine(parsed.set(drivername="postgresql+psycopg"),
                                        pool_pre_ping=True, pool_size=5, max_overflow=10)
        else:
            raise InvalidInput("db_url", f"unsupported backend {backend!r}; use sqlite:/// or postgresql://")
        self._serial: threading.RLock | None = threading.RLock() if self.in_memory else None
        self._local = threading.local()
        self._writers: list[Any] = []
        self._writers_lock = threading.Lock()

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
        return self._serial if self._serial is not None else nullcontext()

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
        with self._writers_lock:
            writers, self._writers = self._writers, []
        for conn in writers:
            conn.close()
        self._local = threading.local()
        self.engine.dispose()


__all__ = ["Database", "DatabaseOptions", "Dialect"]
