"""Where the MCP server's calls go: the one door of a world (``engine.service.dispatch``), or a server.

An :class:`McpBackend` makes one World call for a bearer token and answers the result as JSON values (or
raises PMW's typed error). Two of them, with the same contract, so that ``/mcp`` on ``pmw serve``, ``pmw mcp``
on an embedded world and ``pmw mcp`` against a server serve the same tools the same way:

- :class:`DispatchBackend`: ``service.dispatch`` (``run`` + ``world_call``) of the world in this process;
- :class:`RemoteBackend`: the ``/v1/world/{call}`` API of a running ``pmw serve`` (``ServerClient``); the
  server's errors arrive as ``RemoteError`` with the server's code, message, exit code and fields.

Both block; they run on a worker thread (``anyio.to_thread``), never on the event loop.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any, Protocol

from anyio import to_thread

from engine.client.http import ServerClient
from engine.models.tokens import TokenPrincipal
from engine.service.dispatch import Dispatcher
from engine.service.wire import to_wire


class McpBackend(Protocol):
    """Makes World calls for a token."""

    async def call(self, token: str | None, name: str, arguments: Mapping[str, Any]) -> Any:
        """``World.<name>(**arguments)`` as the token's agent; the result as JSON values."""
        ...

    async def agent_of(self, token: str | None) -> str:
        """The agent the token proves now (``Unauthenticated`` when it proves nothing)."""
        ...


class DispatchBackend:
    """The world of this process, through its one door."""

    def __init__(self, dispatch: Dispatcher) -> None:
        self.dispatch = dispatch

    async def call(self, token: str | None, name: str, arguments: Mapping[str, Any]) -> Any:
        dispatch = self.dispatch

        def run() -> Any:
            return to_wire(dispatch.run(token, lambda p: dispatch.world_call(p, name, arguments)))
        return await to_thread.run_sync(run)

    async def agent_of(self, token: str | None) -> str:
        principal: TokenPrincipal = await to_thread.run_sync(self.dispatch.principal, token)
        return principal.agent_id


class RemoteBackend:
    """A running ``pmw serve`` at ``server`` (``http://127.0.0.1:PORT``)."""

    def __init__(self, server: str, *, timeout_s: float = 60.0) -> None:
        ServerClient(server, None)  # refuses a URL that is not http(s) before anything is sent
        self.server = server
        self.timeout_s = timeout_s

    def _client(self, token: str | None) -> ServerClient:
        return ServerClient(self.server, token, timeout_s=self.timeout_s)

    async def call(self, token: str | None, name: str, arguments: Mapping[str, Any]) -> Any:
        client = self._client(token)
        path = f"/v1/world/{urllib.parse.quote(name, safe='')}"

        def run() -> Any:
            return client.request("POST", path, {"arguments": dict(arguments)}).get("result")
        return await to_thread.run_sync(run)

    async def agent_of(self, token: str | None) -> str:
        client = self._client(token)
        answer = await to_thread.run_sync(lambda: client.request("GET", "/v1/whoami"))
        return str(answer["result"]["agent_id"])


__all__ = ["DispatchBackend", "McpBackend", "RemoteBackend"]
