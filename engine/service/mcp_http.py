"""``/mcp`` on ``pmw serve``: the MCP server (``engine.service.mcp_server``) over streamable HTTP.

Built from the official SDK's pieces, in this order for every request:

1. the app's ``HostCheck`` (a ``Host`` not in ``service.allowed_hosts`` is refused, 400), then
   ``engine.service.mcp_origin.ExactHostOrigin``: ``Host`` and ``Origin`` parsed whole and matched exactly
   (421 / 403; the SDK's own checks below match a prefix);
2. bearer authentication (the SDK's ``BearerAuthBackend`` with a verifier over the world's tokens,
   ``engine.auth.tokens`` through ``service.dispatch``: its gate, a proof of the last second that this
   process's revocations clear at once, else a proof from the store): every request; the tool call itself
   is made under a proof from the store (step 4), so a token revoked or expired is refused on its next call.
   No valid token: 401 with ``WWW-Authenticate: Bearer error="invalid_token"`` (the MCP authorization
   spec's resource-server answer);
3. ``engine.service.mcp_sessions.CappedSessionManager`` (the SDK's stateful session manager): at most
   ``McpLimits`` sessions per token and per agent (over it the oldest idle one is closed; all in use: 429
   ``too_many_open``), idle ones closed
   after ``session_idle_s`` (5 min), a session whose token no longer holds terminated within
   ``mcp_sessions.SWEEP_S`` (its GET stream ends); the body refused over ``http_app.MAX_BODY_BYTES``
   before it is parsed (413); ``Host`` and ``Origin`` checked again by the SDK's
   ``TransportSecuritySettings`` (DNS rebinding: a cross-origin request is 403); a session is bound to
   the token that opened it (another token on that session: 404, as if it did not exist);
4. each tool call then goes through ``service.dispatch`` (``run`` + ``world_call``) with the request's
   own token, proven from the store in the call's own trip to the worker thread (or, when step 2 proved it
   from the store for this request, under that proof): the one door, the policy deciding.

The session manager's lifespan (and the hub following ``service.wake_feed``) is appended to
``app.state.lifespans``. When the server runs the app without its lifespan, the manager is started on the
first ``/mcp`` request instead (and lives as long as the event loop).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
from anyio import to_thread
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from engine.errors import PMWError
from engine.models.tokens import TokenPrincipal
from engine.service.dispatch import Dispatcher
from engine.service.mcp_backend import DispatchBackend
from engine.service.mcp_limits import McpLimits
from engine.service.mcp_origin import ExactHostOrigin
from engine.service.mcp_server import build_server
from engine.service.mcp_sessions import CappedSessionManager
from engine.service.mcp_subscriptions import SubscriptionHub, WakeFeedLike

if TYPE_CHECKING:
    from fastapi import FastAPI

    from engine.service.host import Service

PATH = "/mcp"


def bearer_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The bearer token of the HTTP request that carried this MCP message (None: none)."""
    request = ctx.request
    if not isinstance(request, Request):
        return None
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


class ProvenAccessToken(AccessToken):
    """The SDK's ``AccessToken`` with the principal the token proved when this request was authenticated;
    ``fresh``: proven from the store for this very request (not by the dispatcher's gate from a proof of the
    last second)."""

    principal: TokenPrincipal
    fresh: bool = True


def proven_of(ctx: ServerRequestContext[Any, Any]) -> TokenPrincipal | None:
    """The principal this HTTP request's bearer token was proven to be from the store by the authentication
    middleware (the same request, moments ago), when the token it proved is the one the request carries;
    else None (also when the middleware only passed it through the gate: the call then proves it)."""
    request = ctx.request
    if not isinstance(request, Request):
        return None
    user = request.scope.get("user")
    access = getattr(user, "access_token", None)
    if not isinstance(access, ProvenAccessToken) or not access.fresh or access.token != bearer_of(ctx):
        return None
    return access.principal


class WorldTokenVerifier:
    """The SDK's ``TokenVerifier`` over the world's tokens: who a token proves (None: nothing). The check
    before a request is read: the dispatcher's gate (a proof of the last second, no store read, no trip to a
    thread) or a proof from the store; a call is then made under a proof from the store in any case."""

    def __init__(self, service: Service) -> None:
        self.service = service

    async def verify_token(self, token: str) -> AccessToken | None:
        dispatch: Dispatcher = self.service.dispatch
        principal = dispatch.gate(token)
        if principal is not None:
            return self._access(token, principal, fresh=False)
        return await self.prove(token)

    async def prove(self, token: str) -> ProvenAccessToken | None:
        """Who ``token`` proves now, read from the store (never the gate's cache): the session sweep's check."""
        dispatch: Dispatcher = self.service.dispatch
        try:
            principal: TokenPrincipal = await to_thread.run_sync(dispatch.principal, token)
        except PMWError:
            return None
        return self._access(token, principal, fresh=True)

    @staticmethod
    def _access(token: str, principal: TokenPrincipal, *, fresh: bool) -> ProvenAccessToken:
        expires = principal.expires_at_us // 1_000_000 if principal.expires_at_us else None
        # the session is bound to (client_id, issuer, subject): the agent and the token that opened it
        return ProvenAccessToken(token=token, client_id=principal.agent_id, scopes=[principal.scope],
                                 expires_at=expires, subject=principal.token_id, principal=principal, fresh=fresh)


def security_settings(allowed_hosts: set[str]) -> TransportSecuritySettings:
    """Host and Origin checks for the server's own names (any port), http and https."""
    hosts = sorted({h for name in allowed_hosts for h in (name, f"{name}:*")})
    origins = sorted({o for name in allowed_hosts for scheme in ("http", "https")
                      for o in (f"{scheme}://{name}", f"{scheme}://{name}:*")})
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=origins)


class McpEndpoint:
    """The ASGI app at ``/mcp``: authentication, then the SDK's session manager."""

    def __init__(self, service: Service, limits: McpLimits | None = None) -> None:
        from engine.service.http_app import MAX_BODY_BYTES

        self.service = service
        self.limits = limits or McpLimits.from_env()
        self.hub = SubscriptionHub(self.limits)
        backend = DispatchBackend(lambda: service.dispatch)
        self.server = build_server(backend, bearer_of, self.hub, proven_of=proven_of)
        self.manager = CappedSessionManager(
            app=self.server, security_settings=security_settings(service.allowed_hosts),
            max_request_body_size=MAX_BODY_BYTES, limits=self.limits)
        self.verifier = WorldTokenVerifier(service)
        inner: ASGIApp = RequireAuthMiddleware(StreamableHTTPASGIApp(self.manager), [])
        authenticated = AuthenticationMiddleware(AuthContextMiddleware(inner), backend=BearerAuthBackend(self.verifier))
        self.app: ASGIApp = ExactHostOrigin(authenticated, service.allowed_hosts)
        self._running = False
        self._starting = asyncio.Lock()
        self._background: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """The session manager running and the hub following the wake feed, while entered."""
        try:
            feed: WakeFeedLike | None = self.service.wake_feed
        except RuntimeError:  # a service without a running feed: subscriptions are never told anything
            feed = None
        async def holds(token: str) -> bool:
            return await self.verifier.prove(token) is not None  # from the store: a revocation ends the session

        async with self.manager.run(), self.hub.follow(feed), anyio.create_task_group() as sweeping:
            sweeping.start_soon(self.manager.sweep, holds)
            self._running = True
            try:
                yield
            finally:
                self._running = False
                sweeping.cancel_scope.cancel()

    async def _start_in_background(self) -> None:
        async with self._starting:
            if self._running:
                return
            entered = asyncio.Event()

            async def hold() -> None:
                async with self.lifespan():
                    entered.set()
                    await asyncio.Event().wait()  # until the loop ends (cancelled)
            task = self._background = asyncio.get_running_loop().create_task(hold())
            waiting = asyncio.ensure_future(entered.wait())
            await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
            if not entered.is_set():  # the manager could not start: this request fails with its error
                waiting.cancel()
                self._background = None
                task.result()
                raise RuntimeError("the MCP session manager stopped before it started")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._running:
            await self._start_in_background()
        await self.app(scope, receive, send)


def mount(app: FastAPI, service: Service) -> None:
    """Serve the MCP server at ``/mcp`` (GET, POST, DELETE) and run its session manager with the app."""
    endpoint = McpEndpoint(service)
    app.state.mcp = endpoint
    app.state.lifespans.append(endpoint.lifespan)
    # first in the table: every MCP message is one request, and the router tries its routes in order (the
    # REST table's ~100 patterns cost ~0.1-0.2 ms a request when /mcp came last); no other route is /mcp
    app.router.routes.insert(0, Route(PATH, endpoint, methods=["GET", "POST", "DELETE"], include_in_schema=False))


__all__ = ["PATH", "McpEndpoint", "ProvenAccessToken", "WorldTokenVerifier", "bearer_of", "mount", "proven_of",
           "security_settings"]
