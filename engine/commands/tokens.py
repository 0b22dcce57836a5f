"""Agent tokens: issuing and revoking them (listing is a read: ``World.list_tokens``)."""

from __future__ import annotations

from pydantic import Field

from engine.commands.base import Command
from engine.models.common import Id, Name
from engine.models.tokens import (
    DEFAULT_EXPIRES_IN_S,
    MAX_EXPIRES_IN_S,
    TOKEN_ISSUED,
    TOKEN_REVOKED,
    TokenScope,
)


class IssueToken(Command):
    """Issue a token for an agent (policy action ``agent:issue_token``: a live governor, for any agent;
    never an agent for itself). The token string is returned once (``token``) and never stored: the store
    keeps the sha256 of its secret. ``expires_in_s``: lifetime in seconds (default 90 days; ``None``: never
    expires). A retry with the same ``op_id`` returns the token's metadata without the secret."""

    name = "issue_token"
    events = (TOKEN_ISSUED,)
    cause_param = None
    ref_field = "token_id"

    agent_id: Id = Field(description="The agent the token authenticates as.")
    scope: TokenScope = Field(default=TokenScope.ACT, description="read: reads only; act: what the agent may do.")
    expires_in_s: int | None = Field(default=DEFAULT_EXPIRES_IN_S, ge=1, le=MAX_EXPIRES_IN_S, description=(
        "Lifetime in seconds (None: never expires)."))
    label: Name | None = Field(default=None, description="A note for lists and audit.")


class RevokeToken(Command):
    """Revoke a token (policy action ``agent:revoke_token`` on the token's agent: a live governor, or the
    agent itself); it is refused from the next call on, in every process. Revoking a revoked token is an
    illegal transition."""

    name = "revoke_token"
    events = (TOKEN_REVOKED,)
    cause_param = None
    ref_field = "token_id"

    token_id: Id = Field(description="The token's id (the part of the token string between pmw_ and its secret).")


__all__ = ["IssueToken", "RevokeToken"]
