"""Agent tokens: what a token's holder proves (the agent), and the commands that issue and revoke one.

A token is the string ``pmw_<token_id>_<secret>``: the fixed prefix ``pmw_``, the token's id (an id as
:data:`~engine.models.common.ID_PATTERN` allows, e.g. ``tok_0199...``: it names the token in audit records,
lists and revocations, and is not secret), one ``_``, and the secret: 64 lowercase hex digits (32 random
bytes from :mod:`secrets`). The store keeps only the secret's sha256 (``agent_tokens.secret_sha256``); the
whole string is shown once, in :attr:`IssuedToken.token`, by the call that issued it.

``IssueToken`` and ``RevokeToken`` are the requests of :meth:`~engine.world.tokens.TokenCalls.issue_token`
and :meth:`~engine.world.tokens.TokenCalls.revoke_token` (command classes: fields exactly the World
method's parameters minus ``actor`` and ``op_id``; neither takes a cause nor is an agent effect).
"""

from __future__ import annotations

from enum import StrEnum

from engine.models.common import Id, Model, TimeUs, Version

#: What a token string starts with.
TOKEN_PREFIX = "pmw_"
#: Bytes of randomness in a secret (shown as twice as many hex digits).
SECRET_BYTES = 32
#: The default lifetime of a token: 90 days.
DEFAULT_EXPIRES_IN_S = 90 * 24 * 3600
#: The longest lifetime a token may be given (``None``, never expiring, is allowed besides): 10 years.
MAX_EXPIRES_IN_S = 10 * 365 * 24 * 3600
TOKEN_ISSUED = "token.issued"
TOKEN_REVOKED = "token.revoked"


class TokenScope(StrEnum):
    """What a token allows: ``read`` (reads only) or ``act`` (everything the agent's roles allow)."""

    READ = "read"
    ACT = "act"


class TokenStatus(StrEnum):
    """A token's status at a given time (derived from its row, never stored)."""

    ACTIVE = "active"
    EXPIRED = "expired"
    REVOKED = "revoked"


class TokenInfo(Model):
    """A token as lists and audit show it: everything but the secret and its hash."""

    token_id: Id
    agent_id: Id
    scope: TokenScope
    label: str | None = None
    issued_by: Id
    created_at_us: TimeUs
    expires_at_us: TimeUs | None = None
    revoked_at_us: TimeUs | None = None
    revoked_by: Id | None = None
    version: Version

    def status_at(self, now_us: int) -> TokenStatus:
        """Revoked, expired (at or after ``expires_at_us``) or active at ``now_us``."""
        if self.revoked_at_us is not None:
            return TokenStatus.REVOKED
        if self.expires_at_us is not None and now_us >= self.expires_at_us:
            return TokenStatus.EXPIRED
        return TokenStatus.ACTIVE


class IssuedToken(TokenInfo):
    """What :meth:`~engine.world.tokens.TokenCalls.issue_token` returns: the token's metadata and, from the
    call that issued it only, the token string (``token``; ``None`` on a replay of the same operation id)."""

    token: str | None = None


class TokenPrincipal(Model):
    """Who a token proves its holder is: the agent, through which token, with what scope, until when."""

    agent_id: Id
    token_id: Id
    scope: TokenScope
    expires_at_us: TimeUs | None = None


__all__ = ["DEFAULT_EXPIRES_IN_S", "MAX_EXPIRES_IN_S", "SECRET_BYTES", "TOKEN_ISSUED", "TOKEN_PREFIX",
           "TOKEN_REVOKED", "IssuedToken", "TokenInfo", "TokenPrincipal", "TokenScope",
           "TokenStatus"]
