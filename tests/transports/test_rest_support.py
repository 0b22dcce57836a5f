"""What the REST transport tests share (no tests here): raw HTTP calls, and the store's row counts read from
the SQLite file read-only (every table, and the sum of versions of each versioned table), to show that a
refused request wrote nothing. The file is read with ``sqlite3`` itself, not the store's code: an oracle
independent of what is tested."""

from __future__ import annotations

import http.client
import json
import sqlite3  # noqa: TID251 - the oracle reads the file itself, read-only
import urllib.parse
from pathlib import Path
from typing import Any

from tests.service.support import Served

#: what the fuzzing agent may do beyond the defaults (so accepted requests reach the World's own checks)
AGENT_CAPABILITIES = ("state.write", "task.create", "task.work", "artifact.write", "handoff.create",
                      "memory.write", "message.send", "wake.enqueue")


def row_counts(db: Path) -> dict[str, int]:
    """Every table's row count (``<table>``) and, for a table with a ``version`` column, the sum of its
    versions (``<table>.version``), read from the SQLite file opened read-only."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        tables = [row[0] for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        found: dict[str, int] = {}
        for name in tables:
            columns = {row[1] for row in connection.execute(f'PRAGMA table_info("{name}")')}
            versions = ', coalesce(sum("version"), 0)' if "version" in columns else ""
            row = connection.execute(f'SELECT count(*){versions} FROM "{name}"').fetchone()
            found[name] = int(row[0])
            if versions:
                found[f"{name}.version"] = int(row[1])
        return found
    finally:
        connection.close()


def changed(before: dict[str, int], after: dict[str, int]) -> dict[str, tuple[int, int]]:
    """The tables whose counts differ (before, after)."""
    return {t: (before.get(t, 0), after.get(t, 0)) for t in sorted(set(before) | set(after))
            if before.get(t, 0) != after.get(t, 0)}


def denial_only(diff: dict[str, tuple[int, int]]) -> bool:
    """Whether ``diff`` is exactly the one ``policy.denied`` audit event a PDP denial leaves (nothing else)."""
    return set(diff) == {"events"} and diff["events"][1] - diff["events"][0] == 1


def request(served: Served, method: str, path: str, body: bytes | None = None, token: str | None = None,
            **headers: str) -> tuple[int, dict[str, str], Any]:
    """One raw HTTP request; (status, headers lower-cased, JSON answer or None)."""
    connection = http.client.HTTPConnection(urllib.parse.urlsplit(served.url).netloc, timeout=60)
    sent = {"Content-Type": "application/json", **{k.replace("_", "-"): v for k, v in headers.items()}}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    try:
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        raw = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, json.loads(raw) if raw else None
    finally:
        connection.close()


def call(served: Served, method: str, path: str, body: Any = None, token: str | None = None,
         **headers: str) -> tuple[int, dict[str, str], Any]:
    """:func:`request` with a JSON body."""
    return request(served, method, path, None if body is None else json.dumps(body).encode(), token, **headers)


__all__ = ["AGENT_CAPABILITIES", "call", "changed", "denial_only", "request", "row_counts"]
