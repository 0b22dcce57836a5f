"""Counters for the run-loop benchmark: SQL statements and transactions at the store's engine and driver, PDP
round trips at the gRPC channel. Counted, never estimated, and from outside the code they count (no edit of
``engine/`` or ``store/``), so they hold whatever the cycle does:

- :class:`SqlCounter` (SQLite only) sees every statement the database runs, on both paths into it: the
  SQLAlchemy engine (``Database.read``/``write`` and anything built by SQLAlchemy: its ``before_cursor_execute``
  event) and the driver cursors the gateway and the hot reads use without SQLAlchemy (``Database.write_cursor``
  and ``read_cursor``, on connections from ``engine.raw_connection()``, which no engine event sees). The second
  path is counted at the driver: ``sqlite3.Connection.set_trace_callback`` on every connection the engine's
  pool opens (its ``connect`` event), which reports each statement the connection runs, whoever built it.
  So ``statements`` is everything the database ran, ``sqlalchemy_statements`` the share built by SQLAlchemy.
  A *transaction* is one ``BEGIN`` (any mode) or one statement run outside any transaction (SQLite's
  autocommit: a transaction of its own); ``write_transactions`` are those that ran an ``INSERT``, ``UPDATE``,
  ``DELETE`` or ``REPLACE`` (a read transaction ends in ``ROLLBACK`` on the driver path and ``COMMIT`` on the
  SQLAlchemy path, so commits alone do not count transactions). Statements a trigger runs are not counted.
  Counting is paused outside :meth:`SqlCounter.counting` (the trace callback is removed, so timed sections
  pay nothing for it: it costs ~3.5 us a statement).
- :class:`PdpCounter` is a gRPC client interceptor, put on the channel of a :class:`CountingPdp` (a
  :class:`~engine.policy.cerbos_adapter.CerbosPdp` whose channel goes through it). It counts every RPC, and
  *round trips* by what the client asked: one per client operation (``check``, or ``plans`` sending its
  requests at once), however the replies interleave, so a loaded machine counts the same as an idle one
  (counting by concurrency in flight was timing-dependent: under load the first of three concurrent plans
  could return before the third left, and a batch counted as two); an RPC sent outside any operation is a
  round trip of its own. It also sums the wall time during which at least one RPC is in flight.

Both are read as :class:`SqlCounts` / :class:`PdpCounts` snapshots; subtract two snapshots for a window.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, fields
from typing import Any

import grpc
from cerbos.svc.v1 import svc_pb2_grpc
from sqlalchemy import event

from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.model import Decision, PlanFilter, PrincipalRef, ResourceRef
from engine.policy.pdp_process import PdpAddress
from store.database import Database

_CONTROL = ("BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE", "PRAGMA")
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")
_LITERAL = re.compile(r"'(?:[^']|'')*'|\b\d+(?:\.\d+)?\b|X'[0-9A-Fa-f]*'")
_IN_LIST = re.compile(r"\((?:\s*\?\s*,)+\s*\?\s*\)")


def _verb(sql: str) -> str:
    head = sql.lstrip()[:12].split(None, 1)
    return head[0].upper() if head else ""


def normalized(sql: str) -> str:
    """``sql`` as the driver ran it (values inlined) with its literals as ``?`` and ``IN`` lists collapsed:
    one text per statement shape, to tell repeated statements apart."""
    return " ".join(_IN_LIST.sub("(?...)", _LITERAL.sub("?", sql)).split())


@dataclass
class SqlCounts:
    """What a database ran (all fields are counts; see the module docstring for the definitions)."""

    statements: int = 0
    sqlalchemy_statements: int = 0
    reads: int = 0
    writes: int = 0
    transactions: int = 0
    write_transactions: int = 0
    autocommit_statements: int = 0
    commits: int = 0
    rollbacks: int = 0

    def __sub__(self, other: SqlCounts) -> SqlCounts:
        return SqlCounts(**{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)})

    def per(self, n: int) -> dict[str, float]:
        """Every count divided by ``n`` (per cycle, per write)."""
        return {f.name: getattr(self, f.name) / n for f in fields(self)}


@dataclass
class _Connection:
    raw: Any
    wrote: bool = False  # the transaction open on this connection ran a write


class SqlCounter:
    """Counts what one SQLite :class:`~store.database.Database` runs (see the module docstring). Attach it
    before the database opens its first connection (right after ``Store(url)``, before ``store.init``): a
    connection opened earlier is not seen, so :meth:`attach` refuses a pool that already holds one."""

    def __init__(self, db: Database) -> None:
        if db.dialect != "sqlite":
            raise ValueError(f"SqlCounter counts at the sqlite3 driver; this database is {db.dialect}")
        pool: Any = db.engine.pool
        opened = getattr(pool, "checkedin", lambda: 0)() + getattr(pool, "checkedout", lambda: 0)()
        if opened:
            raise ValueError("attach the counter before the database opens its first connection")
        self.counts = SqlCounts()
        self.shapes: Counter[str] = Counter()
        self.keep_shapes = False
        self._on = False
        self._connections: list[_Connection] = []
        self._lock = threading.Lock()
        event.listen(db.engine, "connect", self._on_connect)
        event.listen(db.engine, "before_cursor_execute", self._on_sqlalchemy)

    def snapshot(self) -> SqlCounts:
        return SqlCounts(**{f.name: getattr(self.counts, f.name) for f in fields(self.counts)})

    @contextmanager
    def counting(self, *, shapes: bool = False) -> Iterator[None]:
        """Count while inside (with ``shapes``: also each statement's normalized text in :attr:`shapes`)."""
        self.keep_shapes = shapes
        self._switch(True)
        try:
            yield
        finally:
            self._switch(False)
            self.keep_shapes = False

    def _switch(self, on: bool) -> None:
        with self._lock:
            self._on = on
            for conn in self._connections:
                self._trace(conn, on)

    def _trace(self, conn: _Connection, on: bool) -> None:
        with suppress(sqlite3.ProgrammingError):  # closed since (dispose): nothing more to count on it
            conn.raw.set_trace_callback(self._tracer(conn) if on else None)

    def _tracer(self, conn: _Connection) -> Callable[[str], None]:
        def seen(sql: str) -> None:
            self._on_driver(conn, sql)
        return seen

    def _on_connect(self, dbapi_conn: Any, _record: Any) -> None:
        conn = _Connection(dbapi_conn)
        with self._lock:
            self._connections.append(conn)
            if self._on:
                self._trace(conn, True)

    def _on_driver(self, conn: _Connection, sql: str) -> None:
        if sql.startswith("--"):  # a statement run by a trigger: part of the statement that fired it
            return
        c = self.counts
        verb = _verb(sql)
        if verb == "BEGIN":
            c.transactions += 1
            conn.wrote = False
            return
        if verb in ("COMMIT", "END", "ROLLBACK"):
            if verb == "ROLLBACK":
                c.rollbacks += 1
            else:
                c.commits += 1
            if conn.wrote:
                c.write_transactions += 1
            conn.wrote = False
            return
        if verb in _CONTROL:
            return
        c.statements += 1
        write = verb in _WRITES or (verb == "WITH" and any(w in sql.upper() for w in _WRITES))
        if write:
            c.writes += 1
        else:
            c.reads += 1
        if not conn.raw.in_transaction:  # autocommit: a transaction of its own
            c.transactions += 1
            c.autocommit_statements += 1
            c.write_transactions += int(write)
        elif write:
            conn.wrote = True
        if self.keep_shapes:
            self.shapes[normalized(sql)] += 1

    def _on_sqlalchemy(self, _conn: Any, _cursor: Any, statement: str, _params: Any, _context: Any,
                       _executemany: bool) -> None:
        if self._on and _verb(statement) not in _CONTROL:
            self.counts.sqlalchemy_statements += 1


@dataclass
class PdpCounts:
    """What a PDP client sent: RPCs (by method), round trips, resources checked and the wall time in flight."""

    rpcs: int = 0
    round_trips: int = 0
    checked_resources: int = 0
    in_flight_s: float = 0.0
    by_method: dict[str, int] = field(default_factory=dict)

    def __sub__(self, other: PdpCounts) -> PdpCounts:
        methods = {m: n - other.by_method.get(m, 0) for m, n in self.by_method.items()}
        return PdpCounts(self.rpcs - other.rpcs, self.round_trips - other.round_trips,
                         self.checked_resources - other.checked_resources, self.in_flight_s - other.in_flight_s,
                         {m: n for m, n in methods.items() if n})


class PdpCounter(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """A gRPC client interceptor counting the RPCs that pass through it (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        self._since = 0.0
        self._scope = threading.local()  # depth of the client operation this thread is inside
        self.counts = PdpCounts()

    @contextmanager
    def operation(self) -> Iterator[None]:
        """One client operation (a check, a batch of plans sent together): ONE round trip, however many RPCs
        it sends and however their replies interleave. Counted by what the client asked, not by timing, so
        a loaded machine counts the same as an idle one."""
        depth = getattr(self._scope, "depth", 0)
        if depth == 0:
            with self._lock:
                self.counts.round_trips += 1
        self._scope.depth = depth + 1
        try:
            yield
        finally:
            self._scope.depth = depth

    def snapshot(self) -> PdpCounts:
        with self._lock:
            c = self.counts
            extra = time.perf_counter() - self._since if self._in_flight else 0.0
            return PdpCounts(c.rpcs, c.round_trips, c.checked_resources, c.in_flight_s + extra, dict(c.by_method))

    def intercept_unary_unary(self, continuation: Callable[[Any, Any], Any], client_call_details: Any,
                              request: Any) -> Any:
        method = str(client_call_details.method).rsplit("/", 1)[-1]
        with self._lock:
            c = self.counts
            c.rpcs += 1
            c.by_method[method] = c.by_method.get(method, 0) + 1
            c.checked_resources += len(getattr(request, "resources", ())) if method == "CheckResources" else 0
            if self._in_flight == 0:
                if not getattr(self._scope, "depth", 0):  # an RPC outside any operation is its own round trip
                    c.round_trips += 1
                self._since = time.perf_counter()
            self._in_flight += 1
        try:
            call = continuation(client_call_details, request)
        except BaseException:
            self._done(None)
            raise
        call.add_done_callback(self._done)
        return call

    def _done(self, _call: Any) -> None:
        with self._lock:
            self._in_flight -= 1
            if self._in_flight == 0:
                self.counts.in_flight_s += time.perf_counter() - self._since


class CountingPdp(CerbosPdp):
    """A :class:`CerbosPdp` whose channel goes through ``counter``: every RPC any of its methods sends (now
    or after the adapter changes) is counted. It rebuilds the adapter's stubs on the intercepted channel;
    ``tests/test_benchmarks_runloop.py`` checks that a check and a batch of plans are counted, so a change of
    the adapter's channel or stubs that escaped the counter would fail there, not go unnoticed."""

    def __init__(self, address: PdpAddress, counter: PdpCounter, *, timeout_s: float = 2.0) -> None:
        super().__init__(address, timeout_s=timeout_s)
        self.counter = counter
        self._channel = grpc.intercept_channel(self._channel, counter)
        self._svc = svc_pb2_grpc.CerbosServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self._admin = svc_pb2_grpc.CerbosAdminServiceStub(self._channel)  # type: ignore[no-untyped-call]

    def check(self, principal: PrincipalRef, resources: Sequence[tuple[ResourceRef, Sequence[str]]]
              ) -> list[Decision]:
        with self.counter.operation():
            return super().check(principal, resources)

    def plans(self, principal: PrincipalRef, asked: Sequence[tuple[str, str]]) -> list[PlanFilter]:
        with self.counter.operation():
            return super().plans(principal, asked)


__all__ = ["CountingPdp", "PdpCounter", "PdpCounts", "SqlCounter", "SqlCounts", "normalized"]
