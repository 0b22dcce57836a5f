"""Ordered schema migrations, applied by ``pmw init``; re-running on a current database is a no-op.

Each migration runs in its own transaction together with its ``schema_migrations`` row, under a lock
(``BEGIN IMMEDIATE`` on SQLite, an advisory transaction lock on PostgreSQL), so two concurrent ``init``
calls apply each migration once. Migration 1 creates the tables of :mod:`store.schema` as first
released; a later schema change is a new migration appended here, never an edit of an applied one.

A database that records a migration newer than :data:`LATEST` was written by a newer PMW: :func:`migrate`
(which every open of a world runs) and :func:`require_supported` refuse it with
:class:`~engine.errors.SchemaTooNew` before anything is written, rather than read or write it with a schema
this code does not know.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, insert, inspect, select, text
from sqlalchemy.exc import DatabaseError

from engine.errors import SchemaTooNew, StoreUnavailable
from store.database import Database
from store.schema import (
    CLAIM_ORDER_INDEX,
    OPERATIONS_VIEW,
    RECENCY_INDEXES,
    ROOM_EVENTS_INDEX,
    SUBJECT_INDEX_BEFORE_8,
    TABLES,
    agent_tokens,
    approvals,
    metadata,
    policy_activations,
    policy_epochs,
    schema_migrations,
)

MIGRATION_4_TABLES = ("controller_positions", "controller_facts", "subscriptions", "room_answers", "traces")

_ADVISORY_LOCK_ID = 0x504D5701  # "PMW" 1
# tables that later migrations create
_LATER = {"policy_epochs", "approvals", "policy_activations", "agent_tokens", "controller_leases", *MIGRATION_4_TABLES}


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    apply: Callable[[Connection], None]


def _initial_schema(conn: Connection) -> None:
    metadata.create_all(conn, tables=[t for t in metadata.sorted_tables if t.name not in _LATER], checkfirst=True)
    view = OPERATIONS_VIEW if conn.dialect.name == "sqlite" else OPERATIONS_VIEW.replace(
        "CREATE VIEW IF NOT EXISTS", "CREATE OR REPLACE VIEW")
    conn.execute(text(view))


def _policy_epochs(conn: Connection) -> None:
    policy_epochs.create(conn, checkfirst=True)


def _approvals(conn: Connection) -> None:
    approvals.create(conn, checkfirst=True)


def _controller_and_runs(conn: Connection) -> None:
    for name in MIGRATION_4_TABLES:
        TABLES[name].create(conn, checkfirst=True)


def _policy_activations(conn: Connection) -> None:
    policy_activations.create(conn, checkfirst=True)


def _agent_tokens(conn: Connection) -> None:
    agent_tokens.create(conn, checkfirst=True)


def _recency_indexes(conn: Connection) -> None:
    for index in RECENCY_INDEXES:
        index.create(conn, checkfirst=True)


def _controller_leases(conn: Connection) -> None:
    TABLES["controller_leases"].create(conn, checkfirst=True)


def _controller_fact_order(conn: Connection) -> None:
    if "ordinal" not in {c["name"] for c in inspect(conn).get_columns("controller_facts")}:
        conn.execute(text("ALTER TABLE controller_facts ADD COLUMN ordinal BIGINT NOT NULL DEFAULT 0"))


def _room_events_index(conn: Connection) -> None:
    conn.execute(text(f"DROP INDEX IF EXISTS {SUBJECT_INDEX_BEFORE_8}"))
    ROOM_EVENTS_INDEX.create(conn, checkfirst=True)


#: The table of the runtime's own secrets (name -> hex secret). It is not in :mod:`store.schema`'s metadata on
#: purpose: no reader of rows (``Reader.get``/``rows``, snapshots, the log view) can name it, and no event
#: carries it; only :func:`store.gateway.runtime_secret` reads it.
RUNTIME_SECRETS = "runtime_secrets"
#: The secret that signs this world's read-set tokens (``engine.world.read_set``).
READ_SET_SECRET = "read_set_key"


def _runtime_secrets(conn: Connection) -> None:
    conn.execute(text(f"CREATE TABLE IF NOT EXISTS {RUNTIME_SECRETS} (name VARCHAR(64) PRIMARY KEY, "
                      "secret VARCHAR(128) NOT NULL)"))
    conn.execute(text(f"INSERT INTO {RUNTIME_SECRETS} (name, secret) VALUES (:n, :s) ON CONFLICT (name) DO NOTHING"),
                 {"n": READ_SET_SECRET, "s": secrets.token_hex(32)})


def _claim_order_index(conn: Connection) -> None:
    CLAIM_ORDER_INDEX.create(conn, checkfirst=True)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema: world tables, events (the operations ledger), snapshots", _initial_schema),
    Migration(2, "policy epochs: the policy set every decision must have been taken under", _policy_epochs),
    Migration(3, "approvals: S3 actions bound to approver, action hash, epoch and expiry", _approvals),
    Migration(4, "controller position and facts, subscriptions, blind room answers, run traces",
              _controller_and_runs),
    Migration(5, "recency indexes for the projection; due-wake index", _recency_indexes),
    Migration(6, "policy activations: every activation of an epoch in order (a rollback re-activates an old one)",
              _policy_activations),
    Migration(7, "agent tokens: issued, expiring, revocable credentials, stored as a hash of the secret",
              _agent_tokens),
    Migration(8, "events: the subject index for room events only (the reads that use it); other commits skip it",
              _room_events_index),
    Migration(9, "controller leases: one controller leader per world, its generation the fencing token",
              _controller_leases),
    Migration(10, "controller facts: the engine's assertion order (a rebuild fires as the follower did)",
              _controller_fact_order),
    Migration(11, "runtime secrets: this world's read-set signing key, drawn once (tokens verify in every process)",
              _runtime_secrets),
    Migration(12, "wakes: the claim's order over pending wakes (a claim stops at the first due one, sorts none)",
              _claim_order_index),
)


def _applied(conn: Connection) -> set[int]:
    if not inspect(conn).has_table(schema_migrations.name):
        return set()
    return {int(v) for v in conn.execute(select(schema_migrations.c.version)).scalars()}


def migrate(db: Database, now_us: int) -> list[int]:
    """Apply every pending migration in order; returns the versions applied by this call. A database
    migrated by a newer PMW is :class:`~engine.errors.SchemaTooNew`: nothing is applied, and ``db`` is
    disposed (the refused database is not kept open; later calls on it raise ``Closed``)."""
    done: list[int] = []
    newer = 0  # the version a newer PMW left, if any
    try:
        for migration in MIGRATIONS:
            with db.write() as conn:
                if db.dialect == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_LOCK_ID})
                applied = _applied(conn)
                if max(applied, default=0) > LATEST:
                    newer = max(applied)
                    break
                if migration.version in applied:
                    continue
                migration.apply(conn)
                schema_migrations.create(conn, checkfirst=True)
                conn.execute(insert(schema_migrations), [{
                    "version": migration.version, "name": migration.name, "applied_at_us": now_us}])
                done.append(migration.version)
    except DatabaseError as exc:
        raise StoreUnavailable(str(exc.orig)) from exc
    if newer:
        db.dispose()  # refused: the database is not opened, its connections are not kept
        raise SchemaTooNew(newer, LATEST)
    return done


def current_version(db: Database) -> int:
    """The highest applied migration (0 for an empty database)."""
    try:
        with db.read() as conn:
            return max(_applied(conn), default=0)
    except DatabaseError as exc:
        raise StoreUnavailable(str(exc.orig)) from exc


def require_supported(db: Database) -> int:
    """The database's schema version, or :class:`~engine.errors.SchemaTooNew` when a newer PMW migrated it
    (for opening a world without migrating it)."""
    found = current_version(db)
    if found > LATEST:
        raise SchemaTooNew(found, LATEST)
    return found


def index_definitions(db: Database, table: str) -> dict[str, str]:
    """The indexes of ``table`` as the database holds them: name -> definition (SQLite: its ``CREATE``
    statement, ``None`` text for a UNIQUE constraint's own; PostgreSQL: ``pg_indexes.indexdef``)."""
    sql = ("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = :t" if db.dialect == "sqlite"
           else "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = :t")
    with db.read() as conn:
        return {str(name): str(definition) for name, definition in conn.execute(text(sql), {"t": table})}


def room_events_plan(db: Database, room_id: str) -> str:
    """The database's plan for the newest events of room ``room_id`` (the reads of a room's discussion and
    last activity), as text; on PostgreSQL with sequential scans off (a small table: whether an index CAN
    serve it)."""
    query = ("SELECT seq FROM events WHERE subject_kind = 'room' AND subject_id = :r "
             "AND event_type = 'room.discussed' ORDER BY seq DESC LIMIT 5")
    with db.read() as conn:
        if db.dialect == "sqlite":
            rows = conn.execute(text("EXPLAIN QUERY PLAN " + query), {"r": room_id})
        else:
            conn.execute(text("SET LOCAL enable_seqscan = off"))
            rows = conn.execute(text("EXPLAIN " + query), {"r": room_id})
        return "\n".join(" ".join(map(str, r)) for r in rows)


def as_before_8(db: Database) -> None:
    """Give a database at schema 7 the events indexes PMW before migration 8 left (``ix_events_subject``, no
    ``ix_events_room``): a world as the previous schema wrote it, for the tests of migration 8."""
    with db.write() as conn:
        conn.execute(text(f"DROP INDEX IF EXISTS {ROOM_EVENTS_INDEX.name}"))
        conn.execute(text(f"CREATE INDEX IF NOT EXISTS {SUBJECT_INDEX_BEFORE_8} ON events (subject_kind, subject_id)"))


LATEST = MIGRATIONS[-1].version

__all__ = ["LATEST", "MIGRATIONS", "READ_SET_SECRET", "RUNTIME_SECRETS", "Migration", "as_before_8",
           "current_version", "index_definitions", "migrate", "require_supported", "room_events_plan"]
