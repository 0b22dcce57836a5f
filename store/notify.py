"""Commit notifications across processes on PostgreSQL: ``LISTEN pmw_events``.

The gateway issues ``NOTIFY pmw_events`` inside every write transaction; PostgreSQL delivers it only when
that transaction commits. A :class:`Listener` holds one dedicated autocommit connection and waits on it
for a notification, with a timeout (so callers keep a bounded fallback poll). SQLite has no cross-process
notification: its runners rely on the in-process commit hook and the fallback poll.
"""

from __future__ import annotations

import psycopg
from sqlalchemy.engine import make_url

from engine.errors import StoreUnavailable
from store.gateway import EVENTS_CHANNEL


class Listener:
    """A LISTEN connection to the world at ``url`` (a ``postgresql://`` URL)."""

    def __init__(self, url: str) -> None:
        parsed = make_url(url)
        dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        try:
            self._conn = psycopg.connect(dsn, autocommit=True)
            self._conn.execute(f"LISTEN {EVENTS_CHANNEL}")
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot listen for commits: {exc}") from exc

    def wait(self, timeout_s: float) -> bool:
        """Block until a commit notification arrives or ``timeout_s`` passes; True if one arrived. Every
        notification already queued is consumed."""
        try:
            got = False
            for _ in self._conn.notifies(timeout=max(0.0, timeout_s), stop_after=1):
                got = True
            return got
        except psycopg.Error as exc:
            raise StoreUnavailable(f"commit notifications lost: {exc}") from exc

    def close(self) -> None:
        self._conn.close()


__all__ = ["Listener"]
