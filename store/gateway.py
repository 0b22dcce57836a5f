"""The one write gateway: the only code in PMW that changes a row.

:func:`commit` applies a :class:`~store.changes.WriteRequest` in one database transaction:

1. record the operation id in the ledger (a duplicate id with the same request hash returns the stored
   result and writes nothing; with a different hash it is :class:`~engine.errors.OperationConflict`);
2. apply each change; an :class:`~store.changes.Update` is one compare-and-set statement
   (``UPDATE ... WHERE key AND version = :expected``); when no row changed, a second read tells
   :class:`~engine.errors.NotFound` from :class:`~engine.errors.VersionConflict` (with the current version);
3. append the event (actor, causation, correlation, base and resulting versions, policy epoch, topology
   version, and the post-image of every row it wrote, so the log folds to the state);
4. insert the provenance edges.

Success is returned only after commit; any error rolls the whole transaction back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import Connection, Table, and_, insert, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from engine.errors import (
    AlreadyExists,
    InvalidInput,
    NotFound,
    OperationConflict,
    PMWError,
    StoreUnavailable,
    VersionConflict,
)
from store.changes import CommitOutcome, Insert, Provenance, StoredOperation, Update, WriteRequest
from store.database import Database
from store.schema import TABLES, events, operations, primary_key, provenance_edges

CommitHook = Callable[[WriteRequest], None]


class _DuplicateOperation(Exception):
    """Internal: the operation id is already in the ledger (resolved after rollback)."""


def _is_fk_violation(exc: IntegrityError) -> bool:
    orig = exc.orig
    sqlstate = getattr(orig, "sqlstate", None)
    return sqlstate == "23503" or "FOREIGN KEY" in str(orig).upper()


def _table(name: str) -> Table:
    try:
        return TABLES[name]
    except KeyError:  # a programming error in the caller, not bad user input
        raise ValueError(f"unknown table {name!r}") from None


def _key_clause(table: Table, key: Mapping[str, Any]) -> Any:
    if set(key) != set(primary_key(table)):
        raise ValueError(f"key {sorted(key)} is not the primary key of {table.name}")
    return and_(*(table.c[col] == val for col, val in key.items()))


def _apply_insert(conn: Connection, change: Insert) -> dict[str, Any]:
    table = _table(change.table)
    try:
        conn.execute(insert(table), [dict(change.row)])
    except IntegrityError as exc:
        if _is_fk_violation(exc):
            raise InvalidInput(change.kind, f"{change.ident!r} refers to a missing object") from exc
        raise AlreadyExists(change.kind, change.ident) from exc
    return {"table": table.name, "op": "insert",
            "key": {c: change.row[c] for c in primary_key(table)}, "values": dict(change.row)}


def _apply_update(conn: Connection, change: Update) -> dict[str, Any]:
    table = _table(change.table)
    where = _key_clause(table, change.key)
    values = {**change.values, "version": change.expected_version + 1}
    try:
        result = conn.execute(
            update(table).where(where, table.c.version == change.expected_version).values(values))
    except IntegrityError as exc:
        if _is_fk_violation(exc):
            raise InvalidInput(change.kind, f"{change.ident!r} refers to a missing object") from exc
        raise AlreadyExists(change.kind, change.ident) from exc
    if result.rowcount != 1:
        current = conn.execute(select(table.c.version).where(where)).scalar_one_or_none()
        if current is None:
            raise NotFound(change.kind, change.ident)
        raise VersionConflict(change.kind, change.ident, change.expected_version, int(current))
    return {"table": table.name, "op": "update", "key": dict(change.key), "values": values}


def _provenance_row(request: WriteRequest, edge: Provenance) -> Insert:
    row = {"edge_id": edge.edge_id, "src_kind": edge.src_kind, "src_id": edge.src_id,
           "dst_kind": edge.dst_kind, "dst_id": edge.dst_id, "relation": edge.relation,
           "event_id": request.event_id, "created_at_us": request.created_at_us}
    return Insert(provenance_edges.name, row, "provenance_edge", edge.edge_id)


def _record_operation(conn: Connection, request: WriteRequest) -> None:
    try:
        conn.execute(insert(operations), [{
            "op_id": request.op_id, "command": request.command, "request_hash": request.request_hash,
            "actor_id": request.actor_id, "result": dict(request.result), "event_id": request.event_id,
            "created_at_us": request.created_at_us}])
    except IntegrityError as exc:
        raise _DuplicateOperation from exc


def _apply(conn: Connection, request: WriteRequest) -> None:
    _record_operation(conn, request)
    written = [_apply_insert(conn, c) if isinstance(c, Insert) else _apply_update(conn, c)
               for c in request.changes]
    written += [_apply_insert(conn, _provenance_row(request, e)) for e in request.provenance]
    conn.execute(insert(events), [{
        "event_id": request.event_id, "event_type": request.event_type, "actor_id": request.actor_id,
        "op_id": request.op_id, "subject_kind": request.subject_kind, "subject_id": request.subject_id,
        "payload": dict(request.payload), "changes": written,
        "parent_event_id": request.parent_event_id, "causation_id": request.causation_id,
        "correlation_id": request.correlation_id, "base_version": request.base_version,
        "resulting_version": request.resulting_version, "policy_epoch": request.policy_epoch,
        "topology_version": request.topology_version, "created_at_us": request.created_at_us}])


def lookup_operation(db: Database, op_id: str) -> StoredOperation | None:
    """The ledger entry for ``op_id``, if that operation was ever committed."""
    try:
        with db.read() as conn:
            row = conn.execute(select(operations).where(operations.c.op_id == op_id)).mappings().first()
    except OperationalError as exc:
        raise StoreUnavailable(str(exc.orig)) from exc
    if row is None:
        return None
    return StoredOperation(op_id=row["op_id"], command=row["command"], request_hash=row["request_hash"],
                           result=row["result"], event_id=row["event_id"])


def _replay(db: Database, request: WriteRequest) -> CommitOutcome:
    stored = lookup_operation(db, request.op_id)
    if stored is None:  # the conflicting insert rolled back too: a lost race we cannot resolve here
        raise StoreUnavailable(f"operation {request.op_id!r} vanished while resolving a duplicate")
    if stored.request_hash != request.request_hash or stored.command != request.command:
        raise OperationConflict(request.op_id, request.command)
    return CommitOutcome(result=stored.result, event_id=stored.event_id, replayed=True)


def commit(db: Database, request: WriteRequest, hooks: tuple[CommitHook, ...] = ()) -> CommitOutcome:
    """Apply ``request`` atomically; see the module docstring for the contract.

    Raises ``OperationConflict``, ``VersionConflict``, ``NotFound``, ``AlreadyExists``, ``InvalidInput``
    (a reference to a missing object) or ``StoreUnavailable``; in every case nothing was written.
    """
    try:
        with db.write() as conn:
            _apply(conn, request)
    except _DuplicateOperation:
        return _replay(db, request)
    except PMWError:
        raise
    except OperationalError as exc:
        raise StoreUnavailable(str(exc.orig)) from exc
    except DBAPIError as exc:
        raise StoreUnavailable(f"{type(exc.orig).__name__}: {exc.orig}") from exc
    for hook in hooks:
        hook(request)
    return CommitOutcome(result=request.result, event_id=request.event_id, replayed=False)


__all__ = ["CommitHook", "commit", "lookup_operation"]
