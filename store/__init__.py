"""The SQL store: every SQL statement of PMW lives in this package.

:class:`Store` is the one object the runtime holds: ``init()`` applies migrations, ``read`` answers
queries, and the write gateway (:mod:`store.gateway`, the only way anything is written) is reached through
one of two doors:

- :meth:`Store.decided_door`: for the agent-facing World. Every request must carry the policy decision it
  was taken under; in a world a policy epoch governs, a request without one is refused
  (:class:`~engine.errors.UndecidedWrite`).
- :meth:`Store.runtime_door`: for the runtime's own bookkeeping (bootstrap, epochs, recorded decisions,
  controller steps, revocations, denial records), which no agent's authority covers. It is handed out once
  per store, to the object the runtime keeps (:class:`engine.world.book.RuntimeBook`).

:class:`ReadOnlyStore` is what the agent-facing World holds of the store: reads and the operation ledger,
no door, no connection.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from sqlalchemy import event

from engine.errors import InvalidInput
from store.changes import Change, CommitOutcome, Insert, Provenance, StoredOperation, Update, WriteRequest
from store.database import Database, DatabaseOptions, world_in_schema
from store.fences import Fence, LeaderFence, WakeFence, fenced
from store.gateway import (
    BatchDecider,
    BatchRefused,
    ClaimDecider,
    CommitHook,
    WakeClaim,
    claim_wake,
    commit,
    commit_many,
    log_lock_held,
    release_lease,
    renew_lease,
    take_lease,
)
from store.leases import Lease, read_lease
from store.migrations import LATEST, current_version, migrate
from store.notify import Listener
from store.reads import Reader, Row
from store.schema import STATE_TABLES, primary_key


class Door:
    """One way into the write gateway (see the module docstring)."""

    def __init__(self, store: Store, *, undecided_ok: bool) -> None:
        self._store = store
        self._undecided_ok = undecided_ok

    def commit(self, request: WriteRequest) -> CommitOutcome:
        """The write gateway: see :mod:`store.gateway`."""
        return commit(self._store._db, request, self._store._hooks, undecided_ok=self._undecided_ok)

    def fenced(self, fence: Fence) -> AbstractContextManager[None]:
        """This door's store's :meth:`Store.fenced`: commits through it inside the block are checked."""
        return self._store.fenced(fence)

    def commit_many(self, requests: list[WriteRequest], decide: BatchDecider | None = None, *,
                    runtime_writes: int = 0) -> list[CommitOutcome]:
        """Several requests in one transaction, all or nothing, ``decide``'s reads inside it: see
        :func:`store.gateway.commit_many`. ``runtime_writes``: the first that many requests are the runtime's
        own, undecided; only the runtime's door takes them (``RuntimeError`` through the decided door: a
        programming error, nothing written)."""
        if runtime_writes and not self._undecided_ok:
            raise RuntimeError("only the runtime's door commits the runtime's own writes")
        return commit_many(self._store._db, requests, self._store._hooks, undecided_ok=False if runtime_writes
                           else self._undecided_ok, decide=decide, within=self._store.read.within,
                           runtime_writes=runtime_writes)

    def claim_wake(self, claim: WakeClaim, decide: ClaimDecider) -> CommitOutcome | None:
        """Lease the next due wake, decide it and append its event in one transaction (``None``: none due):
        see :func:`store.gateway.claim_wake`. ``decide``'s reads run inside the transaction."""
        return claim_wake(self._store._db, claim, decide, self._store._hooks, undecided_ok=self._undecided_ok,
                          within=self._store.read.within)


class ReadOnlyStore:
    """What the agent-facing World holds of a store: its reader and the operation ledger."""

    def __init__(self, store: Store) -> None:
        self.read = store.read
        self._store = store

    @property
    def dialect(self) -> str:
        return self._store.dialect

    def operation(self, op_id: str) -> StoredOperation | None:
        return self._store.operation(op_id)


class Store:
    """One database: migrations, reads and the two doors to the write gateway."""

    def __init__(self, url: str, options: DatabaseOptions | None = None) -> None:
        self.url = url
        self._db = Database(url, options)
        self.read = Reader(self._db)
        self._hooks: tuple[CommitHook, ...] = ()
        self._runtime_door_taken = False

    def decided_door(self) -> Door:
        """The door for decided writes (any number of them)."""
        return Door(self, undecided_ok=False)

    def runtime_door(self) -> Door:
        """The door for the runtime's own bookkeeping: handed out once per store, to the runtime."""
        if self._runtime_door_taken:
            raise RuntimeError("the runtime door of this store was handed out already")  # a programming error
        self._runtime_door_taken = True
        return Door(self, undecided_ok=True)

    def read_only(self) -> ReadOnlyStore:
        return ReadOnlyStore(self)

    @property
    def dialect(self) -> str:
        return self._db.dialect

    @property
    def db(self) -> Database:
        """The database (migrations, tests and benchmarks that measure the driver; never the World)."""
        return self._db

    def init(self, now_us: int) -> list[int]:
        """Apply pending migrations (idempotent); returns the versions applied now."""
        return migrate(self._db, now_us)

    def schema_version(self) -> int:
        return current_version(self._db)

    def operation(self, op_id: str) -> StoredOperation | None:
        return self.read.operation(op_id)

    def on_commit(self, hook: CommitHook) -> None:
        """Call ``hook(request)`` after every successful commit in this process (wake signals)."""
        self._hooks = (*self._hooks, hook)

    def trace_statements(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(sql)`` for every statement (``BEGIN``/``COMMIT`` included) that connections of a
        SQLite store opened from now on run: counting what a call costs (tests, benchmarks). Connections
        already open are not traced; on PostgreSQL this is ``InvalidInput``."""
        if self._db.dialect != "sqlite":
            raise InvalidInput("store", "statement tracing is for SQLite stores")
        event.listen(self._db.engine, "connect",
                     lambda dbapi_conn, _record: dbapi_conn.set_trace_callback(callback))

    # -- leases and fences (issue 13: docs/scaleout.md) ---------------------------------------------------

    def fenced(self, fence: Fence) -> AbstractContextManager[None]:
        """Within this block, this thread's commits on this store are refused (``NotLeader``,
        ``WakeLeaseLost``; nothing written) unless ``fence`` holds, checked in each commit's transaction
        (:mod:`store.fences`)."""
        return fenced(self._db, fence)

    def lease(self, world_id: str) -> Lease | None:
        """The controller lease of ``world_id`` as committed (``None``: never taken)."""
        return read_lease(self._db, world_id)

    def take_lease(self, world_id: str, holder: str, now_us: int, until_us: int) -> Lease | None:
        """Take the lease of ``world_id`` if free or expired (:func:`store.gateway.take_lease`)."""
        return take_lease(self._db, world_id, holder, now_us, until_us)

    def renew_lease(self, lease: Lease, now_us: int, until_us: int) -> Lease | None:
        """Extend ``lease`` if it still holds (:func:`store.gateway.renew_lease`); ``None``: it was lost."""
        return renew_lease(self._db, lease, now_us, until_us)

    def release_lease(self, lease: Lease, now_us: int) -> bool:
        """Give ``lease`` up now (:func:`store.gateway.release_lease`); False: it was lost already."""
        return release_lease(self._db, lease, now_us)

    def holding_log_lock(self) -> AbstractContextManager[None]:
        """This world's log lock held in an open transaction for the block (PostgreSQL; tests and
        benchmarks: :func:`store.gateway.log_lock_held`)."""
        return log_lock_held(self._db)

    def listener(self) -> Listener | None:
        """A cross-process commit listener (PostgreSQL ``LISTEN``); ``None`` on SQLite, which has none."""
        if self._db.dialect != "postgresql":
            return None
        return Listener(self._db.engine.url.render_as_string(hide_password=False))

    def close(self) -> None:
        self._db.dispose()


STATE_TABLE_KEYS: dict[str, tuple[str, ...]] = {t.name: primary_key(t) for t in STATE_TABLES}

__all__ = [
    "LATEST",
    "STATE_TABLE_KEYS",
    "BatchRefused",
    "Change",
    "ClaimDecider",
    "CommitOutcome",
    "DatabaseOptions",
    "Door",
    "Insert",
    "LeaderFence",
    "Lease",
    "Provenance",
    "ReadOnlyStore",
    "Reader",
    "Row",
    "Store",
    "StoredOperation",
    "Update",
    "WakeClaim",
    "WakeFence",
    "WriteRequest",
    "world_in_schema",
]
