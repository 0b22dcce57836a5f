"""The SDK's stateful session manager with PMW's per-principal caps and revocation sweep (``/mcp``).

:class:`CappedSessionManager` is the SDK's ``StreamableHTTPSessionManager`` (mcp 2.3, pinned) with:

- **a cap per token and per agent** (:class:`~engine.service.mcp_limits.McpLimits`): a request that would open
  one more session than its token (or its agent) may hold first **closes that principal's oldest idle
  session** (no request in flight, no open GET stream: its id then answers 404, on which the MCP spec has a
  client open a new session); when none of them is idle, it is **refused** with HTTP 429 and a JSON-RPC
  error whose ``data`` is PMW's ``too_many_open`` error (``what: mcp_session``, ``per``, ``limit``). Why
  both: clients that never ``DELETE`` their sessions are common (the MCP conformance suite opens one per
  scenario with one token), and a refusal alone would lock them out until the idle timeout; a session in use
  is never closed for another. The count, the closing and the admission happen under the SDK's
  session-creation lock, so concurrent opens cannot overshoot. Another principal's ``initialize`` is never
  refused for it (the server-wide SDK limit stays far above any one principal's).
- **an idle timeout** of ``McpLimits.session_idle_s`` (5 minutes by default, not the SDK's 30).
- **JSON mode in the stateless era** (``MCP-Protocol-Version`` 2026-07-28 and later): a request of that era
  takes the SDK's JSON-response path (the handler's answer written as one ``application/json`` body) rather
  than its SSE-capable one, which sets up a task group, a memory stream and a disconnect watcher for every
  request and then, when the handler emitted nothing within its window, answers the same JSON body. PMW's
  tools emit nothing while they run (no progress, no log messages), so nothing is lost; measured on the
  event loop: 3.1 ms of CPU a ``tools/call`` without, 1.6 ms with (``subscriptions/listen`` keeps its stream;
  the handshake era keeps the SDK's own answers).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp.server._streamable_http_modern import handle_modern_request
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, AuthorizationContext, authorization_context
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import ErrorData as JsonRpcErrorData
from mcp_types import JSONRPCError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from engine.errors import TooManyOpen
from engine.service.mcp_limits import McpLimits

logger = logging.getLogger(__name__)
#: JSON-RPC error code of a refused open (the ``data`` is PMW's error, as for every refusal of the server).
REFUSED = -32001
#: Seconds between two revocation sweeps of the open sessions.
SWEEP_S = 0.5

#: Whether a token still proves the agent it opened a session as (False: revoked, expired, unknown).
TokenHolds = Callable[[str], Awaitable[bool]]


def refusal(exc: TooManyOpen) -> Response:
    """The HTTP 429 answer to a refused open: a JSON-RPC error (no request id) with PMW's error as ``data``."""
    body = JSONRPCError(jsonrpc="2.0", id=None,
                        error=JsonRpcErrorData(code=REFUSED, message=f"{exc.code}: {exc.message}", data=exc.to_dict()))
    return Response(body.model_dump_json(by_alias=True, exclude_none=True), status_code=429,
                    media_type="application/json")


class CappedSessionManager(StreamableHTTPSessionManager):
    """``StreamableHTTPSessionManager`` capping each token's and each agent's open sessions (see the module)."""

    def __init__(self, app: Server[Any], *, limits: McpLimits, security_settings: TransportSecuritySettings,
                 max_request_body_size: int) -> None:
        super().__init__(app, security_settings=security_settings, max_request_body_size=max_request_body_size,
                         session_idle_timeout=limits.session_idle_s)
        self.limits = limits
        #: session id -> the bearer token that opened it (for the revocation sweep)
        self._tokens: dict[str, str] = {}

    def open_sessions(self, *, agent_id: str | None = None, token_id: str | None = None) -> int:
        """How many sessions are open (of ``agent_id`` / of the token ``token_id`` when given)."""
        return sum(1 for owner in list(self._session_owners.values())
                   if (agent_id is None or owner["client_id"] == agent_id)
                   and (token_id is None or owner["subject"] == token_id))

    def _sessions_of(self, agent_id: str, token_id: str | None) -> list[str]:
        return [sid for sid, owner in list(self._session_owners.items())
                if owner["client_id"] == agent_id and (token_id is None or owner["subject"] == token_id)]

    def _oldest_idle(self, session_ids: list[str]) -> str | None:
        """The session of ``session_ids`` idle the longest (no request in flight, no GET stream), or None."""
        idle: list[tuple[float, str]] = []
        for sid in session_ids:
            transport = self._server_instances.get(sid)
            scope = transport.idle_scope if transport is not None else None
            if transport is not None and scope is not None and transport._requests_in_flight == 0:
                idle.append((scope.deadline, sid))  # idle since deadline - the idle timeout
        return min(idle)[1] if idle else None

    async def _make_room(self, requestor: AuthorizationContext | None) -> TooManyOpen | None:
        """Room for one more session of ``requestor``: close its token's (then its agent's) oldest idle session
        when the cap is reached; the refusal when none is idle. Called under the session-creation lock."""
        if requestor is None:
            return None
        for per, token_id, limit in (("token", requestor["subject"], self.limits.sessions_per_token),
                                     ("agent", None, self.limits.sessions_per_agent)):
            held = self._sessions_of(requestor["client_id"], token_id)
            if len(held) < limit:
                continue
            oldest = self._oldest_idle(held) if len(held) == limit else None
            transport = self._server_instances.get(oldest) if oldest is not None else None
            if oldest is None or transport is None:
                return TooManyOpen("mcp_session", per, limit)
            logger.info("closing idle MCP session %s of agent %s: its %s holds %d", oldest[:12],
                        requestor["client_id"], per, limit)
            await self._discard_session(oldest, transport)
        return None

    async def _handle_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The SDK's era routing (mcp 2.3, header-only), with the stateless era answered in JSON (module doc)."""
        header = MCP_PROTOCOL_VERSION_HEADER.encode("ascii")
        version = next((v.decode("latin-1") for k, v in scope["headers"] if k == header), None)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS and self._task_group is not None:
            await handle_modern_request(self.app, self.security_settings, True, self._lifespan_state,
                                        scope, receive, send)
            return
        await super()._handle_request(scope, receive, send)

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        if Headers(scope=scope).get(MCP_SESSION_ID_HEADER) is not None:
            await super()._handle_stateful_request(scope, receive, send)
            return
        user = scope.get("user")
        requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        async with self._session_creation_lock:  # the count and the admission, together
            refused = await self._make_room(requestor)
            transport = None if refused is not None else self._admit_session(requestor)
        if refused is not None:
            logger.warning("refusing an MCP session for agent %s: %s", requestor and requestor["client_id"],
                           refused.message)
            await refusal(refused)(scope, receive, send)
            return
        if transport is None:  # the SDK's server-wide limit
            await super()._handle_stateful_request(scope, receive, send)
            return
        if isinstance(user, AuthenticatedUser) and transport.mcp_session_id is not None:
            self._tokens[transport.mcp_session_id] = user.access_token.token
        await self._serve_opening_request(transport, scope, receive, send)

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        self._tokens.pop(session_id, None)
        await super()._discard_session(session_id, transport)

    async def sweep_once(self, holds: TokenHolds) -> int:
        """Terminate every open session whose token no longer holds; answers how many were terminated."""
        by_token: dict[str, list[str]] = {}
        for session_id, token in list(self._tokens.items()):
            by_token.setdefault(token, []).append(session_id)
        ended = 0
        for token, session_ids in by_token.items():
            if await holds(token):
                continue
            for session_id in session_ids:
                transport = self._server_instances.get(session_id)
                if transport is not None:
                    logger.info("ending MCP session %s: its token no longer holds", session_id[:12])
                    await self._discard_session(session_id, transport)
                    ended += 1
                else:
                    self._tokens.pop(session_id, None)
        return ended

    async def sweep(self, holds: TokenHolds, every_s: float = SWEEP_S) -> None:
        """:meth:`sweep_once` every ``every_s`` seconds, until cancelled (a failing check is logged, never fatal)."""
        while True:
            await anyio.sleep(every_s)
            try:
                await self.sweep_once(holds)
            except Exception:
                logger.exception("MCP session sweep failed")


__all__ = ["REFUSED", "SWEEP_S", "CappedSessionManager", "TokenHolds", "refusal"]
