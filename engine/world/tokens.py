"""Agent tokens as World calls: issue (a governor's act), revoke, list; written through the gateway.

Every call is decided by the PDP on the kind ``agent``, for the agent the token authenticates as
(``policies/resources/agent.yaml``): ``issue_token`` (a live governor, for any agent; no agent for itself),
``revoke_token`` and ``list_tokens`` (a live governor for any agent; an agent for its own tokens).

The secret is made while planning, and only its sha256 goes into the ``agent_tokens`` row. It is in no
operation ledger entry, event payload or result stored (the stored result is :class:`TokenInfo`), and the
row's hash is never shown by the log (``engine.world.log_view``). The token string is returned once, by the
call whose plan made it; a retry of the same ``op_id`` (or a concurrent twin that committed first) answers
the metadata with ``token=None``. Checking a presented token is :func:`engine.auth.tokens.authenticate`.
"""

from __future__ import annotations

from typing import Any

from engine.auth.tokens import hash_secret, new_secret, token_string
from engine.commands.tokens import IssueToken, RevokeToken
from engine.errors import IllegalTransition
from engine.models.tokens import (
    DEFAULT_EXPIRES_IN_S,
    TOKEN_ISSUED,
    TOKEN_REVOKED,
    IssuedToken,
    TokenInfo,
    TokenStatus,
)
from engine.policy.enforcement import Check
from engine.validation import build, check_id
from engine.world.core import Plan, WorldCore
from store import Insert, Update

#: The token id prefix (``self.ids.new("tok")``).
TOKEN_ID_PREFIX = "tok"
#: The World's token calls and the event types each writes (``engine.world.event_types``).
TOKEN_CALL_EVENTS: dict[str, tuple[str, ...]] = {IssueToken.name: IssueToken.events,
                                                 RevokeToken.name: RevokeToken.events}


def token_info(row: dict[str, Any]) -> TokenInfo:
    """The metadata of an ``agent_tokens`` row (everything but the hash)."""
    return TokenInfo.model_validate({k: v for k, v in row.items() if k in TokenInfo.model_fields})


class TokenCalls(WorldCore):
    def issue_token(self, actor: str, agent_id: str, *, scope: str = "act",
                    expires_in_s: int | None = DEFAULT_EXPIRES_IN_S, label: str | None = None,
                    op_id: str | None = None) -> IssuedToken:
        """Issue a token for ``agent_id`` (policy action ``agent:issue_token``: a live governor). Returns its
        metadata and, this once, the token string (``token``: ``pmw_<token_id>_<secret>``); the store keeps
        only the sha256 of the secret. ``scope``: ``read`` (reads only) or ``act`` (everything the agent's
        roles allow). ``expires_in_s``: lifetime in seconds from now (default 90 days; ``None``: never).
        A replay of the same ``op_id`` returns the metadata with ``token=None``; the secret cannot be had
        again (issue a new token)."""
        req = build(IssueToken, agent_id=agent_id, scope=scope, expires_in_s=expires_in_s, label=label)
        made: dict[str, Any] = {}

        def plan(now: int) -> Plan:
            agent = self._row("agents", "agent", req.agent_id, agent_id=req.agent_id)
            token_id = self.ids.new(TOKEN_ID_PREFIX)
            secret = new_secret()
            expires = now + req.expires_in_s * 1_000_000 if req.expires_in_s is not None else None
            info = TokenInfo(token_id=token_id, agent_id=req.agent_id, scope=req.scope, label=req.label,
                             issued_by=actor, created_at_us=now, expires_at_us=expires, version=1)
            row = {**info.model_dump(mode="json"), "secret_sha256": hash_secret(secret)}
            made.update(info=info, token=token_string(token_id, secret))
            return Plan(TOKEN_ISSUED, "token", token_id, info,
                        [Insert("agent_tokens", row, "token", token_id)],
                        payload={"token_id": token_id, "agent_id": req.agent_id, "scope": req.scope.value,
                                 "expires_at_us": expires},
                        resulting_version=1, checks=[Check("agent", req.agent_id, "issue_token", agent)])
        done = self._write(IssueToken.name, actor, req, plan, TokenInfo, op_id=op_id, cause=None)
        token = made["token"] if made.get("info") is done else None  # only the call whose plan committed
        return IssuedToken(**done.model_dump(), token=token)

    def revoke_token(self, actor: str, token_id: str, *, op_id: str | None = None) -> TokenInfo:
        """Revoke ``token_id`` (policy action ``agent:revoke_token`` on the token's agent: a live governor,
        or the agent itself): refused by :func:`~engine.auth.tokens.authenticate` from the next call on.
        A token already revoked is ``IllegalTransition``; an unknown id is ``NotFound``."""
        req = build(RevokeToken, token_id=token_id)

        def plan(now: int) -> Plan:
            row = self._row("agent_tokens", "token", req.token_id, token_id=req.token_id)
            info = token_info(row)
            agent = self._row("agents", "agent", info.agent_id, agent_id=info.agent_id)
            check = Check("agent", info.agent_id, "revoke_token", agent)
            if info.revoked_at_us is not None:
                self._authorize(actor, [check], RevokeToken.name)  # who may not revoke it learns nothing more
                raise IllegalTransition("token", req.token_id, TokenStatus.REVOKED.value, "revoke")
            values = {"revoked_at_us": now, "revoked_by": actor}
            new = info.model_copy(update={**values, "version": info.version + 1})
            return Plan(TOKEN_REVOKED, "token", req.token_id, new,
                        [Update("agent_tokens", {"token_id": req.token_id}, info.version, values, "token",
                                req.token_id)],
                        payload={"token_id": req.token_id, "agent_id": info.agent_id, "scope": info.scope.value,
                                 "expires_at_us": info.expires_at_us},
                        base_version=info.version, resulting_version=new.version, checks=[check])
        return self._write(RevokeToken.name, actor, req, plan, TokenInfo, op_id=op_id, cause=None)

    def list_tokens(self, actor: str, *, agent_id: str | None = None) -> list[TokenInfo]:
        """The tokens ``actor`` may list (policy action ``agent:list_tokens`` on each token's agent: a
        governor any agent's, an agent its own), of ``agent_id`` only when given (then a refusal is
        ``PolicyDenied``), oldest first. Never the secret or its hash; revoked and expired tokens included
        (``TokenInfo.status_at`` tells them apart)."""
        who = check_id("actor", actor)
        where: dict[str, Any] = {}
        if agent_id is not None:
            where["agent_id"] = check_id("agent_id", agent_id)
            if self._policy.external:
                agent = self._row("agents", "agent", agent_id, agent_id=agent_id)
                self._authorize(who, [Check("agent", agent_id, "list_tokens", agent)], "list_tokens")
        rows = self._store.read.rows("agent_tokens", where, order_by=("created_at_us", "token_id"))
        if agent_id is None and self._policy.external and rows:
            agents = sorted({str(r["agent_id"]) for r in rows})
            agent_rows = self._store.read.rows("agents", {"agent_id": agents})
            decisions = self._policy.decide(who, [Check("agent", str(a["agent_id"]), "list_tokens", a)
                                                  for a in agent_rows])
            allowed = {d.id for d in decisions if d.allowed("list_tokens")}
            rows = [r for r in rows if r["agent_id"] in allowed]
        return [token_info(r) for r in rows]


__all__ = ["TOKEN_CALL_EVENTS", "TOKEN_ID_PREFIX", "TokenCalls", "token_info"]
