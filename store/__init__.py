"""The SQL store: every SQL statement of PMW lives in this package.

:class:`Store` is the one object the engine holds: ``init()`` applies migrations, ``read`` answers
queries, ``commit()`` is the write gateway (the only way anything is written).
"""

from __future__ import annotations

from store.changes import Change, CommitOutcome, Insert, Provenance, StoredOperation, Update, WriteRequest
from store.database import Database, DatabaseOptions
from store.gateway import CommitHook, commit, lookup_operation
from store.migrations import LATEST, current_version, migrate
from store.notify import Listener
from store.reads import Reader, Row
from store.schema import STATE_TABLES, primary_key


class Store:
    """One database: migrations, reads and the write gateway."""

    def __init__(self, url: str, options: DatabaseOptions | None = None) -> None:
        self.url = url
        self.db = Database(url, options)
        self.read = Reader(self.db)
        self._hooks: tuple[CommitHook, ...] = ()

    @property
    def dialect(self) -> str:
        return self.db.dialect

    def init(self, now_us: int) -> list[int]:
        """Apply pending migrations (idempotent); returns the versions applied now."""
        return migrate(self.db, now_us)

    def schema_version(self) -> int:
        return current_version(self.db)

    def commit(self, request: WriteRequest) -> CommitOutcome:
        """The write gateway: see :mod:`store.gateway`."""
        return commit(self.db, request, self._hooks)

    def operation(self, op_id: str) -> StoredOperation | None:
        return lookup_operation(self.db, op_id)

    def on_commit(self, hook: CommitHook) -> None:
        """Call ``hook(request)`` after every successful commit in this process (wake signals)."""
        self._hooks = (*self._hooks, hook)

    def listener(self) -> Listener | None:
        """A cross-process commit listener (PostgreSQL ``LISTEN``); ``None`` on SQLite, which has none."""
        if self.db.dialect != "postgresql":
            return None
        return Listener(self.db.engine.url.render_as_string(hide_password=False))

    def close(self) -> None:
        self.db.dispose()


STATE_TABLE_KEYS: dict[str, tuple[str, ...]] = {t.name: primary_key(t) for t in STATE_TABLES}

__all__ = [
    "LATEST",
    "STATE_TABLE_KEYS",
    "Change",
    "CommitOutcome",
    "DatabaseOptions",
    "Insert",
    "Provenance",
    "Reader",
    "Row",
    "Store",
    "StoredOperation",
    "Update",
    "WriteRequest",
]
