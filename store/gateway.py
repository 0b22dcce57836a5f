"""The one write gateway: the only code in PMW that changes a row.

:func:`commit` applies a :class:`~store.changes.WriteRequest` in one database transaction:

1. append the event (on PostgreSQL: after the changes, see ``_Tx.apply``), which is also the operation's
   ledger entry (``UNIQUE(op_id)``): actor, causation,
   correlation, base and resulting versions, policy epoch, topology version, the request hash, the
   result, and the post-image of every row the request writes (so the log folds to the state). A
   duplicate op id fails this first statement: the same request hash then returns the stored result and
   writes nothing, a different one is :class:`~engine.errors.OperationConflict`;
2. apply each change; an :class:`~store.changes.Update` is one compare-and-set statement
   (``UPDATE ... WHERE key AND version = :expected``); when no row changed, a second read tells
   :class:`~engine.errors.NotFound` from :class:`~engine.errors.VersionConflict` (with the current version);
3. insert the provenance edges.

Before any of this, the policy decision is checked: a request decided under a policy epoch commits only while
that epoch is current (:class:`~engine.errors.PolicyEpochChanged`), and a request that carries no decision is
refused (:class:`~engine.errors.UndecidedWrite`) in any world a policy epoch governs, unless it comes through
the runtime's own door (``undecided_ok``: bootstrap, epoch activation, recorded decisions, controller steps,
revocations, denial records).

Success is returned only after commit; any error rolls the whole transaction back.

:func:`claim_wake` is the one write whose row change is not planned ahead: one conditional statement leases
the next due wake (``UPDATE wakes ... WHERE wake_id = (SELECT ... LIMIT 1 [FOR UPDATE SKIP LOCKED]) RETURNING``),
the engine decides the claim on the returned row inside the same transaction, and the event is appended as
above (a denial rolls the lease back).

Fences (:mod:`store.fences`, issue 13): a thread that writes under a lease (the controller leader, a worker
holding a wake's claim) has every :func:`commit` and :func:`commit_many` check that lease first, in the same
transaction; a lost lease is ``NotLeader`` / ``WakeLeaseLost`` and nothing is written. The controller's lease
itself is taken, renewed and released by one conditional statement each (:func:`take_lease`,
:func:`renew_lease`, :func:`release_lease`); it is coordination, not world state, and appends no event.

On PostgreSQL the log lock (:data:`LOG_LOCK_SQL`) is keyed by the world (advisory locks are per database, and
its second key is the world's schema): two worlds' writers never wait on each other.

The statements run on the driver's cursor with SQL text built once per (dialect, table, columns): a
commit costs two or three round trips to SQLite/PostgreSQL and no SQL compilation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson
from sqlalchemy import JSON, Boolean
from sqlalchemy.exc import DatabaseError

from engine.errors import (
    AlreadyExists,
    InvalidInput,
    NotFound,
    OperationConflict,
    PMWError,
    PolicyEpochChanged,
    StoreUnavailable,
    UndecidedWrite,
    VersionConflict,
)
from store.changes import CommitOutcome, Insert, Provenance, StoredOperation, Update, WriteRequest
from store.database import Database, placeholder
from store.fences import check_fences
from store.leases import LEASE_COLUMNS, Lease
from store.reads import Reader, decoded
from store.schema import CREDENTIAL_COLUMNS, TABLES, primary_key, wakes

CommitHook = Callable[[WriteRequest], None]


_LOG_LOCK = 0x504D5702  # the advisory lock class that orders log appends on PostgreSQL
#: The log lock of THIS world: advisory locks are per database already, and the second key is the world's
#: schema, so two worlds (two databases, or two schemas of one database) never wait on each other's appends.
LOG_LOCK_SQL = f"SELECT pg_advisory_xact_lock({_LOG_LOCK}, hashtext(current_schema()))"
EVENTS_CHANNEL = "pmw_events"  # NOTIFY channel: a commit happened (workers and controllers wake on it)
_NOTIFY = f"NOTIFY {EVENTS_CHANNEL}"


class _DuplicateOperationError(Exception):
    """Internal: the operation id is already in the ledger (resolved after rollback)."""


# -- statement text, built once ----------------------------------------------------------------------

def _table_name(name: str) -> str:
    if name not in TABLES:  # a programming error in the caller, never user input
        raise ValueError(f"unknown table {name!r}")
    return name


@lru_cache(maxsize=1024)
def _insert_sql(dialect: str, table: str, columns: tuple[str, ...]) -> str:
    known = TABLES[_table_name(table)].c
    if unknown := [c for c in columns if c not in known]:
        raise ValueError(f"{table} has no columns {unknown}")
    return (f"INSERT INTO {table} ({', '.join(columns)}) "  # names come from the schema, never input
            f"VALUES ({', '.join(placeholder(dialect, c) for c in columns)})")


def _key_where(dialect: str, table: str) -> str:
    return " AND ".join(f"{k} = {placeholder(dialect, 'k_' + k)}" for k in primary_key(TABLES[table]))


@lru_cache(maxsize=1024)
def _cas_sql(dialect: str, table: str, columns: tuple[str, ...]) -> str:
    known = TABLES[_table_name(table)].c
    if unknown := [c for c in columns if c not in known or c == "version"]:
        raise ValueError(f"{table}: cannot set columns {unknown}")
    sets = ", ".join(f"{c} = {placeholder(dialect, c)}" for c in columns)
    return (f"UPDATE {table} SET {sets}{', ' if sets else ''}version = {placeholder(dialect, 'v_new')} "
            f"WHERE {_key_where(dialect, table)} AND version = {placeholder(dialect, 'v_expected')}")


@lru_cache(maxsize=256)
def _version_sql(dialect: str, table: str) -> str:
    return f"SELECT version FROM {table} WHERE {_key_where(dialect, table)}"


@lru_cache(maxsize=64)
def _adapters(dialect: str, table: str) -> tuple[tuple[str, str], ...]:
    out = []
    for col in TABLES[table].columns:
        if isinstance(col.type, JSON):
            out.append((col.name, "json"))
        elif isinstance(col.type, Boolean) and dialect == "sqlite":
            out.append((col.name, "bool"))
    return tuple(out)


def _dumps(value: Any) -> str:
    """JSON text for a JSON column (orjson: the gateway's hottest serialisation)."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _adapt(dialect: str, table: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Values as the schema's column types would bind them: JSON as text, SQLite booleans as 0/1."""
    out = dict(values)
    for name, kind in _adapters(dialect, table):
        if name in out and out[name] is not None:
            out[name] = _dumps(out[name]) if kind == "json" else int(bool(out[name]))
    return out


def _keys(key: Mapping[str, Any]) -> dict[str, Any]:
    return {f"k_{k}": v for k, v in key.items()}


# -- applying a request ------------------------------------------------------------------------------

class _Tx:
    """One write transaction on a driver cursor."""

    def __init__(self, db: Database, cursor: Any) -> None:
        self.db = db
        self.dialect = db.dialect
        self.cur = cursor
        self._current_epoch: tuple[str | None] | None = None  # SQLite: read once (no other writer runs)

    def _is_fk_violation(self, exc: Exception) -> bool:
        return getattr(exc, "sqlstate", None) == "23503" or "FOREIGN KEY" in str(exc).upper()

    def insert(self, change: Insert) -> None:
        cols = tuple(change.row)
        try:
            self.cur.execute(_insert_sql(self.dialect, change.table, cols),
                             _adapt(self.dialect, change.table, change.row))
        except self.db.integrity_error as exc:
            if self._is_fk_violation(exc):
                raise InvalidInput(change.kind, f"{change.ident!r} refers to a missing object") from exc
            raise AlreadyExists(change.kind, change.ident) from exc

    def update(self, change: Update) -> None:
        cols = tuple(change.values)
        params = _adapt(self.dialect, change.table, change.values)
        params.update(_keys(change.key), v_new=change.expected_version + 1, v_expected=change.expected_version)
        try:
            self.cur.execute(_cas_sql(self.dialect, change.table, cols), params)
        except self.db.integrity_error as exc:
            if self._is_fk_violation(exc):
                raise InvalidInput(change.kind, f"{change.ident!r} refers to a missing object") from exc
            raise AlreadyExists(change.kind, change.ident) from exc
        if self.cur.rowcount != 1:
            self.cur.execute(_version_sql(self.dialect, change.table), _keys(change.key))
            row = self.cur.fetchone()
            if row is None:
                raise NotFound(change.kind, change.ident)
            raise VersionConflict(change.kind, change.ident, change.expected_version, int(row[0]))

    def append_event(self, request: WriteRequest, changes: list[Insert | Update]) -> None:
        """The event row is also the operation's ledger entry: a duplicate op id fails here, first."""
        event = {
            "event_id": request.event_id, "event_type": request.event_type, "actor_id": request.actor_id,
            "op_id": request.op_id, "command": request.command, "request_hash": request.request_hash,
            "result": request.result, "subject_kind": request.subject_kind, "subject_id": request.subject_id,
            "payload": request.payload, "changes": [_post_image(c) for c in changes],
            "parent_event_id": request.parent_event_id, "causation_id": request.causation_id,
            "correlation_id": request.correlation_id, "base_version": request.base_version,
            "resulting_version": request.resulting_version, "policy_epoch": request.policy_epoch,
            "topology_version": request.topology_version, "created_at_us": request.created_at_us}
        try:
            self.cur.execute(_insert_sql(self.dialect, "events", tuple(event)),
                             _adapt(self.dialect, "events", event))
        except self.db.integrity_error as exc:
            raise _DuplicateOperationError from exc  # event ids are fresh; only op_id can collide

    def check_epoch(self, request: WriteRequest, *, undecided_ok: bool) -> None:
        """A decided write commits only while the epoch it was decided under is still the current one; a write
        with no decision commits only through the runtime's door (``undecided_ok``) or, with no PDP, in a world
        that no policy epoch has ever governed (the store's own tests, single-user embedded use). On SQLite the
        epoch is read once per transaction (it holds the one write lock: nothing can activate meanwhile); on
        PostgreSQL every check reads it."""
        if self._current_epoch is not None:
            current = self._current_epoch[0]
        else:
            self.cur.execute("SELECT epoch FROM policy_activations ORDER BY ordinal DESC LIMIT 1")
            row = self.cur.fetchone()
            if row is None:  # a world activated only before migration 6
                self.cur.execute("SELECT epoch FROM policy_epochs ORDER BY activated_at_us DESC, epoch DESC LIMIT 1")
                row = self.cur.fetchone()
            current = row[0] if row is not None else None
            if self.dialect == "sqlite":
                self._current_epoch = (current,)
        if request.policy_epoch is None:
            if undecided_ok or current is None:
                return
            raise UndecidedWrite(request.command, current)
        if current != request.policy_epoch:
            raise PolicyEpochChanged(request.policy_epoch, current)

    def apply(self, request: WriteRequest, *, undecided_ok: bool) -> None:
        check_fences(self.db, self.cur)  # a lease this thread writes under must still hold (store.fences)
        self.check_epoch(request, undecided_ok=undecided_ok)
        changes: list[Insert | Update] = [*request.changes,
                                          *(_provenance_row(request, e) for e in request.provenance)]
        if self.dialect == "sqlite":  # one writer at a time: log order is commit order already
            self.append_event(request, changes)
            self._apply_changes(changes)
            return
        # PostgreSQL: a sequence value is taken at INSERT, not at COMMIT, so two writers could commit their
        # events out of log order and a reader (a snapshot, a log follower) could skip one. The event is
        # therefore appended last, under one transaction-scoped advisory lock held until commit: log
        # positions are handed out in commit order, and only that short tail is serialised.
        self.cur.execute("SELECT 1 FROM events WHERE op_id = %(op)s", {"op": request.op_id})
        if self.cur.fetchone() is not None:
            raise _DuplicateOperationError
        self._apply_changes(changes)
        self.cur.execute(LOG_LOCK_SQL)
        self.append_event(request, changes)
        self.cur.execute(_NOTIFY)  # delivered to listeners on commit only (store.notify)

    def _apply_changes(self, changes: list[Insert | Update]) -> None:
        for change in changes:
            if change.table in ("policy_activations", "policy_epochs"):
                self._current_epoch = None  # this transaction moves the epoch: the next check reads it again
            if isinstance(change, Insert):
                self.insert(change)
            else:
                self.update(change)


def _post_image(change: Insert | Update) -> dict[str, Any]:
    """What the event records of a change: enough to fold the log back into the state tables. A credential
    column (``CREDENTIAL_COLUMNS``: a token's secret hash) is never recorded in the log."""
    hidden = CREDENTIAL_COLUMNS.get(change.table, ())
    if isinstance(change, Insert):
        return {"table": change.table, "op": "insert",
                "key": {c: change.row[c] for c in primary_key(TABLES[change.table])},
                "values": {k: v for k, v in change.row.items() if k not in hidden}}
    return {"table": change.table, "op": "update", "key": dict(change.key),
            "values": {**{k: v for k, v in change.values.items() if k not in hidden},
                       "version": change.expected_version + 1}}


def _provenance_row(request: WriteRequest, edge: Provenance) -> Insert:
    row = {"edge_id": edge.edge_id, "src_kind": edge.src_kind, "src_id": edge.src_id,
           "dst_kind": edge.dst_kind, "dst_id": edge.dst_id, "relation": edge.relation,
           "event_id": request.event_id, "created_at_us": request.created_at_us}
    return Insert("provenance_edges", row, "provenance_edge", edge.edge_id)


def lookup_operation(db: Database, op_id: str) -> StoredOperation | None:
    """The ledger entry for ``op_id``, if that operation was ever committed (:meth:`store.reads.Reader.operation`,
    in a read transaction of its own)."""
    return Reader(db).operation(op_id)


def _replay(db: Database, request: WriteRequest) -> CommitOutcome:
    stored = lookup_operation(db, request.op_id)
    if stored is None:  # the conflicting insert rolled back too: a lost race we cannot resolve here
        raise StoreUnavailable(f"operation {request.op_id!r} vanished while resolving a duplicate")
    if stored.request_hash != request.request_hash or stored.command != request.command:
        raise OperationConflict(request.op_id, request.command)
    return CommitOutcome(result=stored.result, event_id=stored.event_id, replayed=True)



def _write_failure(db: Database, exc: Exception, command: str) -> PMWError:
    """What a failed write of ``command`` is to its caller: a value no column can hold, or a driver error
    caused by the request's data, is ``InvalidInput`` (never retried); any other database error is
    ``StoreUnavailable``. Nothing was written either way."""
    refused = db.value_refused(exc)
    if isinstance(exc, OverflowError | UnicodeEncodeError | orjson.JSONEncodeError):
        return InvalidInput("request", f"{command}: {refused or f'a value cannot be stored as JSON ({exc})'}")
    if refused is not None:  # the request's data, not the store
        return InvalidInput("request", f"{command}: {refused}")
    return StoreUnavailable(f"{type(exc).__name__}: {exc}")

def commit(db: Database, request: WriteRequest, hooks: tuple[CommitHook, ...] = (), *,
           undecided_ok: bool = False) -> CommitOutcome:
    """Apply ``request`` atomically; see the module docstring for the contract. ``undecided_ok``: the
    request may carry no policy decision (only the runtime's own door, :class:`store.RuntimeDoor`, says so).

    Raises ``OperationConflict``, ``VersionConflict``, ``NotFound``, ``AlreadyExists``, ``InvalidInput``
    (a reference to a missing object) or ``StoreUnavailable``; in every case nothing was written.
    """
    try:
        with db.write_cursor() as cur:
            _Tx(db, cur).apply(request, undecided_ok=undecided_ok)
    except _DuplicateOperationError:
        return _replay(db, request)
    except (VersionConflict, NotFound, AlreadyExists):
        # A twin of this operation may have committed first (its change beat ours to the row): answer
        # with its result rather than the conflict it caused.
        stored = lookup_operation(db, request.op_id)
        if stored is not None:
            return _replay(db, request)
        raise
    except PMWError:
        raise
    except (OverflowError, UnicodeEncodeError, orjson.JSONEncodeError,  # a value no column can hold
            db.database_error, DatabaseError) as exc:  # driver errors, and SQLAlchemy's wrapping on connect
        raise _write_failure(db, exc, request.command) from exc
    for hook in hooks:
        hook(request)
    return CommitOutcome(result=request.result, event_id=request.event_id, replayed=False)


# -- the runtime's secrets ------------------------------------------------------------------------------

def runtime_secret(cur: Any, dialect: str, name: str) -> str:
    """The runtime secret ``name`` of this world (``runtime_secrets``, drawn once by the migration that
    created the table: :data:`store.migrations.RUNTIME_SECRETS`), read on the driver cursor ``cur``. Only
    the runtime calls this (the read-set key: ``engine.world.read_set``); no World read or transport
    reaches the table. ``StoreUnavailable`` if the world has no such secret (not migrated)."""
    cur.execute(f"SELECT secret FROM runtime_secrets WHERE name = {placeholder(dialect, 'n')}", {"n": name})
    row = cur.fetchone()
    if row is None:
        raise StoreUnavailable(f"this world has no runtime secret {name!r} (run pmw init)")
    return str(row[0])


# -- the claim: one conditional statement ---------------------------------------------------------------

@dataclass(frozen=True)
class WakeClaim:
    """What a claim asks of the gateway: lease the most urgent due wake to ``owner`` until ``lease_until_us``,
    at ``now_us``, among the wakes of ``targets`` (``None``: any agent's; never empty)."""

    owner: str
    now_us: int
    lease_until_us: int
    targets: tuple[str, ...] | None = None


#: The engine's decision on the wake a claim statement leased (``row``: the leased row, ``update``: what the
#: statement changed, as the event records it): the event to append (``changes == [update]``), or raise.
ClaimDecider = Callable[[dict[str, Any], Update], WriteRequest]
ReadsWithin = Callable[[Any], AbstractContextManager[None]]
BatchDecider = Callable[[list[WriteRequest]], list[WriteRequest]]


CLAIM_LISTED_TARGETS = 16  # a claim among more agents binds them as one parameter (one statement text for all)


@lru_cache(maxsize=256)
def _claim_sql(dialect: str, targets: int | None) -> str:
    """The claim: one UPDATE of the most urgent due wake of an online target (pending and due, or claimed
    with its lease run out), returning the leased row. On PostgreSQL the candidate is taken ``FOR UPDATE
    SKIP LOCKED``: concurrent claimers lease different wakes and none waits for another's decision."""
    def ph(name: str) -> str:
        return placeholder(dialect, name)
    if targets is None:
        only = ""
    elif targets > CLAIM_LISTED_TARGETS:  # one parameter, whatever the count (a worker serving 1,000 agents)
        only = (f" AND w.target_agent = ANY({ph('targets')})" if dialect == "postgresql"
                else f" AND w.target_agent IN (SELECT value FROM json_each({ph('targets')}))")
    else:
        only = f" AND w.target_agent IN ({', '.join(ph(f't{n}') for n in range(targets))})"
    lease = (f"UPDATE wakes SET status = 'claimed', lease_owner = {ph('owner')}, lease_until_us = {ph('until')}, "
             f"attempts = attempts + 1, updated_at_us = {ph('now')}, version = version + 1 ")
    served = f"w.target_agent IN (SELECT agent_id FROM agents WHERE status <> 'offline'){only}"
    returning = f"RETURNING {', '.join(c.name for c in wakes.columns)}"
    if dialect == "postgresql":  # one candidate query, locking only the row it returns (see below)
        return (f"{lease}WHERE wake_id = (SELECT w.wake_id FROM wakes w "
                f"WHERE ((w.status = 'pending' AND w.not_before_us <= {ph('now')}) "
                f"OR (w.status = 'claimed' AND w.lease_until_us < {ph('now')})) AND {served} "
                f"ORDER BY w.priority DESC, w.not_before_us, w.wake_id LIMIT 1 FOR UPDATE OF w SKIP LOCKED) "
                f"{returning}")

    def first(name: str, source: str, due: str) -> str:  # the most urgent wake of one kind, in claim order
        return (f"SELECT * FROM (SELECT w.wake_id, w.priority, w.not_before_us FROM {source} WHERE {due} "
                f"AND {served} ORDER BY w.priority DESC, w.not_before_us, w.wake_id LIMIT 1) AS {name}")
    # SQLite: the more urgent of two candidates: pending and due, walked in claim order over the claim's index
    # (its planner, without statistics, would sort every pending wake instead: named), and claimed with the
    # lease run out (few: in flight). PostgreSQL keeps the one query: a candidate per kind there would lock
    # both (FOR UPDATE in each derived table) until the claim commits, and a concurrent claimer would skip the
    # one not taken (a due wake left for nobody); SQLite has one writer, so nothing is skipped.
    pending = first("pending", "wakes w INDEXED BY ix_wakes_claimable",
                    f"w.status = 'pending' AND w.not_before_us <= {ph('now')}")
    expired = first("expired", "wakes w", f"w.status = 'claimed' AND w.lease_until_us < {ph('now')}")
    return (f"{lease}WHERE wake_id = (SELECT wake_id FROM ({pending} UNION ALL {expired}) AS due "
            f"ORDER BY priority DESC, not_before_us, wake_id LIMIT 1) {returning}")


def claim_wake(db: Database, claim: WakeClaim, decide: ClaimDecider, hooks: tuple[CommitHook, ...] = (), *,
               undecided_ok: bool = False, within: ReadsWithin | None = None) -> CommitOutcome | None:
    """Lease the next due wake and append its event, in ONE write transaction; ``None`` if none is due.

    1. one conditional statement leases the most urgent due wake of ``claim.targets`` (:func:`_claim_sql`;
       SQLite: the transaction is ``BEGIN IMMEDIATE``, so no other writer runs between the choice and the
       lease; PostgreSQL: ``SKIP LOCKED``): no candidate loop, no claim lost to a race;
    2. ``decide(row, update)`` decides the claim on the leased row while the transaction is open (its reads on
       the driver cursor run inside it: ``within``, :meth:`store.Reader.within`) and returns the event;
    3. the epoch check and the event (the operation's ledger entry), as :func:`commit` writes them.

    Anything ``decide`` raises (a denial, no answer from the PDP) rolls the whole transaction back: the lease
    was never visible. A known operation id (a concurrent twin committed first) is answered from the ledger
    (``replayed``), or :class:`~engine.errors.OperationConflict`. Errors are :func:`commit`'s."""
    if claim.targets is not None and not claim.targets:
        raise ValueError("a claim among no agents claims nothing: do not ask the store")  # a programming error
    params: dict[str, Any] = {"owner": claim.owner, "until": claim.lease_until_us, "now": claim.now_us}
    count = None if claim.targets is None else len(claim.targets)
    if count is not None and count > CLAIM_LISTED_TARGETS:  # one parameter: an array, or JSON text for SQLite
        params["targets"] = list(claim.targets or ()) if db.dialect == "postgresql" else \
            orjson.dumps(list(claim.targets or ())).decode()
    else:
        params.update({f"t{n}": t for n, t in enumerate(claim.targets or ())})
    sql = _claim_sql(db.dialect, count)
    request: WriteRequest | None = None
    try:
        with db.write_cursor() as cur:
            cur.execute(sql, params)
            found = cur.fetchone()
            if found is None:
                return None
            row = decoded("wakes", db.dialect, found)
            update = Update("wakes", {"wake_id": row["wake_id"]}, int(row["version"]) - 1, {
                "status": row["status"], "lease_owner": claim.owner, "attempts": row["attempts"],
                "lease_until_us": claim.lease_until_us, "updated_at_us": claim.now_us}, "wake", row["wake_id"])
            with within(cur) if within is not None else nullcontext():
                request = decide(row, update)
            if list(request.changes) != [update] or request.provenance:
                raise ValueError("a claim's event records the lease it took, and nothing else")  # programming error
            tx = _Tx(db, cur)
            tx.check_epoch(request, undecided_ok=undecided_ok)
            if db.dialect != "sqlite":  # PostgreSQL: the event under the log lock, as in _Tx.apply
                cur.execute(LOG_LOCK_SQL)
            tx.append_event(request, [update])
            if db.dialect != "sqlite":
                cur.execute(_NOTIFY)
    except _DuplicateOperationError:
        assert request is not None
        return _replay(db, request)
    except PMWError:
        raise
    except (OverflowError, UnicodeEncodeError, orjson.JSONEncodeError, db.database_error, DatabaseError) as exc:
        raise _write_failure(db, exc, "claim_wake") from exc
    for hook in hooks:
        hook(request)
    return CommitOutcome(result=request.result, event_id=request.event_id, replayed=False)


class BatchRefused(Exception):
    """:func:`commit_many` refused its batch because of request ``index``: ``error`` is what that request
    alone would have raised (``VersionConflict``, ``NotFound``, ``AlreadyExists``, ``InvalidInput``,
    ``OperationConflict``, ``PolicyEpochChanged``, ``UndecidedWrite``). Nothing of the batch was written."""

    def __init__(self, index: int, error: PMWError) -> None:
        super().__init__(f"request {index} of the batch: {error.message}")
        self.index = index
        self.error = error


def _known_operations(cur: Any, dialect: str, op_ids: list[str]) -> dict[str, tuple[str, str, Any, str]]:
    """(command, request hash, result, event id) of the ``op_ids`` already in the ledger (one statement)."""
    names = [f"op{n}" for n in range(len(op_ids))]
    marks = ", ".join(placeholder(dialect, n) for n in names)
    cur.execute(f"SELECT op_id, command, request_hash, result, event_id FROM events WHERE op_id IN ({marks})",
                dict(zip(names, op_ids, strict=True)))
    out = {}
    for op_id, command, digest, result, event_id in cur.fetchall():
        out[op_id] = (command, digest, orjson.loads(result) if dialect == "sqlite" else result, event_id)
    return out


def _apply_many(tx: _Tx, requests: list[WriteRequest], *, undecided_ok: bool,
                runtime_writes: int = 0) -> list[CommitOutcome]:
    """Every request of a batch on one transaction (see :func:`commit_many`); the fences checked already. The
    first ``runtime_writes`` requests may carry no decision (``undecided_ok`` is for the whole batch)."""
    known = _known_operations(tx.cur, tx.dialect, [r.op_id for r in requests])
    outcomes: list[CommitOutcome] = []
    fresh: list[tuple[int, WriteRequest, list[Insert | Update]]] = []
    for index, request in enumerate(requests):
        if (stored := known.get(request.op_id)) is not None:
            command, digest, result, event_id = stored
            if digest != request.request_hash or command != request.command:
                raise BatchRefused(index, OperationConflict(request.op_id, request.command))
            outcomes.append(CommitOutcome(result=result, event_id=event_id, replayed=True))
            continue
        try:
            tx.check_epoch(request, undecided_ok=undecided_ok or index < runtime_writes)
        except PMWError as exc:
            raise BatchRefused(index, exc) from exc
        fresh.append((index, request, [*request.changes, *(_provenance_row(request, e) for e in request.provenance)]))
        outcomes.append(CommitOutcome(result=request.result, event_id=request.event_id, replayed=False))
    for index, request, changes in fresh:
        try:
            if tx.dialect == "sqlite":  # one writer at a time: log order is commit order already
                tx.append_event(request, changes)
            tx._apply_changes(changes)
        except (VersionConflict, NotFound, AlreadyExists, InvalidInput) as exc:
            raise BatchRefused(index, exc) from exc
    if tx.dialect != "sqlite" and fresh:  # PostgreSQL: the events last, under the log lock (see _Tx.apply)
        tx.cur.execute(LOG_LOCK_SQL)
        for _, request, changes in fresh:
            tx.append_event(request, changes)
        tx.cur.execute(_NOTIFY)
    return outcomes


def commit_many(db: Database, requests: list[WriteRequest], hooks: tuple[CommitHook, ...] = (), *,
                undecided_ok: bool = False, decide: BatchDecider | None = None,
                within: ReadsWithin | None = None, runtime_writes: int = 0) -> list[CommitOutcome]:
    """Apply several requests in ONE transaction, all or nothing, in order: each is still its own event with
    its operation id, its epoch check and its ledger entry, exactly as :func:`commit` would write it.

    ``decide(requests)``, if given, decides the batch inside that transaction, once the fences of this thread
    hold (:mod:`store.fences`), its reads on the driver cursor running inside it (``within``), and returns the
    requests as decided (their epoch set); anything it raises (a denial, no answer) rolls the transaction back
    with nothing written. So the policy's answer and the commit see one state of the world.

    A request whose operation id is already in the ledger with the same request hash is answered from it
    (``replayed``) and writes nothing; the others are written. Any refusal of one request
    (:class:`BatchRefused`, naming the request and its error) rolls back the whole batch: nothing is written.
    ``StoreUnavailable`` and ``InvalidInput`` (a value no column holds) likewise leave nothing written.
    Returns one outcome per request, in order. Hooks run after commit for each request written.

    ``runtime_writes``: the first that many requests are the runtime's own bookkeeping and may carry no
    decision (e.g. a worker's decision record committed with the decision's effects); the caller is the
    runtime's door, which says so for these only: every later request must be decided (``decide`` sets their
    epoch) unless ``undecided_ok``."""
    if not requests:
        return []
    for attempt in range(2):
        try:
            with db.write_cursor() as cur:
                check_fences(db, cur)  # a lease this thread writes under must still hold (store.fences)
                if decide is not None:
                    with within(cur) if within is not None else nullcontext():
                        decided = decide(list(requests))
                else:
                    decided = list(requests)
                outcomes = _apply_many(_Tx(db, cur), decided, undecided_ok=undecided_ok,
                                       runtime_writes=runtime_writes)
            break
        except _DuplicateOperationError:  # a concurrent twin took an operation id after our look-up
            if attempt == 1:
                raise StoreUnavailable("a batch's operation ids kept colliding with concurrent writes") from None
        except (BatchRefused, PMWError):
            raise
        except (OverflowError, UnicodeEncodeError, orjson.JSONEncodeError, db.database_error, DatabaseError) as exc:
            raise _write_failure(db, exc, requests[0].command) from exc
    for request, outcome in zip(decided, outcomes, strict=True):
        if not outcome.replayed:
            for hook in hooks:
                hook(request)
    return outcomes


@contextmanager
def log_lock_held(db: Database) -> Iterator[None]:
    """Hold this world's log lock (:data:`LOG_LOCK_SQL`) in an open write transaction until the block ends,
    writing nothing: what a writer between its append and its commit holds (PostgreSQL only; tests and
    benchmarks that measure who waits on it). Every other writer of this world waits; other worlds' do not."""
    if db.dialect != "postgresql":
        raise InvalidInput("store", "the log lock is PostgreSQL's (SQLite serialises every writer)")
    with db.write_cursor() as cur:
        cur.execute(LOG_LOCK_SQL)
        yield


# -- the controller's lease: one conditional statement each (store.leases, engine.controller.leadership) ---

def _lease_sql(dialect: str, statement: str) -> str:
    ph = {n: placeholder(dialect, n) for n in ("w", "h", "g", "now", "until")}
    if statement == "take":  # absent: inserted at generation 1; expired: taken over, generation + 1
        return (f"INSERT INTO controller_leases (world_id, holder, generation, acquired_at_us, expires_at_us, version) "
                f"VALUES ({ph['w']}, {ph['h']}, 1, {ph['now']}, {ph['until']}, 1) "
                f"ON CONFLICT (world_id) DO UPDATE SET holder = excluded.holder, "
                f"generation = controller_leases.generation + 1, acquired_at_us = excluded.acquired_at_us, "
                f"expires_at_us = excluded.expires_at_us, version = controller_leases.version + 1 "
                f"WHERE controller_leases.expires_at_us < excluded.acquired_at_us RETURNING {LEASE_COLUMNS}")
    until = ph["until"] if statement == "renew" else f"{ph['now']} - 1"  # release: expired as of now
    return (f"UPDATE controller_leases SET expires_at_us = {until}, version = version + 1 "
            f"WHERE world_id = {ph['w']} AND holder = {ph['h']} AND generation = {ph['g']} "
            f"AND expires_at_us >= {ph['now']} RETURNING {LEASE_COLUMNS}")


def _lease_statement(db: Database, statement: str, world_id: str, params: dict[str, Any]) -> Lease | None:
    try:
        with db.write_cursor() as cur:
            cur.execute(_lease_sql(db.dialect, statement), {"w": world_id, **params})
            row = cur.fetchone()
    except PMWError:
        raise
    except (OverflowError, UnicodeEncodeError, db.database_error, DatabaseError) as exc:
        raise _write_failure(db, exc, f"lease.{statement}") from exc
    return Lease.of(world_id, row) if row is not None else None


def take_lease(db: Database, world_id: str, holder: str, now_us: int, until_us: int) -> Lease | None:
    """Take the controller lease of ``world_id`` for ``holder`` until ``until_us``, in ONE conditional
    statement: when no lease exists (generation 1) or the current one expired before ``now_us`` (generation
    + 1: a takeover). ``None`` when a live lease is held (by anyone, ``holder`` included: renew it instead).
    Of any number of concurrent takers at most one gets the lease. Writes no event (not world state)."""
    return _lease_statement(db, "take", world_id, {"h": holder, "now": now_us, "until": until_us})


def renew_lease(db: Database, lease: Lease, now_us: int, until_us: int) -> Lease | None:
    """Extend ``lease`` to ``until_us`` if it still holds at ``now_us`` (same holder and generation, not
    expired); ``None`` when it does not (it was lost: stop acting under it). One conditional statement."""
    return _lease_statement(db, "renew", lease.world_id, {"h": lease.holder, "g": lease.generation, "now": now_us,
                                                         "until": until_us})


def release_lease(db: Database, lease: Lease, now_us: int) -> bool:
    """Give ``lease`` up: it expires as of ``now_us`` (a standby may take it over at once, bumping the
    generation). False when it had been lost already. One conditional statement."""
    return _lease_statement(db, "release", lease.world_id, {"h": lease.holder, "g": lease.generation,
                                                           "now": now_us}) is not None


__all__ = ["LOG_LOCK_SQL", "BatchDecider", "BatchRefused", "ClaimDecider", "CommitHook", "WakeClaim", "claim_wake",
           "commit", "commit_many", "log_lock_held", "lookup_operation", "release_lease", "renew_lease",
           "runtime_secret", "take_lease"]
