"""Read-set tokens: what a read observed, so that a write resting on it is refused if any of it changed since
(seed 004, read-set validated commits; issue 16 item 6).

A read of shared state (``get_state``; the projection through :func:`issue`) answers with a *read token*:
the ``(key, version)`` pairs it saw, signed. A write that passes the token (``compare_and_set_state``'s
``read_token``) commits only if every key of the read set is still at the version it was read at: the check
is a :class:`ReadSetFence`, which the gateway runs inside the write's own transaction (:mod:`store.fences`;
on PostgreSQL the rows are read ``FOR UPDATE`` in key order, so nothing changes them between the check and
the commit; on SQLite the write transaction is ``BEGIN IMMEDIATE``). A key that changed, or was read absent
(version 0) and exists now, refuses the write with :class:`StaleRead` naming each change; nothing is written.
That holds even when the write's ``expected_version`` was patched to the current version: patching and
resending is exactly what the token refuses (re-read and recompute instead).

The token is ``rs1.<payload>.<mac>``: the payload is the read set as sorted JSON (base64url), the mac its
HMAC-SHA256 under this process's key (:data:`_KEY`, 32 random bytes drawn at import). A token whose read set
was edited (a version raised to the current one to pass) fails the mac and is ``InvalidInput`` on
``read_token``, like a token issued by another process: the key is not persisted yet, so a token is good only
on the server (process) that issued it, which is where a transport's reads and writes run. No token: the
write is checked on ``expected_version`` alone, as before.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from engine.commands.state import MAX_READ_TOKEN_CHARS
from engine.errors import InvalidInput, StaleRead
from store.database import placeholder

if TYPE_CHECKING:
    from store import Door, Store

TOKEN_PREFIX = "rs1"
#: The most keys one read set may hold (a token stays a header-sized string).
MAX_READ_SET = 256
MAX_TOKEN_CHARS = MAX_READ_TOKEN_CHARS
_KEY = secrets.token_bytes(32)  # this process's signing key (see the module docstring)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(payload: str) -> str:
    return _b64(hmac.new(_KEY, f"{TOKEN_PREFIX}.{payload}".encode("ascii"), hashlib.sha256).digest())


def issue(observed: Iterable[tuple[str, int]]) -> str:
    """The read token of the ``(key, version)`` pairs a read saw (version 0: the key was absent). A key seen
    twice must have been seen at one version (``InvalidInput`` otherwise); at most :data:`MAX_READ_SET` keys."""
    pairs: dict[str, int] = {}
    for key, version in observed:
        if pairs.setdefault(key, version) != version:
            raise InvalidInput("read_set", f"key {key!r} seen at versions {pairs[key]} and {version}")
    if not 1 <= len(pairs) <= MAX_READ_SET:
        raise InvalidInput("read_set", f"{len(pairs)} keys: a read set holds 1 to {MAX_READ_SET}")
    payload = _b64(orjson.dumps(sorted(pairs.items())))
    return f"{TOKEN_PREFIX}.{payload}.{_mac(payload)}"


def verify(token: str) -> dict[str, int]:
    """The read set a token signed by this process holds (key -> version read); ``InvalidInput`` on
    ``read_token`` for anything else (malformed, edited, or issued by another process)."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
        raise InvalidInput("read_token", "not a read token")
    prefix, _, rest = token.partition(".")
    payload, _, mac = rest.partition(".")
    if prefix != TOKEN_PREFIX or not payload or not mac or not hmac.compare_digest(mac, _mac(payload)):
        raise InvalidInput("read_token", "not a read token this server issued (re-read to get one)")
    try:
        pairs = orjson.loads(_unb64(payload))
    except (binascii.Error, ValueError) as exc:  # signed by us, so never; but never trusted blindly either
        raise InvalidInput("read_token", "not a read token") from exc
    return {str(k): int(v) for k, v in pairs}


@dataclass(frozen=True)
class ReadSetFence:
    """Commit only while every key of ``observed`` (key -> version read, 0: absent) is still at that version
    in ``state_entries`` (checked in the write's transaction, see the module docstring)."""

    observed: tuple[tuple[str, int], ...]

    def check(self, cur: Any, dialect: str) -> None:
        """Raise :class:`StaleRead` naming every key of the read set that changed."""
        lock = " FOR UPDATE" if dialect == "postgresql" else ""
        changed: list[dict[str, Any]] = []
        for key, version in self.observed:  # sorted by key: concurrent fenced writers lock in one order
            cur.execute(f"SELECT version FROM state_entries WHERE key = {placeholder(dialect, 'k')}{lock}",
                        {"k": key})
            row = cur.fetchone()
            current = int(row[0]) if row is not None else 0
            if current != version:
                changed.append({"key": key, "read_version": version, "current_version": current})
        if changed:
            raise StaleRead(changed)


def fence(token: str) -> ReadSetFence:
    """The fence of a read token (:func:`verify`): enter it with ``Store.fenced`` around the commit of the
    writes that rest on the read (the run loop: around ``commit_planned`` of a wake's effects)."""
    return ReadSetFence(tuple(sorted(verify(token).items())))


def fenced(store: Store | Door, token: str | None) -> AbstractContextManager[None]:
    """Within this block, this thread's commits on ``store`` are refused with :class:`StaleRead` unless the
    read set of ``token`` still holds, checked in each commit's own transaction (no token: no check).
    ``InvalidInput`` at once on a token this process did not issue. The run loop wraps ``commit_planned``
    of a wake's effects in it, with the token of the projection the agent decided on."""
    if token is None:
        return nullcontext()
    return store.fenced(fence(token))


def observed_of(rows: Iterable[Mapping[str, Any]]) -> list[tuple[str, int]]:
    """The ``(key, version)`` pairs of state rows (or entries dumped as dicts), for :func:`issue`."""
    return [(str(r["key"]), int(r["version"])) for r in rows]


def token_of(entries: Iterable[Any]) -> str | None:
    """The read token of the state entries a read showed (``StateEntry`` models: the projection's ``state``
    section); ``None`` when it showed none."""
    pairs = [(str(e.key), int(e.version)) for e in entries]
    return issue(pairs) if pairs else None


__all__ = ["MAX_READ_SET", "MAX_TOKEN_CHARS", "ReadSetFence", "StaleRead", "fence", "fenced", "issue",
           "observed_of", "token_of", "verify"]
