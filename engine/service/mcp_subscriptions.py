"""Wake notifications for MCP subscribers: ``notifications/resources/updated`` when a wake is queued.

A :class:`SubscriptionHub` holds who listens for which agent's resources:

- handshake-era sessions (``resources/subscribe``): the session's connection and the URIs it subscribed to;
  each is sent ``notifications/resources/updated`` on the connection's standalone stream (the GET stream
  of streamable HTTP, stdout of stdio);
- 2026-07-28 listen streams (``subscriptions/listen``): the SDK's ``ListenHandler`` on an in-memory bus;
  every URI of the agent is published and each stream gets only the URIs it asked for.

A URI is accepted only for the token's own agent (``engine.service.mcp_resources.owned_uri``), so a
subscriber is never told about another agent's wakes; and only while the token holds: a session's token is
checked again before each notification, a listen stream's every :data:`TOKEN_RECHECK_S` (a revoked or
expired token is told nothing more). :meth:`SubscriptionHub.follow` connects the hub to
the server's queued-wake feed (``service.wake_feed``: a callback on the feed's thread, hopped onto the
event loop with ``call_soon_threadsafe``). Delivery is fire-and-forget: a session that is gone is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated

from engine.errors import PMWError, TooManyOpen
from engine.service.mcp_backend import McpBackend
from engine.service.mcp_limits import McpLimits
from engine.service.mcp_resources import RESOURCE_KINDS, owned_uri, uri_of

logger = logging.getLogger(__name__)
#: Seconds between two checks of a listen stream's token (a revoked token ends the stream within it).
TOKEN_RECHECK_S = 0.5


class WakeNoticeLike(Protocol):
    """What the wake feed tells its listeners (``engine.service.wake_feed.WakeNotice``)."""

    @property
    def agent_id(self) -> str: ...


class WakeFeedLike(Protocol):
    """The queued-wake feed: ``add_listener(callback) -> remove`` (callback on the feed's thread)."""

    def add_listener(self, callback: Callable[[Any], None]) -> Callable[[], None]: ...


@dataclass
class _Subscriber:
    """One handshake-era session's subscriptions: the URIs, and the token (and backend) it subscribed with."""

    session: ServerSession
    backend: McpBackend
    token: str | None
    uris: set[str] = field(default_factory=set)


class SubscriptionHub:
    """Who is subscribed to which agent's resources, and telling them when a wake for the agent is queued."""

    def __init__(self, limits: McpLimits | None = None) -> None:
        self.limits = limits or McpLimits()
        #: agent -> connection id -> its subscriber
        self._sessions: dict[str, dict[int, _Subscriber]] = {}
        #: open listen streams per token and per agent (capped by ``limits``)
        self._listens_of_token: dict[str, int] = {}
        self._listens_of_agent: dict[str, int] = {}
        self.bus = InMemorySubscriptionBus()
        self.listen_handler = ListenHandler(self.bus)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @staticmethod
    def _key(session: ServerSession) -> int:
        return id(getattr(session, "_connection", session))

    async def check_uri(self, backend: McpBackend, token: str | None, uri: str) -> str:
        """The agent of ``uri``, when it is the token's own (``not_permitted`` otherwise)."""
        return await owned_uri(backend, token, uri)

    def subscribe_session(self, session: ServerSession, agent_id: str, uri: str, *, backend: McpBackend,
                          token: str | None) -> None:
        """Tell ``session`` of ``uri`` (``agent_id``'s, checked by :meth:`check_uri`) while ``token`` holds."""
        sessions = self._sessions.setdefault(agent_id, {})
        entry = sessions.get(self._key(session))
        if entry is None or entry.token != token:
            entry = sessions[self._key(session)] = _Subscriber(session, backend, token)
        entry.uris.add(uri)

    def unsubscribe_session(self, session: ServerSession, uri: str) -> None:
        key = self._key(session)
        for agent_id, sessions in list(self._sessions.items()):
            entry = sessions.get(key)
            if entry is not None:
                entry.uris.discard(uri)
                if not entry.uris:
                    del sessions[key]
            if not sessions:
                del self._sessions[agent_id]

    def subscribers(self, agent_id: str) -> int:
        """How many sessions are subscribed to ``agent_id``'s resources (handshake era)."""
        return len(self._sessions.get(agent_id, {}))

    async def _holds(self, entry: _Subscriber, agent_id: str) -> bool:
        """Whether the subscriber's token still proves ``agent_id`` (revoked, expired: it does not)."""
        try:
            return await entry.backend.agent_of(entry.token) == agent_id
        except PMWError:
            return False

    async def wake_queued(self, agent_id: str) -> None:
        """Tell every subscriber of ``agent_id``'s resources that they changed (a wake for it is queued). A
        session whose token no longer holds (revoked, expired) is told nothing and forgotten."""
        for key, entry in list(self._sessions.get(agent_id, {}).items()):
            if not await self._holds(entry, agent_id):
                self._sessions.get(agent_id, {}).pop(key, None)
                continue
            try:
                for uri in sorted(entry.uris):
                    await entry.session.send_resource_updated(uri)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, RuntimeError) as exc:  # a session gone
                logger.debug("dropping MCP subscriber of %s: %r", agent_id, exc)
                self._sessions.get(agent_id, {}).pop(key, None)
        for kind in RESOURCE_KINDS:
            await self.bus.publish(ResourceUpdated(uri_of(agent_id, kind)))

    async def listen(self, backend: McpBackend, token: str | None, ctx: ServerRequestContext[Any, Any],
                     params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
        """Serve one ``subscriptions/listen`` stream (its URIs already checked) while ``token`` holds: it is
        checked again every :data:`TOKEN_RECHECK_S`, and a refused token ends the stream with its error. A
        token (or agent) already holding ``limits.listens_per_token`` (``listens_per_agent``) open streams is
        refused ``too_many_open`` before the stream opens (the SDK's own limit is server-wide)."""
        agent_id = await backend.agent_of(token)
        token_key = token or ""
        if self._listens_of_token.get(token_key, 0) >= self.limits.listens_per_token:
            raise TooManyOpen("mcp_listen", "token", self.limits.listens_per_token)
        if self._listens_of_agent.get(agent_id, 0) >= self.limits.listens_per_agent:
            raise TooManyOpen("mcp_listen", "agent", self.limits.listens_per_agent)
        self._listens_of_token[token_key] = self._listens_of_token.get(token_key, 0) + 1
        self._listens_of_agent[agent_id] = self._listens_of_agent.get(agent_id, 0) + 1
        try:
            return await self._listen(backend, token, ctx, params)
        finally:
            for counts, key in ((self._listens_of_token, token_key), (self._listens_of_agent, agent_id)):
                counts[key] -= 1
                if counts[key] <= 0:
                    del counts[key]

    def open_listens(self, agent_id: str) -> int:
        """How many ``subscriptions/listen`` streams of ``agent_id`` are open."""
        return self._listens_of_agent.get(agent_id, 0)

    async def _listen(self, backend: McpBackend, token: str | None, ctx: ServerRequestContext[Any, Any],
                      params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
        refused: list[PMWError] = []
        result: types.SubscriptionsListenResult | None = None
        async with anyio.create_task_group() as group:
            async def watch() -> None:
                while True:
                    await anyio.sleep(TOKEN_RECHECK_S)
                    try:
                        await backend.agent_of(token)
                    except PMWError as exc:
                        refused.append(exc)
                        group.cancel_scope.cancel()
                        return
            group.start_soon(watch)
            result = await self.listen_handler(ctx, params)
            group.cancel_scope.cancel()
        if refused:
            raise refused[0]
        assert result is not None
        return result

    def _notice(self, notice: WakeNoticeLike) -> None:
        """The feed's callback (on the feed's thread): hop onto the event loop."""
        loop = self._loop
        agent_id = notice.agent_id
        if loop is None or loop.is_closed():
            return

        def schedule() -> None:
            task = loop.create_task(self.wake_queued(agent_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(schedule)

    @contextlib.asynccontextmanager
    async def follow(self, feed: WakeFeedLike | None) -> AsyncIterator[None]:
        """While entered, the hub hears of every queued wake from ``feed`` (nothing when there is none)."""
        self._loop = asyncio.get_running_loop()
        remove = feed.add_listener(self._notice) if feed is not None else None
        try:
            yield
        finally:
            if remove is not None:
                remove()
            self.listen_handler.close()
            self._loop = None


__all__ = ["TOKEN_RECHECK_S", "SubscriptionHub", "WakeFeedLike", "WakeNoticeLike"]
