"""Child: a stream of idempotent commits, to be SIGKILLed by the parent at a random point.

Usage: ``python -m tests.procs.committer URL ACTOR KEY LOG_FILE MAX_OPS``

Before each call it appends ``{"announce": op_id, "key", "expected_version", "value"}`` to ``LOG_FILE``
(one ``write``; the request it is about to send), then calls ``compare_and_set_state`` with
``op_id = f"inc-{i}"`` and, once the call has returned, appends ``{"done": op_id, "version": ...}``.
The first line describes the connection (for SQLite: journal mode and ``synchronous`` as set by the
store's defaults). Stops after ``MAX_OPS`` operations (the parent kills it long before).
"""

from __future__ import annotations

import sys
from typing import Any

from tests.procs import emit


def _sqlite_pragmas(book: Any) -> dict[str, Any]:
    engine = book.store.db.engine
    with engine.connect() as conn:
        journal = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
        synchronous = conn.exec_driver_sql("PRAGMA synchronous").scalar()
    return {"journal_mode": journal, "synchronous": synchronous}


def main(argv: list[str]) -> int:
    url, actor, key, log_file, max_ops = argv
    from engine.policy.enforcement import LocalScopeRules
    from engine.world.book import open_world

    book = open_world(url, policy=LocalScopeRules())
    world = book.world  # default DatabaseOptions: SQLite WAL, synchronous=NORMAL
    try:
        info: dict[str, Any] = {"dialect": book.store.dialect}
        if book.store.dialect == "sqlite":
            info.update(_sqlite_pragmas(book))
        emit(log_file, hello=True, **info)
        entry = world.get_state(key)
        version, value = entry.version, entry.value
        for i in range(int(max_ops)):
            op_id = f"inc-{i}"
            emit(log_file, announce=op_id, key=key, expected_version=version, value=value + 1)
            entry = world.compare_and_set_state(actor, key, version, value + 1, op_id=op_id)
            version, value = entry.version, entry.value
            emit(log_file, done=op_id, version=version)
        return 0
    finally:
        book.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
