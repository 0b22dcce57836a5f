"""The lock that makes one server the owner of a world: ``<data dir>/serve.lock``.

An exclusive ``flock`` held for the server's lifetime (the kernel releases it when the process dies, even
by SIGKILL, so a stale file never blocks a restart), with the holder's PID and address written into it for
operators and clients. A second server on the same data directory is refused with ``ServerRunning``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import IO, Any

from engine.errors import ServerRunning

LOCK_NAME = "serve.lock"


class ServeLock:
    """The held lock file; :meth:`release` (idempotent) unlinks and unlocks it."""

    def __init__(self, path: Path, handle: IO[str]) -> None:
        self.path = path
        self._handle: IO[str] | None = handle

    @classmethod
    def acquire(cls, data_dir: Path) -> ServeLock:
        """Take the lock of ``data_dir`` (created if missing) or raise ``ServerRunning`` naming the holder."""
        data_dir.mkdir(parents=True, exist_ok=True)
        path = data_dir / LOCK_NAME
        handle = path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = read_lock(path)
            handle.close()
            raise ServerRunning(str(path), holder.get("pid") if isinstance(holder.get("pid"), int) else None) from None
        os.chmod(path, 0o600)
        return cls(path, handle)

    def write(self, info: dict[str, Any]) -> None:
        """Record the holder's details (PID, URL, start time) in the file."""
        if self._handle is None:
            return
        self._handle.seek(0)
        self._handle.truncate()
        self._handle.write(json.dumps(info, sort_keys=True) + "\n")
        self._handle.flush()

    def release(self) -> None:
        handle, self._handle = self._handle, None
        if handle is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        handle.close()  # closing the descriptor drops the flock


def read_lock(path: Path) -> dict[str, Any]:
    """What the lock file at ``path`` says (``{}`` when missing, empty or unreadable)."""
    try:
        found = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


__all__ = ["LOCK_NAME", "ServeLock", "read_lock"]
