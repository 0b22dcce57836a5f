"""The SQL side of ``pmw backup``: a consistent copy of a SQLite world taken while it is in use, then verified.

:func:`copy_sqlite` uses SQLite's online backup API (``sqlite3.Connection.backup``) in one step: the whole
database is read inside one read transaction, so the copy is the database as of one commit, every
transaction in it whole or absent, whatever other processes (a running ``pmw serve``, workers) commit
meanwhile. In WAL mode that read transaction blocks no writer; it only holds back checkpoints until it ends.
The source is opened ``mode=rw`` (never created: a missing database is ``NotFound``) with the world's busy
timeout; the copy must not exist yet.

:func:`verify_copy` then opens the copy on its own: ``PRAGMA integrity_check`` must answer ``ok`` and its
schema version must equal the source's; it reports the copy's last event and policy epoch through the store's
own reader (:class:`store.Store`, never migrating the copy). PostgreSQL is not copied here: ``pg_dump`` /
``pg_basebackup`` do that (``docs/operations.md``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from engine.errors import BackupUnverified, NotFound, StoreUnavailable
from store import Store


@dataclass(frozen=True)
class SqliteCopy:
    """A verified copy: its path, size, schema version, the last event it holds (``last_seq``, 0 for none)
    and the policy epoch it records as current (None if no PDP ever governed the world)."""

    path: Path
    bytes: int
    schema_version: int
    last_seq: int
    policy_epoch: str | None


def _schema_version(conn: sqlite3.Connection) -> int:
    """The highest applied migration of an open SQLite database (0 when it has no migrations table)."""
    known = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'")
    if known.fetchone() is None:
        return 0
    row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _integrity(conn: sqlite3.Connection) -> list[str]:
    return [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]


def integrity_check(path: Path) -> list[str]:
    """What ``PRAGMA integrity_check`` answers for the SQLite file ``path`` (``["ok"]`` for a sound
    database); ``StoreUnavailable`` when it cannot be opened. The file is never created, nothing is written
    to it, and a WAL database leaves no ``-wal``/``-shm`` behind (a read-only open would)."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True, isolation_level=None)
        try:
            return _integrity(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"cannot check {path}: {exc}") from exc


def copy_sqlite(source: Path, dest: Path, *, busy_timeout_ms: int = 30_000) -> int:
    """Copy the SQLite database ``source`` to the new file ``dest`` (which must not exist) with the online
    backup API, as of one commit; returns the source's schema version read in the same session.
    ``NotFound`` when ``source`` is not a database file; ``StoreUnavailable`` when SQLite fails (the partial
    ``dest`` is then removed)."""
    if not source.is_file():
        raise NotFound("database", str(source))
    if dest.exists():
        raise FileExistsError(str(dest))  # the caller claims a fresh directory first: a programming error
    try:
        src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=rw", uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"cannot open {source} for a backup: {exc}") from exc
    try:
        src.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        version = _schema_version(src)
        dst = sqlite3.connect(dest, isolation_level=None)
        try:
            src.backup(dst)  # pages=-1: every page in one step, one read transaction: one consistent view
        finally:
            dst.close()
    except sqlite3.Error as exc:
        _remove(dest)
        raise StoreUnavailable(f"the backup of {source} failed: {exc}") from exc
    finally:
        src.close()
    return version


def verify_copy(dest: Path, expected_schema_version: int) -> SqliteCopy:
    """Open the copy at ``dest`` alone and check it: ``PRAGMA integrity_check`` is ``ok`` and the schema
    version is ``expected_schema_version``; else ``BackupUnverified`` naming the check. The copy's last
    event and current policy epoch come from the store's reader (the copy is not migrated)."""
    try:
        conn = sqlite3.connect(f"{dest.resolve().as_uri()}?mode=rw", uri=True, isolation_level=None)
        try:
            found = _integrity(conn)
            version = _schema_version(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise BackupUnverified(str(dest), "integrity_check", str(exc)[:300]) from exc
    if found != ["ok"]:
        raise BackupUnverified(str(dest), "integrity_check", "; ".join(found)[:300])
    if version != expected_schema_version:
        raise BackupUnverified(str(dest), "schema_version", f"{version}, the source has {expected_schema_version}")
    store = Store(f"sqlite:///{dest.resolve()}")
    try:
        current = store.read.current_policy_epoch()
        last_seq = store.read.last_seq()
    finally:
        store.close()
    return SqliteCopy(path=dest, bytes=dest.stat().st_size, schema_version=version, last_seq=last_seq,
                      policy_epoch=str(current["epoch"]) if current else None)


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


__all__ = ["SqliteCopy", "copy_sqlite", "integrity_check", "verify_copy"]
