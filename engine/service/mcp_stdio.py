"""``pmw mcp``: PMW's MCP server over stdio, for a desktop client's one line of configuration.

The same server as ``/mcp`` (``engine.service.mcp_server.build_server``: the same generated tools and
resources), with the process's token as every request's token:

- :func:`serve_remote`: a running ``pmw serve`` (``PMW_SERVER`` / ``--server``); each call is a call of
  its ``/v1/world/{call}`` API (``engine.service.mcp_backend.RemoteBackend``), errors keeping the server's
  code; wake notifications come from the agent's wake stream on the server
  (``engine.service.mcp_remote_feed``).
- :func:`serve_embedded`: no server configured: the world of the settings is opened here
  (``engine.runtime.Runtime``, its own supervised PDP), the token (``PMW_TOKEN``) is authenticated against
  it, every call goes through a :class:`~engine.service.dispatch.Dispatcher`, and a wake feed
  (``engine.service.wake_feed``) tells subscribers of their agent's wakes.

Either way the token is checked before the first message is read (no valid token: ``Unauthenticated``,
exit 10) and stdout carries nothing but JSON-RPC (the SDK's stdio transport owns it; logs go to stderr).
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

import anyio
from mcp.server.stdio import stdio_server

from engine.errors import Unauthenticated
from engine.service.mcp_backend import DispatchBackend, McpBackend, RemoteBackend
from engine.service.mcp_server import build_server
from engine.service.mcp_subscriptions import SubscriptionHub, WakeFeedLike

if TYPE_CHECKING:
    from engine.settings import Settings

logger = logging.getLogger(__name__)


def log_to_stderr() -> None:
    """Logs (warnings and up) on stderr: stdout is the protocol's."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="pmw mcp: %(levelname)s %(message)s")


async def serve_stdio(backend: McpBackend, token: str | None, feed: WakeFeedLike | None = None) -> None:
    """Serve ``backend``'s tools on stdin/stdout as ``token``'s agent until stdin ends."""
    hub = SubscriptionHub()
    server = build_server(backend, lambda _ctx: token, hub)
    async with hub.follow(feed), stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_remote(server: str, token: str | None) -> None:
    """Serve the tools of the ``pmw serve`` at ``server`` as ``token``'s agent."""
    if not token:
        raise Unauthenticated("no token: set PMW_TOKEN (or `pmw login` against the server)")
    from engine.service.mcp_remote_feed import RemoteWakeFeed

    backend = RemoteBackend(server)

    async def main() -> None:
        agent = await backend.agent_of(token)  # a refused token fails here, before any message is read
        feed = RemoteWakeFeed(server, token, agent)
        try:
            await serve_stdio(backend, token, feed)
        finally:
            await anyio.to_thread.run_sync(feed.stop)
    anyio.run(main)


def serve_embedded(settings: Settings, token: str | None) -> None:
    """Open the world of ``settings`` here and serve its tools as ``token``'s agent."""
    from engine.runtime import Runtime
    from engine.service.dispatch import Dispatcher
    from engine.service.wake_feed import WakeFeed

    if not token:
        raise Unauthenticated("no token: set PMW_TOKEN to a token of this world (`pmw tokens issue`)")
    runtime = Runtime.open(settings, supervise=True)
    feed: WakeFeed | None = None
    try:
        dispatch = Dispatcher(runtime)
        dispatch.principal(token)  # a refused token fails here, before any message is read
        feed = WakeFeed(runtime.store.read)
        feed.start()
        anyio.run(serve_stdio, DispatchBackend(dispatch), token, feed)
    finally:
        if feed is not None:
            feed.stop()
        runtime.close()


__all__ = ["log_to_stderr", "serve_embedded", "serve_remote", "serve_stdio"]
