"""Read-set tokens: what a read observed, so that a write resting on it is refused if any of it changed since
(seed 004, read-set validated commits; issue 16 item 6).

A read of shared state (``get_state``; the projection through :func:`token_of`) answers with a *read
token*: the ``(key, version)`` pairs it saw, signed. A write that passes the token
(``compare_and_set_state``'s ``read_token``) commits only if every key of the read set is still at the
version it was read at: the check is a :class:`ReadSetFence`, which the gateway runs inside the write's own
transaction (:mod:`store.fences`; on PostgreSQL the rows are read ``FOR UPDATE`` in key order, so nothing
changes them between the check and the commit; on SQLite the write transaction is ``BEGIN IMMEDIATE``). A
key that changed, or was read absent (version 0) and exists now, refuses the write with :class:`StaleRead`
naming each change; nothing is written. That holds even when the write's ``expected_version`` was patched
to the current version: patching and resending is exactly what the token refuses (re-read and recompute
instead).

The token is ``rs1.<payload>.<mac>``: the payload is the read set as sorted JSON (base64url), the mac its
HMAC-SHA256 under the **world's key** (:func:`world_key`): 32 random bytes drawn once per world by migration
11 into the runtime's ``runtime_secrets`` table, which no World read, snapshot, log view or transport
reaches (it is not in the schema's metadata, and no event carries it). So a token issued by one process (a
worker, ``pmw serve``) verifies in every other process over the same world, and no agent can compute one: a
token whose read set was edited (a version raised to the current one to pass) fails the mac and is
``InvalidInput`` on ``read_token``, as is a token of another world. :func:`issue` without a key signs with
this process's own key (:data:`_KEY`, drawn at import), which only this process accepts (in-process callers
that build a read set by hand). No token: the write is checked on ``expected_version`` alone, as before.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import threading
import weakref
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from engine.commands.state import MAX_READ_TOKEN_CHARS
from engine.errors import InvalidInput, StaleRead
from store.database import placeholder
from store.gateway import runtime_secret
from store.migrations import READ_SET_SECRET

if TYPE_CHECKING:
    from store import Door, Store
    from store.reads import Reader

TOKEN_PREFIX = "rs1"
#: The most keys one read set may hold (a token stays a header-sized string).
MAX_READ_SET = 256
MAX_TOKEN_CHARS = MAX_READ_TOKEN_CHARS
_KEY = secrets.token_bytes(32)  # this process's own key, for tokens issued without a world key (module docstring)
_world_keys: weakref.WeakKeyDictionary[Reader, bytes] = weakref.WeakKeyDictionary()
_keys_lock = threading.Lock()


def world_key(reader: Reader) -> bytes:
    """The key that signs the read tokens of the world ``reader`` reads (module docstring): read once from the
    runtime's secrets (on this thread's open transaction, if any), then remembered for the reader."""
    with _keys_lock:
        known = _world_keys.get(reader)
    if known is not None:
        return known
    with reader._cursor() as cur:  # the reader's own cursor: inside its snapshot or write transaction too
        key = bytes.fromhex(runtime_secret(cur, reader._db.dialect, READ_SET_SECRET))
    with _keys_lock:
        return _world_keys.setdefault(reader, key)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(payload: str, key: bytes) -> str:
    return _b64(hmac.new(key, f"{TOKEN_PREFIX}.{payload}".encode("ascii"), hashlib.sha256).digest())


def issue(observed: Iterable[tuple[str, int]], *, key: bytes | None = None) -> str:
    """The read token of the ``(key, version)`` pairs a read saw (version 0: the key was absent), signed
    with ``key`` (the world's, :func:`world_key`; ``None``: this process's own). A key seen twice must have
    been seen at one version (``InvalidInput`` otherwise); at most :data:`MAX_READ_SET` keys."""
    pairs: dict[str, int] = {}
    for name, version in observed:
        if pairs.setdefault(name, version) != version:
            raise InvalidInput("read_set", f"key {name!r} seen at versions {pairs[name]} and {version}")
    if not 1 <= len(pairs) <= MAX_READ_SET:
        raise InvalidInput("read_set", f"{len(pairs)} keys: a read set holds 1 to {MAX_READ_SET}")
    payload = _b64(orjson.dumps(sorted(pairs.items())))
    return f"{TOKEN_PREFIX}.{payload}.{_mac(payload, _KEY if key is None else key)}"


def _signed(payload: str, mac: str, key: bytes | None) -> bool:
    """Whether ``mac`` is ``payload``'s under the world's ``key`` or this process's own."""
    return (key is not None and hmac.compare_digest(mac, _mac(payload, key))) or hmac.compare_digest(
        mac, _mac(payload, _KEY))


def verify(token: str, *, key: bytes | None = None) -> dict[str, int]:
    """The read set a token holds (key -> version read), if it was signed with the world's ``key`` (by any
    process) or by this process's own; ``InvalidInput`` on ``read_token`` for anything else (malformed,
    edited, another world's, or another process's token signed without a world key)."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
        raise InvalidInput("read_token", "not a read token")
    prefix, _, rest = token.partition(".")
    payload, _, mac = rest.partition(".")
    if prefix != TOKEN_PREFIX or not payload or not mac or not _signed(payload, mac, key):
        raise InvalidInput("read_token", "not a read token this server issued (re-read to get one)")
    try:
        pairs = orjson.loads(_unb64(payload))
    except (binascii.Error, ValueError) as exc:  # signed by us, so never; but never trusted blindly either
        raise InvalidInput("read_token", "not a read token") from exc
    return {str(k): int(v) for k, v in pairs}


#: the keys of a read set checked by one statement (well under SQLite's bound parameters)
CHECK_CHUNK = 500


@dataclass(frozen=True)
class ReadSetFence:
    """Commit only while every key of ``observed`` (key -> version read, 0: absent) is still at that version
    in ``state_entries`` (checked in the write's transaction, see the module docstring)."""

    observed: tuple[tuple[str, int], ...]

    def check(self, cur: Any, dialect: str) -> None:
        """Raise :class:`StaleRead` naming every key of the read set that changed: one statement for each
        :data:`CHECK_CHUNK` keys (on PostgreSQL their rows locked in key order, so concurrent fenced writers
        do not deadlock)."""
        lock = " ORDER BY key FOR UPDATE" if dialect == "postgresql" else ""
        current: dict[str, int] = {}
        for lo in range(0, len(self.observed), CHECK_CHUNK):  # sorted by key: the chunks lock in key order
            chunk = self.observed[lo:lo + CHECK_CHUNK]
            names = [f"k{n}" for n in range(len(chunk))]
            marks = ", ".join(placeholder(dialect, n) for n in names)
            cur.execute(f"SELECT key, version FROM state_entries WHERE key IN ({marks}){lock}",
                        dict(zip(names, (k for k, _ in chunk), strict=True)))
            current.update((str(k), int(v)) for k, v in cur.fetchall())
        changed = [{"key": key, "read_version": version, "current_version": current.get(key, 0)}
                   for key, version in self.observed if current.get(key, 0) != version]  # sorted by key
        if changed:
            raise StaleRead(changed)

    def narrowed(self, keys: Iterable[str] | None) -> ReadSetFence | None:
        """The fence of the keys of this read set a decision says it rests on (``AgentDecision.reads``):
        ``None`` keeps every key; no keys, no fence. A key this read never saw is ``InvalidInput`` on
        ``decision.reads`` (a fence on an unseen key could only refuse, or tell what the reader may not
        see)."""
        if keys is None:
            return self if self.observed else None
        wanted = set(keys)
        kept = tuple(pair for pair in self.observed if pair[0] in wanted)
        if len(kept) != len(wanted):
            unseen = sorted(wanted - {k for k, _ in kept})
            raise InvalidInput("decision.reads", f"names keys the projection did not show: {unseen[:10]}")
        return ReadSetFence(kept) if kept else None


def fence(token: str, *, key: bytes | None = None) -> ReadSetFence:
    """The fence of a read token (:func:`verify` under ``key``): enter it with ``Store.fenced`` around the
    commit of the writes that rest on the read (the run loop: around ``commit_planned`` of a wake's effects)."""
    return ReadSetFence(tuple(sorted(verify(token, key=key).items())))


def fenced(store: Store | Door, token: str | None, *, key: bytes | None = None) -> AbstractContextManager[None]:
    """Within this block, this thread's commits on ``store`` are refused with :class:`StaleRead` unless the
    read set of ``token`` still holds, checked in each commit's own transaction (no token: no check).
    ``InvalidInput`` at once on a token not signed with the world's ``key`` (nor by this process). The run
    loop wraps ``commit_planned`` of a wake's effects in it, with the token of the projection the agent
    decided on."""
    if token is None:
        return nullcontext()
    return store.fenced(fence(token, key=key))


def projection_fence(entries: Iterable[Any], *, key: bytes | None = None) -> tuple[str | None, ReadSetFence | None]:
    """The read token of the state entries a projection showed (:func:`token_of`, signed with the world's
    ``key``) and the fence a write resting on it commits under (:func:`fence` of that token); a view that
    showed more keys than a token holds (:data:`MAX_READ_SET`: a widened state section) is fenced on all of
    them without a token. ``(None, None)`` for a view that showed no state."""
    pairs = sorted({(str(e.key), int(e.version)) for e in entries})
    if not pairs:
        return None, None
    if len(pairs) > MAX_READ_SET:
        return None, ReadSetFence(tuple(pairs))
    token = issue(pairs, key=key)
    return token, fence(token, key=key)


def observed_of(rows: Iterable[Mapping[str, Any]]) -> list[tuple[str, int]]:
    """The ``(key, version)`` pairs of state rows (or entries dumped as dicts), for :func:`issue`."""
    return [(str(r["key"]), int(r["version"])) for r in rows]


def token_of(entries: Iterable[Any], *, key: bytes | None = None) -> str | None:
    """The read token of the state entries a read showed (``StateEntry`` models: the projection's ``state``
    section), signed with ``key`` (:func:`issue`); ``None`` when it showed none."""
    pairs = [(str(e.key), int(e.version)) for e in entries]
    return issue(pairs, key=key) if pairs else None


__all__ = ["MAX_READ_SET", "MAX_TOKEN_CHARS", "ReadSetFence", "StaleRead", "fence", "fenced", "issue",
           "observed_of", "projection_fence", "token_of", "verify", "world_key"]
