"""Event-driven waiting, not busy polling: a worker or controller sleeps until something was committed.

* In one process, the store's commit hook sets an event (every backend).
* Across processes on PostgreSQL, ``LISTEN pmw_events`` (the gateway notifies on every commit).
* Across processes on SQLite there is no notification: the wait's timeout is the bounded fallback poll.
"""

from __future__ import annotations

import threading
from typing import Any

from store import Store
from store.notify import Listener

DEFAULT_POLL_S = 1.0


class CommitSignal:
    """Wakes waiters when the store at hand commits anything (see the module docstring)."""

    def __init__(self, store: Store, *, listen: bool = True) -> None:
        self._event = threading.Event()
        store.on_commit(self._hook)
        self._listener: Listener | None = store.listener() if listen else None

    def _hook(self, _request: Any) -> None:
        self._event.set()

    def wait(self, timeout_s: float = DEFAULT_POLL_S) -> bool:
        """Sleep until a commit (here, or on PostgreSQL anywhere) or ``timeout_s``; True if signalled."""
        if self._event.is_set():
            self._event.clear()
            return True
        if self._listener is not None:
            got = self._listener.wait(timeout_s)
            self._event.clear()
            return got
        got = self._event.wait(timeout_s)
        self._event.clear()
        return got

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None


__all__ = ["DEFAULT_POLL_S", "CommitSignal"]
