"""Every read query of the world. Rows come back as plain dicts whose keys are the column names.

A query the database cannot run because of a value it was given (an integer beyond 64 bits, a NUL byte or a
lone surrogate in a key) is ``InvalidInput`` naming the values' columns (:meth:`Database.value_refused`);
only the store failing is ``StoreUnavailable``.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ColumnElement,
    Connection,
    Integer,
    String,
    Table,
    and_,
    bindparam,
    func,
    inspect,
    not_,
    or_,
    select,
    true,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DatabaseError

from engine.errors import InvalidInput, StoreUnavailable
from engine.policy.model import PlanFilter
from store.changes import StoredOperation
from store.database import Database, placeholder
from store.plan_sql import plan_binding, plan_clause, table_of
from store.schema import (
    STATE_TABLES,
    TABLES,
    agents,
    deliveries,
    events,
    memory,
    primary_key,
    room_members,
    snapshots,
    topology_versions,
    wakes,
)

Row = dict[str, Any]

SECTION_SQL_CAPACITY = 512  # compiled projection queries kept per reader (one per plan and query shape)


@dataclass(frozen=True)
class Near:
    """The rows of a projected section an agent is close to, as one OR of SQL conditions: ``agent`` (a task
    it owns or is assigned, a state entry it last wrote), ``ids`` (primary keys) and ``key_contains`` (state
    keys containing one of these: SQL ``LIKE``, so on SQLite a superset, case-insensitive, of Python's
    ``in``). Rows outside :class:`Near` are the ones whose scores differ only by recency."""

    agent: str | None = None
    ids: tuple[str, ...] = ()
    key_contains: tuple[str, ...] = ()

    def shape(self) -> tuple[bool, int, int]:
        return self.agent is not None, len(self.ids), len(self.key_contains)


# the columns an agent is "near" in each scored kind (mirrors the features of engine/world/projection.py)
_NEAR_AGENT_COLUMNS: dict[str, tuple[str, ...]] = {"task": ("owner_agent", "assignee"), "state": ("updated_by",)}
_TERMINAL_MEMORY = ("revoked", "rejected")  # memory no view shows (nor expired memory)


def _table(name: str) -> Table:
    return TABLES[name]


def _json(value: Any) -> Any:
    """A JSON column as read by the driver: text on SQLite, already decoded on PostgreSQL."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def _json_text(value: Any) -> Any:
    """A JSON column on SQLite: text, except that the column's numeric affinity stores a JSON number as one."""
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def _same(value: Any) -> Any:
    return value


def _boolean(value: Any) -> Any:
    return None if value is None else bool(value)


def _decoder(kind: Any, dialect: str) -> Any:
    """How a driver value of a column becomes what the query builder would have returned."""
    if isinstance(kind, JSON):  # text on SQLite; psycopg decodes json itself (a JSON string stays a str)
        return _json_text if dialect == "sqlite" else _same
    if isinstance(kind, Boolean) and dialect == "sqlite":
        return _boolean
    return _same


@dataclass(frozen=True)
class RowDecoder:
    """How a row of one table, its columns as the driver returns them in the schema's order, becomes what
    the query builder would have returned: the values named, then only the columns that need it decoded
    (JSON, SQLite booleans; most columns pass as they are)."""

    names: tuple[str, ...]
    converted: tuple[tuple[str, Callable[[Any], Any]], ...]

    @classmethod
    def of(cls, t: Table, dialect: str) -> RowDecoder:
        decoders = [(c.name, _decoder(c.type, dialect)) for c in t.columns]
        return cls(tuple(name for name, _ in decoders),
                   tuple((name, decode) for name, decode in decoders if decode is not _same))

    def __call__(self, values: Sequence[Any]) -> Row:
        row = dict(zip(self.names, values, strict=True))
        for name, decode in self.converted:
            row[name] = decode(row[name])
        return row


def decoded(table: str, dialect: str, values: Sequence[Any]) -> Row:
    """A row of ``table`` as the driver returned its columns (all of them, in the schema's order), decoded
    as the query builder would have (JSON, SQLite booleans)."""
    return _decoders(table, dialect)(values)


@lru_cache(maxsize=64)
def _decoders(table: str, dialect: str) -> RowDecoder:
    return RowDecoder.of(TABLES[table], dialect)


class Reader:
    """Read access to one database. Each method is one consistent read transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._gets: dict[tuple[str, tuple[str, ...]], tuple[str, RowDecoder]] = {}
        self._driver_sql: dict[str, tuple[str, dict[str, Any]]] = {}
        self._sections: OrderedDict[tuple[Any, ...], tuple[str, dict[str, Any], dict[str, Any], RowDecoder]] = \
            OrderedDict()
        self._sections_lock = threading.Lock()
        self._pending = threading.local()  # this thread's planned, uncommitted rows (see pending_rows)
        self._inside = threading.local()  # this thread's open write transaction, if reads run on it (within)

    @contextmanager
    def within(self, cursor: Any) -> Iterator[None]:
        """Within this block (in this thread), the reads on the driver cursor (:meth:`get`,
        :meth:`principal_inputs`, :meth:`current_policy_epoch`, :meth:`events`, the projection's sections) run on
        the connection of ``cursor``, an open write transaction, and see its uncommitted rows: what a decision
        taken inside a write transaction reads (the gateway's claim: :func:`store.gateway.claim_wake`). On a
        SQLite file the thread's reads and writes share one connection, so a read there could not begin a
        transaction of its own. The block does not nest."""
        if getattr(self._inside, "cursor", None) is not None:
            raise RuntimeError("reads already run inside a write transaction in this thread")  # programming error
        self._inside.cursor = cursor
        try:
            yield
        finally:
            self._inside.cursor = None

    @property
    def keys_in_code_point_order(self) -> bool:
        """Whether ``ORDER BY`` a text key orders as Python's ``sorted`` does (SQLite's binary collation:
        UTF-8 bytes, which is code point order); PostgreSQL's collation may not."""
        return self._db.dialect == "sqlite"

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Within this block (in this thread), every read on the driver cursor (:meth:`get`,
        :meth:`principal_inputs`, :meth:`current_policy_epoch`, :meth:`last_seq`,
        :meth:`topology_version`, :meth:`active_rooms_of`, :meth:`events`, the projection's sections) runs in ONE
        read transaction: one consistent view (a SQLite WAL snapshot; REPEATABLE READ on PostgreSQL) and one
        BEGIN for the lot. Inside :meth:`within` (an open write transaction) the reads already share one,
        so the block adds nothing; nor on an in-memory SQLite database (one connection that every read of
        the query builder shares too: each read stays a transaction of its own there). Nothing may write
        in this thread inside the block (on a SQLite file the thread's reads and writes share one
        connection). Inside the block the principal's inputs and the current epoch are read once each (per
        agent): the snapshot cannot change under the block."""
        if getattr(self._inside, "cursor", None) is not None or self._db.in_memory:
            yield
            return
        try:
            with self._db.read_cursor() as cur:
                if self._db.dialect == "postgresql":
                    cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                self._inside.cursor = cur
                self._inside.memo = {}  # what the block read already: the snapshot cannot change under it
                try:
                    yield
                finally:
                    self._inside.cursor = None
                    self._inside.memo = None
        except self._db.database_error as exc:
            raise StoreUnavailable(str(exc)) from exc

    @contextmanager
    def _cursor(self) -> Iterator[Any]:
        """A cursor for one read: inside this thread's open write transaction (:meth:`within`), else a read
        transaction of its own on the driver cursor."""
        inside = getattr(self._inside, "cursor", None)
        if inside is None:
            with self._db.read_cursor() as cur:
                yield cur
            return
        cur = inside.connection.cursor()
        try:
            yield cur
        finally:
            cur.close()

    @contextmanager
    def _driver_read(self, field: str) -> Iterator[Any]:
        """:meth:`_cursor`, with what a failed read is to its caller: ``InvalidInput`` on ``field`` for a value
        the database refused (a string it cannot hold, an integer out of range), else ``StoreUnavailable``."""
        try:
            with self._cursor() as cur:
                yield cur
        except (OverflowError, UnicodeEncodeError, self._db.database_error) as exc:
            if (refused := self._refused(exc, field)) is not None:
                raise refused from exc
            if not isinstance(exc, self._db.database_error):
                raise
            raise StoreUnavailable(str(exc)) from exc

    @contextmanager
    def pending_rows(self) -> Iterator[None]:
        """Within this block (in this thread), :meth:`get` by primary key answers rows that writes planned
        in the block insert or update (:meth:`add_pending`) as they will be once committed: the later writes
        of one planned batch are planned on the earlier ones. No other read sees them."""
        self._pending.rows = {}
        try:
            yield
        finally:
            self._pending.rows = None

    def add_pending(self, table: str, key: Mapping[str, Any], values: Mapping[str, Any], *,
                    insert: bool) -> None:
        """Record a planned insert (``values``: the whole row) or update (``values``: the columns it sets,
        ``version`` included) of the row ``key`` of ``table`` (no-op outside :meth:`pending_rows`). An
        update is merged onto the stored row only when the row is read again (no read otherwise)."""
        rows: dict[tuple[str, tuple[tuple[str, Any], ...]], tuple[bool, dict[str, Any]]] | None = getattr(
            self._pending, "rows", None)
        if rows is None:
            return
        at = (table, tuple(sorted(key.items())))
        if insert:
            rows[at] = (True, dict(values))
            return
        whole, known = rows.get(at, (False, {}))
        rows[at] = (whole, {**known, **values})

    def _refused(self, exc: BaseException, field: str) -> InvalidInput | None:
        reason = self._db.value_refused(exc)
        return InvalidInput(field, reason) if reason is not None else None

    @contextmanager
    def _conn(self, field: str = "query") -> Iterator[Connection]:
        try:
            with self._db.read() as conn:
                yield conn
        except (OverflowError, UnicodeEncodeError, DatabaseError) as exc:
            if (refused := self._refused(exc, field)) is not None:
                raise refused from exc
            if not isinstance(exc, DatabaseError):
                raise
            raise StoreUnavailable(str(exc.orig)) from exc

    def get(self, table: str, **key: Any) -> Row | None:
        """One row by equality on ``key`` (the hot read of every World call: driver cursor, cached SQL); in a
        :meth:`pending_rows` block, a row planned there is answered as it will be."""
        pending = getattr(self._pending, "rows", None)
        if pending and (at := (table, tuple(sorted(key.items())))) in pending:
            whole, values = pending[at]
            if not whole:  # an update planned on the stored row: read it (once) and merge
                self._pending.rows = None
                try:
                    stored = self.get(table, **key)
                finally:
                    self._pending.rows = pending
                if stored is None:
                    return None
                values = {**stored, **values}
                pending[at] = (True, values)
            return dict(values)
        sql, decode = self._get_sql(table, tuple(key))
        with self._driver_read(".".join(key) or table) as cur:
            cur.execute(sql, key)
            found = cur.fetchone()
        if found is None:
            return None
        return decode(found)

    def _get_sql(self, table: str, keys: tuple[str, ...]) -> tuple[str, RowDecoder]:
        cached = self._gets.get((table, keys))
        if cached is None:
            t = _table(table)
            unknown = [k for k in keys if k not in t.c]
            if unknown:
                raise KeyError(unknown[0])  # a programming error, as with the query builder
            names = [f'"{c.name}"' for c in t.columns]
            where = " AND ".join(f'"{k}" = {placeholder(self._db.dialect, k)}' for k in keys)
            sql = f'SELECT {", ".join(names)} FROM "{t.name}" WHERE {where}'
            cached = (sql, _decoders(t.name, self._db.dialect))
            self._gets[(table, keys)] = cached
        return cached

    def rows(self, table: str, where: Mapping[str, Any] | None = None, *, order_by: Sequence[str] = (),
             limit: int | None = None, descending: bool = False) -> list[Row]:
        """Rows matching equality filters (a list or tuple value means IN)."""
        t = _table(table)
        clauses = [t.c[k].in_(v) if isinstance(v, list | tuple) else t.c[k] == v
                   for k, v in (where or {}).items()]
        cols = [t.c[c] for c in (order_by or primary_key(t))]
        stmt = select(t).where(*clauses).order_by(*(c.desc() if descending else c for c in cols))
        if limit is not None:
            stmt = stmt.limit(limit)
        with self._conn(_fields(where, limit)) as conn:
            return [dict(r) for r in conn.execute(stmt).mappings()]

    def count(self, table: str) -> int:
        t = _table(table)
        with self._conn() as conn:
            return int(conn.execute(select(func.count()).select_from(t)).scalar_one())

    def counts_and_versions(self) -> dict[str, Any]:
        """Row count of every table the database has and the sum of versions of every versioned one (for
        "nothing changed" checks), in one query (a world at an older schema lacks later tables)."""
        with self._conn() as conn:
            present = frozenset(inspect(conn).get_table_names())
            row = conn.execute(_counts_and_versions(present)).mappings().one()
        return {str(k): int(v) for k, v in row.items()}

    def due_wakes(self, now_us: int, limit: int, target_agent: str | None = None, *,
                  target_agents: Sequence[str] | None = None) -> list[Row]:
        """Pending wakes due now, and claimed wakes whose lease expired: highest priority first. A wake
        whose target is offline waits (it is not due until the agent is back) and blocks nobody. Only
        ``target_agent``'s wakes, or only those of ``target_agents`` (an empty sequence: none), if given."""
        if target_agents is not None and not target_agents:
            return []
        due = or_(and_(wakes.c.status == "pending", wakes.c.not_before_us <= now_us),
                  and_(wakes.c.status == "claimed", wakes.c.lease_until_us < now_us))
        online = select(agents.c.agent_id).where(agents.c.status != "offline")
        stmt = select(wakes).where(due, wakes.c.target_agent.in_(online))
        if target_agent is not None:
            stmt = stmt.where(wakes.c.target_agent == target_agent)
        if target_agents is not None:
            stmt = stmt.where(wakes.c.target_agent.in_(list(target_agents)))
        stmt = stmt.order_by(wakes.c.priority.desc(), wakes.c.not_before_us, wakes.c.wake_id).limit(limit)
        with self._conn() as conn:
            return [dict(r) for r in conn.execute(stmt).mappings()]

    def next_wake_due_us(self) -> int | None:
        """The next time a wake falls due: the earliest pending not-before, or the earliest lease end of a
        claimed wake (+1 µs: a lease is held through its last microsecond). Two MIN queries."""
        with self._conn() as conn:
            pending = conn.execute(select(func.min(wakes.c.not_before_us)).where(
                wakes.c.status == "pending")).scalar_one()
            leased = conn.execute(select(func.min(wakes.c.lease_until_us)).where(
                wakes.c.status == "claimed")).scalar_one()
        times = [int(pending)] if pending is not None else []
        times += [int(leased) + 1] if leased is not None else []
        return min(times, default=None)

    def events(self, after_seq: int = 0, limit: int | None = None, *, newest: bool = False) -> list[Row]:
        """The events after ``after_seq`` in log order, at most ``limit`` (with ``newest``: the last
        ``limit`` of them, still oldest first), on the driver cursor (the controller's drain reads the log
        several times a run, most often to find nothing new)."""
        found = self._driver_rows("events_newest" if newest else "events_after",
                                  {"after_seq": after_seq, "limit": _NO_LIMIT if limit is None else limit},
                                  "after_seq, limit")
        decode = _decoders("events", self._db.dialect)
        rows = [decode(r) for r in found]
        return rows[::-1] if newest else rows

    def current_policy_epoch(self) -> Row | None:
        """The policy epoch writes are decided under now (the last activation's), if any: ``epoch``,
        ``activated_at_us``, ``activated_by``, ``source`` (and ``ordinal``). A world activated only before
        migration 6 answers from ``policy_epochs``."""
        memo: dict[Any, Any] | None = getattr(self._inside, "memo", None)
        if memo is not None:
            if "epoch" not in memo:
                memo["epoch"] = self._current_policy_epoch()
            found = memo["epoch"]
            return None if found is None else dict(found)
        return self._current_policy_epoch()

    def _current_policy_epoch(self) -> Row | None:
        try:
            with self._cursor() as cur:
                cur.execute(_CURRENT_ACTIVATION)
                found = cur.fetchone()
                if found is not None:
                    return dict(zip(_ACTIVATION_COLUMNS, found, strict=True))
                cur.execute(_CURRENT_EPOCH_BEFORE_6)
                found = cur.fetchone()
        except self._db.database_error as exc:
            raise StoreUnavailable(str(exc)) from exc
        return dict(zip(_EPOCH_COLUMNS, found, strict=True)) if found is not None else None

    def policy_activations(self, limit: int = 1000) -> list[Row]:
        """The last ``limit`` policy activations, oldest first."""
        rows = self.rows("policy_activations", order_by=("ordinal",), descending=True, limit=limit)
        return rows[::-1]

    def last_seq(self) -> int:
        """The last event's seq (0 in an empty log), on the driver cursor."""
        return int(self._driver_rows("last_seq", {})[0][0])

    def topology_version(self) -> int:
        """The current topology version (0: none), on the driver cursor."""
        return int(self._driver_rows("topology_version", {})[0][0])

    def active_rooms_of(self, agent_id: str) -> list[str]:
        """The rooms ``agent_id`` is an active member of, on the driver cursor."""
        return [str(r[0]) for r in self._driver_rows("active_rooms_of", {"agent_id": agent_id}, "agent_id")]

    def _driver_rows(self, name: str, values: Mapping[str, Any], field: str = "query") -> list[Any]:
        """Run one of :data:`_DRIVER_QUERIES` on the driver cursor: the query builder's own statement,
        compiled once per reader, so it answers exactly what the builder's query answered."""
        cached = self._driver_sql.get(name)
        if cached is None:
            dialect: Any = sqlite.dialect(paramstyle="named")
            if self._db.dialect == "postgresql":
                dialect = postgresql.psycopg.dialect()  # type: ignore[no-untyped-call]
            compiled = _DRIVER_QUERIES[name].compile(dialect=dialect)
            constants = {k: v for k, v in compiled.params.items() if k not in values}  # the statement's own
            cached = self._driver_sql[name] = (str(compiled), constants)
        sql, constants = cached
        with self._driver_read(field) as cur:
            cur.execute(sql, {**constants, **values})
            return list(cur.fetchall())

    def visible_memory(self, agent_id: str, room_ids: Sequence[str], now_us: int, limit: int) -> list[Row]:
        """Memory an agent may see by scope: its own private, its rooms' room memory, all shared.
        Revoked, rejected and expired memory is excluded."""
        visible = or_(and_(memory.c.scope == "private", memory.c.owner == agent_id),
                      and_(memory.c.scope == "room", memory.c.room_id.in_(list(room_ids))),
                      memory.c.scope == "shared")
        live = and_(memory.c.status.not_in(["revoked", "rejected"]),
                    or_(memory.c.expires_at_us.is_(None), memory.c.expires_at_us > now_us))
        stmt = select(memory).where(visible, live).order_by(memory.c.updated_at_us.desc(),
                                                             memory.c.memory_id).limit(limit)
        with self._conn() as conn:
            return [dict(r) for r in conn.execute(stmt).mappings()]

    def inbox(self, agent_ids: Sequence[str], role_ids: Sequence[str], platforms: Sequence[str],
              limit: int) -> list[Row]:
        """Unread or claimed-by-them deliveries addressed to these agents, their roles, platforms or ``any``."""
        ids = list(agent_ids)
        addressed = or_(
            and_(deliveries.c.recipient_kind.in_(["agent", "all"]), deliveries.c.recipient.in_(ids)),
            and_(deliveries.c.recipient_kind == "any", deliveries.c.status == "unread"),
            and_(deliveries.c.recipient_kind == "role", deliveries.c.recipient.in_(list(role_ids)),
                 deliveries.c.status == "unread"),
            and_(deliveries.c.recipient_kind == "platform", deliveries.c.recipient.in_(list(platforms)),
                 deliveries.c.status == "unread"),
            deliveries.c.claimed_by.in_(ids),
        )
        stmt = (select(deliveries).where(addressed, deliveries.c.status != "acked")
                .order_by(deliveries.c.updated_at_us, deliveries.c.delivery_id).limit(limit))
        with self._conn() as conn:
            return [dict(r) for r in conn.execute(stmt).mappings()]

    def rows_allowed(self, kind: str, plan: PlanFilter, where: Mapping[str, Any] | None = None, *,
                     order_by: Sequence[str] = (), limit: int | None = None, descending: bool = False) -> list[Row]:
        """Rows of ``kind`` that a policy plan allows, plus equality filters; one query.
        Raises :class:`~store.plan_sql.UntranslatablePlan` when the plan cannot be expressed in SQL."""
        t = table_of(kind)
        clauses = [t.c[k].in_(v) if isinstance(v, list | tuple) else t.c[k] == v for k, v in (where or {}).items()]
        cols = [t.c[c] for c in (order_by or primary_key(t))]
        stmt = (select(t).where(plan_clause(kind, plan), *clauses)
                .order_by(*(c.desc() if descending else c for c in cols)))
        if limit is not None:
            stmt = stmt.limit(limit)
        with self._conn(_fields(where, limit)) as conn:
            return [dict(r) for r in conn.execute(stmt).mappings()]

    def section_floor(self, kind: str, plan: PlanFilter, limit: int) -> int | None:
        """The ``updated_at_us`` of the ``limit``-th newest row of ``kind`` that ``plan`` allows (terminal
        rows included), or ``None`` when fewer rows exist: a projection's candidate window is the rows at
        least that new. One indexed query on the driver cursor (SQL compiled once per plan).
        Raises :class:`~store.plan_sql.UntranslatablePlan` when the plan cannot be expressed in SQL."""
        rows = self._section_query(kind, plan, ("floor",), lambda t: select(t.c.updated_at_us).where(
            plan_clause(kind, plan, bound=True)).order_by(t.c.updated_at_us.desc()).limit(1).offset(
            bindparam("offset", 0, Integer)), {"offset": max(0, limit - 1)}, raw=True)
        return int(rows[0][0]) if rows else None

    def section_rows(self, kind: str, plan: PlanFilter, where: Mapping[str, Any] | None = None, *,
                     since_us: int | None = None, near: Near | None = None, far: Near | None = None,
                     live_at_us: int | None = None, order_by: Sequence[str] = ("updated_at_us",),
                     descending: bool = True, limit: int, offset: int = 0) -> list[Row]:
        """The rows of ``kind`` a projection section reads, in one query on the driver cursor whose SQL is
        compiled once per (plan, shape of the filters) and reused: allowed by ``plan``; matching the
        equality filters ``where`` (a list or tuple means IN); at least as new as ``since_us``; inside
        ``near`` or outside ``far`` (:class:`Near`); for memory, with ``live_at_us``, neither revoked,
        rejected nor expired at that time. Ordered by ``order_by`` (descending if asked), then by primary key
        ascending; ``limit`` rows from ``offset``. Rows are the column dicts :meth:`rows` would return.
        Raises :class:`~store.plan_sql.UntranslatablePlan` when the plan cannot be expressed in SQL."""
        where = dict(where or {})
        values: dict[str, Any] = {"limit": limit, "offset": offset}
        eq_shape = tuple((k, len(v) if isinstance(v, list | tuple) else -1) for k, v in where.items())
        for n, v in enumerate(where.values()):
            values.update({f"w{n}_{i}": x for i, x in enumerate(v)} if isinstance(v, list | tuple) else {f"w{n}": v})
        for prefix, filt in (("n", near), ("f", far)):
            if filt is not None:
                values.update(_near_values(prefix, filt))
        if since_us is not None:
            values["since"] = since_us
        if live_at_us is not None:
            values["now"] = live_at_us
        shape = ("rows", eq_shape, since_us is not None, near and near.shape(), far and far.shape(),
                 live_at_us is not None, tuple(order_by), descending)

        def build(t: Table) -> Any:
            clauses: list[ColumnElement[bool]] = [plan_clause(kind, plan, bound=True)]
            for n, (k, size) in enumerate(eq_shape):
                clauses.append(t.c[k].in_([bindparam(f"w{n}_{i}", "", t.c[k].type) for i in range(size)])
                               if size >= 0 else t.c[k] == bindparam(f"w{n}", "", t.c[k].type))
            if since_us is not None:
                clauses.append(t.c.updated_at_us >= bindparam("since", 0, t.c.updated_at_us.type))
            if near is not None:
                clauses.append(_near_clause(kind, t, "n", near))
            if far is not None:
                clauses.append(not_(_near_clause(kind, t, "f", far)))
            if live_at_us is not None:
                clauses.append(and_(t.c.status.not_in(list(_TERMINAL_MEMORY)), or_(
                    t.c.expires_at_us.is_(None), t.c.expires_at_us > bindparam("now", 0, t.c.expires_at_us.type))))
            order = [t.c[c].desc() if descending else t.c[c] for c in order_by]
            order += [t.c[c] for c in primary_key(t) if c not in order_by]
            return select(t).where(*clauses).order_by(*order).limit(bindparam("limit", 1, Integer)).offset(
                bindparam("offset", 0, Integer))

        return self._section_query(kind, plan, shape, build, values)

    def _section_query(self, kind: str, plan: PlanFilter, shape: tuple[Any, ...], build: Any,
                       values: Mapping[str, Any], *, raw: bool = False) -> list[Any]:
        """Run a projection query: compiled once per (kind, form of the plan, shape), on the driver cursor;
        ``build`` makes the statement with the plan bound (``plan_clause(kind, plan, bound=True)``), so
        every plan of one form (:func:`~store.plan_sql.plan_binding`: several agents' plans that differ
        only by their values) shares the compiled SQL and binds its own values."""
        form, plan_values = plan_binding(kind, plan)
        values = {**values, **{f"pv{i}": v for i, v in enumerate(plan_values)}}
        key = (kind, form, shape)
        with self._sections_lock:
            cached = self._sections.get(key)
            if cached is not None:
                self._sections.move_to_end(key)
        if cached is None:
            t = table_of(kind)
            dialect: Any = sqlite.dialect(paramstyle="named")
            if self._db.dialect == "postgresql":
                dialect = postgresql.psycopg.dialect()  # type: ignore[no-untyped-call]
            compiled = build(t).compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
            processors: dict[str, Any] = dict(compiled._bind_processors)  # e.g. a JSON path as the dialect binds it
            constants = {k: processors.pop(k)(v) if k in processors and k not in values else v
                         for k, v in compiled.params.items()}
            cached = (str(compiled), constants, processors,
                      _decoders(t.name, self._db.dialect))
            with self._sections_lock:
                self._sections[key] = cached
                while len(self._sections) > SECTION_SQL_CAPACITY:
                    self._sections.popitem(last=False)
        sql, constants, processors, decode = cached
        params = {**constants, **{k: processors[k](v) if k in processors else v for k, v in values.items()}}
        with self._driver_read(", ".join(values) or kind) as cur:
            cur.execute(sql, params)
            found = cur.fetchall()
        if raw:
            return list(found)
        return [decode(row) for row in found]

    def operation(self, op_id: str) -> StoredOperation | None:
        """The ledger entry for ``op_id`` (``None``: never committed), on the driver cursor: inside
        :meth:`snapshot` or :meth:`within`, part of that transaction (a cycle's idempotency checks add none)."""
        ph = placeholder(self._db.dialect, "o")
        with self._driver_read("op_id") as cur:
            cur.execute(f"SELECT op_id, command, request_hash, result, event_id FROM events WHERE op_id = {ph}",
                        {"o": op_id})
            found = cur.fetchone()
        if found is None:
            return None
        result = _json_text(found[3]) if self._db.dialect == "sqlite" else found[3]  # psycopg decodes json
        return StoredOperation(op_id=found[0], command=found[1], request_hash=found[2], result=result,
                               event_id=found[4])

    def principal_inputs(self, agent_id: str) -> tuple[Row | None, list[Row], list[str]]:
        """What a policy principal is built from, in one read on the driver cursor: the agent row, its
        accepted handoffs (task id and authority scope) and the rooms it is an active member of."""
        memo: dict[Any, Any] | None = getattr(self._inside, "memo", None)
        if memo is None:
            return self._principal_inputs(agent_id)
        if (at := ("principal", agent_id)) not in memo:
            memo[at] = self._principal_inputs(agent_id)
        agent, handoffs, rooms = memo[at]  # copies: a caller may build on them
        return (None if agent is None else dict(agent)), [dict(h) for h in handoffs], list(rooms)

    def _principal_inputs(self, agent_id: str) -> tuple[Row | None, list[Row], list[str]]:
        ph = placeholder(self._db.dialect, "a")
        with self._driver_read("agent_id") as cur:
            cur.execute("SELECT agent_id, role_id, status, capability_profile, permission_profile "
                        f"FROM agents WHERE agent_id = {ph}", {"a": agent_id})
            agent = cur.fetchone()
            cur.execute(f"SELECT task_id, authority_scope FROM handoffs WHERE target_agent = {ph} "
                        "AND status = 'accepted' ORDER BY handoff_id", {"a": agent_id})
            handoffs = cur.fetchall()
            cur.execute(f"SELECT room_id FROM room_members WHERE agent_id = {ph} AND active = "
                        f"{'true' if self._db.dialect == 'postgresql' else '1'} ORDER BY room_id", {"a": agent_id})
            rooms = [str(r[0]) for r in cur.fetchall()]
        row = None if agent is None else {
            "agent_id": agent[0], "role_id": agent[1], "status": agent[2],
            "capability_profile": _json(agent[3]), "permission_profile": _json(agent[4])}
        return row, [{"task_id": h[0], "authority_scope": _json(h[1])} for h in handoffs], rooms

    def state_image(self) -> tuple[int, dict[str, list[Row]]]:
        """(last event seq, every state table's rows ordered by primary key), from one consistent read."""
        image: dict[str, list[Row]] = {}
        with self._conn() as conn:
            seq = int(conn.execute(select(func.coalesce(func.max(events.c.seq), 0))).scalar_one())
            for t in STATE_TABLES:
                stmt = select(t).order_by(*(t.c[c] for c in primary_key(t)))
                image[t.name] = [dict(r) for r in conn.execute(stmt).mappings()]
        return seq, image

    def latest_snapshot(self) -> Row | None:
        stmt = select(snapshots).order_by(snapshots.c.at_seq.desc(), snapshots.c.created_at_us.desc()).limit(1)
        with self._conn() as conn:
            row = conn.execute(stmt).mappings().first()
        return dict(row) if row is not None else None


def _near_values(prefix: str, near: Near) -> dict[str, Any]:
    values: dict[str, Any] = {f"{prefix}a": near.agent} if near.agent is not None else {}
    values.update({f"{prefix}i{i}": x for i, x in enumerate(near.ids)})
    values.update({f"{prefix}k{i}": "%" + x.replace("/", "//").replace("%", "/%").replace("_", "/_") + "%"
                   for i, x in enumerate(near.key_contains)})
    return values


def _near_clause(kind: str, t: Table, prefix: str, near: Near) -> ColumnElement[bool]:
    """``near`` as one SQL condition that is never NULL (a NULL column compares as the empty string)."""
    terms: list[ColumnElement[bool]] = []
    if near.agent is not None:
        terms += [func.coalesce(t.c[c], "") == bindparam(f"{prefix}a", "", String) for c in _NEAR_AGENT_COLUMNS[kind]]
    if near.ids:
        (pk,) = primary_key(t)
        terms.append(t.c[pk].in_([bindparam(f"{prefix}i{i}", "", String) for i in range(len(near.ids))]))
    if near.key_contains:
        terms += [t.c.key.like(bindparam(f"{prefix}k{i}", "", String), escape="/")
                  for i in range(len(near.key_contains))]
    return or_(*terms) if terms else not_(true())


@lru_cache(maxsize=16)
def _counts_and_versions(present: frozenset[str]) -> Any:
    columns = []
    for t in TABLES.values():
        if t.name not in present:
            continue
        columns.append(select(func.count()).select_from(t).scalar_subquery().label(t.name))
        if "version" in t.c and t.name != "schema_migrations":
            columns.append(select(func.coalesce(func.sum(t.c.version), 0)).scalar_subquery()
                           .label(f"{t.name}.version_sum"))
    return select(*columns)



# the reads that run on the driver cursor as the query builder wrote them (Reader._driver_rows)
_DRIVER_QUERIES: dict[str, Any] = {
    "last_seq": select(func.coalesce(func.max(events.c.seq), 0)),
    "topology_version": select(func.coalesce(func.max(topology_versions.c.version), 0)),
    "active_rooms_of": select(room_members.c.room_id).where(
        room_members.c.agent_id == bindparam("agent_id", type_=String), room_members.c.active.is_(True)),
    **{name: select(events).where(events.c.seq > bindparam("after_seq", type_=BigInteger))
       .order_by(order).limit(bindparam("limit", type_=BigInteger))
       for name, order in (("events_after", events.c.seq), ("events_newest", events.c.seq.desc()))},
}
_NO_LIMIT = 1 << 62  # a LIMIT every log meets first (an unbound LIMIT would need other SQL per dialect)

_ACTIVATION_COLUMNS = ("ordinal", "epoch", "activated_at_us", "activated_by", "source")
_EPOCH_COLUMNS = ("epoch", "activated_at_us", "activated_by", "source")
_CURRENT_ACTIVATION = (f"SELECT {', '.join(_ACTIVATION_COLUMNS)} FROM policy_activations "
                       "ORDER BY ordinal DESC LIMIT 1")
_CURRENT_EPOCH_BEFORE_6 = (f"SELECT {', '.join(_EPOCH_COLUMNS)} FROM policy_epochs "
                           "ORDER BY activated_at_us DESC, epoch DESC LIMIT 1")


def _fields(where: Mapping[str, Any] | None, limit: int | None) -> str:
    """The request values a query binds, for an error that refuses one of them."""
    return ", ".join([*(where or {}), *(["limit"] if limit is not None else [])]) or "query"


__all__ = ["SECTION_SQL_CAPACITY", "Near", "Reader", "Row", "decoded"]
