"""Agent tokens: making a token string, and proving who presents one.

A token is ``pmw_<token_id>_<secret>`` (:mod:`engine.models.tokens`): the secret is 32 random bytes from
:mod:`secrets` as 64 lowercase hex digits; the store keeps only its sha256 (a fast hash is right for a
high-entropy secret: there is nothing to guess). :func:`authenticate` reads the store on every call, so a
revocation (or an expiry, or the agent's removal) takes effect on the next call, whichever process made it.

Every refusal is :class:`~engine.errors.Unauthenticated` with one of these reasons:

* ``missing``: no token given;
* ``malformed``: not of the form above (the token id is named only when the string parsed);
* ``invalid``: no such token id, or a wrong secret; the same reason and message for both, and the secret
  is compared in constant time (:func:`hmac.compare_digest`, also against a stand-in hash when the id is
  unknown), so a caller learns nothing about which ids exist;
* ``revoked``, ``expired``: only said to a caller that proved the secret;
* ``agent_unknown``: the token's agent no longer exists.

:class:`ProofCache` keeps recent proofs for a transport's *gate* only (the check made before a request's body
is read, on the event loop, without a store read): never for the proof a call is made under, which is
:func:`authenticate` every time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from collections import OrderedDict

from engine.errors import Unauthenticated
from engine.models.common import ID_PATTERN
from engine.models.tokens import SECRET_BYTES, TOKEN_PREFIX, TokenPrincipal, TokenScope
from store import Reader
from store.changes import WriteRequest

#: The longest token string looked at (prefix, the longest id, separator, secret).
MAX_TOKEN_CHARS = len(TOKEN_PREFIX) + 128 + 1 + 2 * SECRET_BYTES
_ID = re.compile(ID_PATTERN)
_SECRET = re.compile(rf"[0-9a-f]{{{2 * SECRET_BYTES}}}")
_STAND_IN = hashlib.sha256(b"pmw: no such token").hexdigest()  # compared against when the id is unknown


def new_secret() -> str:
    """A fresh secret: 32 random bytes from :mod:`secrets`, as 64 lowercase hex digits."""
    return secrets.token_hex(SECRET_BYTES)


def hash_secret(secret: str) -> str:
    """What the store keeps of a secret: its sha256, as 64 lowercase hex digits."""
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def token_string(token_id: str, secret: str) -> str:
    """The token string of ``token_id`` with ``secret``: ``pmw_<token_id>_<secret>``."""
    return f"{TOKEN_PREFIX}{token_id}_{secret}"


def parse_token(token: object) -> tuple[str, str]:
    """``(token_id, secret)`` of a token string; :class:`Unauthenticated` (``missing`` or ``malformed``)
    otherwise. The secret has no ``_``, so the id is everything between the prefix and the last ``_``."""
    if token is None or token == "":
        raise Unauthenticated("missing")
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS or not token.startswith(TOKEN_PREFIX):
        raise Unauthenticated("malformed")
    token_id, sep, secret = token[len(TOKEN_PREFIX):].rpartition("_")
    if not sep or not _ID.fullmatch(token_id):
        raise Unauthenticated("malformed")
    if not _SECRET.fullmatch(secret):
        raise Unauthenticated("malformed", token_id)
    return token_id, secret


def authenticate(read: Reader, token: str | None, now_us: int) -> TokenPrincipal:
    """The principal ``token`` proves at ``now_us``, read from the store now; :class:`Unauthenticated`
    (see the module docstring for the reasons) when it proves nothing. Reads only."""
    token_id, secret = parse_token(token)
    row = read.get("agent_tokens", token_id=token_id)
    stored = str(row["secret_sha256"]) if row is not None else _STAND_IN
    matches = hmac.compare_digest(hash_secret(secret).encode("ascii"), stored.encode("ascii"))
    if row is None or not matches:
        raise Unauthenticated("invalid", token_id)
    if row["revoked_at_us"] is not None:
        raise Unauthenticated("revoked", token_id)
    if row["expires_at_us"] is not None and now_us >= int(row["expires_at_us"]):
        raise Unauthenticated("expired", token_id)
    if read.get("agents", agent_id=row["agent_id"]) is None:
        raise Unauthenticated("agent_unknown", token_id)
    return TokenPrincipal(agent_id=row["agent_id"], token_id=token_id, scope=TokenScope(row["scope"]),
                          expires_at_us=row["expires_at_us"])


class ProofCache:
    """Recent successful proofs, keyed by token id and the sha256 of the secret that proved them, each good
    for at most ``ttl_us`` (of real time, whatever the world's clock) and only while the revocation epoch it
    was proven in holds.

    The epoch is bumped (:meth:`changed`, a ``Store.on_commit`` hook through :meth:`commit_hook`) by every
    commit of this process that touches ``agent_tokens`` or ``agents`` (a revocation, an issue, an agent
    changed), so a token revoked in this process is out of the cache at once; one revoked by another process
    is out within ``ttl_us``. Either way the cache answers only :meth:`get`, a gate: the call itself is always
    made under a proof read from the store (:func:`authenticate`), so a revoked token is refused on its very
    next call whatever the cache holds. Bounded (``size`` entries, the oldest dropped first); thread-safe."""

    TABLES = frozenset({"agent_tokens", "agents"})

    def __init__(self, ttl_us: int = 1_000_000, size: int = 4096) -> None:
        self.ttl_us = ttl_us
        self.size = size
        self.epoch = 0
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[str, TokenPrincipal, int, int]] = OrderedDict()

    @staticmethod
    def stamp() -> int:
        """The real time a proof is made at (monotonic microseconds): what :meth:`put` is given."""
        return time.monotonic_ns() // 1000

    def get(self, token: str | None, now_us: int) -> TokenPrincipal | None:
        """The principal ``token`` was proven to be within ``ttl_us`` in this epoch and still unexpired at
        ``now_us`` (the world's clock); None otherwise (a malformed token, another secret, never proven,
        stale: prove it from the store)."""
        try:
            token_id, secret = parse_token(token)
        except Unauthenticated:
            return None
        with self._lock:
            found = self._entries.get(token_id)
        if found is None:
            return None
        digest, principal, proven_at, epoch = found
        age = self.stamp() - proven_at
        if epoch != self.epoch or not 0 <= age < self.ttl_us:
            return None
        if principal.expires_at_us is not None and now_us >= principal.expires_at_us:
            return None
        if not hmac.compare_digest(hash_secret(secret).encode("ascii"), digest.encode("ascii")):
            return None
        return principal

    def put(self, token: str, principal: TokenPrincipal, proven_at: int, epoch: int) -> None:
        """Keep the proof of ``token`` begun at ``proven_at`` (:meth:`stamp`) in ``epoch``, both taken
        *before* the store was read: a change committed meanwhile leaves the entry stale."""
        _token_id, secret = parse_token(token)
        with self._lock:
            if epoch != self.epoch:
                return
            self._entries[principal.token_id] = (hash_secret(secret), principal, proven_at, epoch)
            self._entries.move_to_end(principal.token_id)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def forget(self, token: str | None) -> None:
        """Drop the entry of ``token``'s id (a token the store just refused)."""
        try:
            token_id, _secret = parse_token(token)
        except Unauthenticated:
            return
        with self._lock:
            self._entries.pop(token_id, None)

    def changed(self) -> None:
        """A token or an agent changed: every entry is stale."""
        with self._lock:
            self.epoch += 1
            self._entries.clear()

    def commit_hook(self, request: WriteRequest) -> None:
        """For ``Store.on_commit``: :meth:`changed` after a commit that touched a token or an agent."""
        if any(change.table in self.TABLES for change in request.changes):
            self.changed()


def scope_allows(scope: TokenScope | str, write: bool) -> bool:
    """Whether a token of ``scope`` may make a call that writes (``write``) or only reads: ``read`` tokens
    read, ``act`` tokens do both (what the agent's roles allow is the PDP's to decide). An unknown scope
    allows nothing."""
    if scope == TokenScope.ACT:
        return True
    if scope == TokenScope.READ:
        return not write
    return False


__all__ = ["MAX_TOKEN_CHARS", "ProofCache", "authenticate", "hash_secret", "new_secret", "parse_token", "scope_allows",
           "token_string"]
