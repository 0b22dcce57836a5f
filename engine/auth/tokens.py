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
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from engine.errors import Unauthenticated
from engine.models.common import ID_PATTERN
from engine.models.tokens import SECRET_BYTES, TOKEN_PREFIX, TokenPrincipal, TokenScope
from store import Reader

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


def scope_allows(scope: TokenScope | str, write: bool) -> bool:
    """Whether a token of ``scope`` may make a call that writes (``write``) or only reads: ``read`` tokens
    read, ``act`` tokens do both (what the agent's roles allow is the PDP's to decide). An unknown scope
    allows nothing."""
    if scope == TokenScope.ACT:
        return True
    if scope == TokenScope.READ:
        return not write
    return False


__all__ = ["MAX_TOKEN_CHARS", "authenticate", "hash_secret", "new_secret", "parse_token", "scope_allows",
           "token_string"]
