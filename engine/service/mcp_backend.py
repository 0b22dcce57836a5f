"""Where the MCP server's calls go: the one door of a world (``engine.service.dispatch``), or a server.

An :class:`McpBackend` makes one World call for a bearer token and answers the result as JSON values (or
raises PMW's typed error). Two of them, with the same contract, so that ``/mcp`` on ``pmw serve``, ``pmw mcp``
on an embedded world and ``pmw mcp`` against a server serve the same tools the same way:

- :class:`DispatchBackend`: ``service.dispatch`` (``run`` + ``world_call``) of the world in this process;
- :class:`RemoteBackend`: a running ``pmw serve``: a read through its ``/v1/world/{call}`` API
  (``ServerClient``), a command as its REST action ``POST /v1/actions/<command>`` (validated by the
  command's model on the server, as in process); the server's errors arrive as ``RemoteError`` with the
  server's code, message, exit code and fields.

Both block; they run on a worker thread (``anyio.to_thread``), never on the event loop.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from anyio import to_thread

from engine.client.http import TOKEN_AGENT, RemoteError, ServerClient, open_url
from engine.commands import COMMANDS
from engine.errors import NotPermitted, ServerUnreachable
from engine.models.tokens import TokenPrincipal
from engine.service.dispatch import Dispatcher
from engine.service.mcp_tools import split_command, world_arguments
from engine.service.wire import to_wire


class McpBackend(Protocol):
    """Makes World calls for a token."""

    async def call(self, token: str | None, name: str, arguments: Mapping[str, Any], *,
                   proven: TokenPrincipal | None = None) -> Any:
        """``World.<name>(**arguments)`` as the token's agent; the result as JSON values. ``proven``: who the
        token was proven to be by this request's transport moments ago (a backend may use it instead of
        proving the token again; one that cannot ignores it)."""
        ...

    async def agent_of(self, token: str | None) -> str:
        """The agent the token proves now (``Unauthenticated`` when it proves nothing)."""
        ...


class DispatchBackend:
    """The world of this process, through its one door (``dispatch``, or a function that finds it when a call
    is made: a server's dispatcher exists only once the service has started)."""

    def __init__(self, dispatch: Dispatcher | Callable[[], Dispatcher]) -> None:
        self._dispatch = dispatch

    @property
    def dispatch(self) -> Dispatcher:
        found = self._dispatch
        return found if isinstance(found, Dispatcher) else found()

    async def call(self, token: str | None, name: str, arguments: Mapping[str, Any], *,
                   proven: TokenPrincipal | None = None) -> Any:
        dispatch = self.dispatch

        def work(principal: TokenPrincipal) -> Any:  # the arguments are parsed only once the token is proven
            return dispatch.world_call(principal, name, world_arguments(name, arguments))

        def run() -> Any:
            if proven is not None:  # proven by this request's bearer check (mcp_http), not proven twice
                return to_wire(dispatch.run_as(proven, work))
            return to_wire(dispatch.run(token, work))
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

    async def call(self, token: str | None, name: str, arguments: Mapping[str, Any], *,
                   proven: TokenPrincipal | None = None) -> Any:
        del proven  # the server proves the token itself
        if name in COMMANDS:
            return await to_thread.run_sync(self._action, token, name, arguments)
        client = self._client(token)
        path = f"/v1/world/{urllib.parse.quote(name, safe='')}"

        def run() -> Any:
            return client.request("POST", path, {"arguments": dict(arguments)}).get("result")
        return await to_thread.run_sync(run)

    def _action(self, token: str | None, name: str, arguments: Mapping[str, Any]) -> Any:
        """A command as the server's REST action (``POST /v1/actions/<command>``: the command's fields as the
        body, validated by its model there; ``op_id`` as ``Idempotency-Key``). A principal parameter naming
        the token's agent is dropped, one naming another agent is ``NotPermitted`` (as the server's binding
        answers it); anything else that is not a field of the command goes in the body, which the server
        refuses."""
        fields, rest = split_command(name, arguments)
        op_id = rest.pop("op_id", None)
        param = COMMANDS[name].actor_param
        given = rest.pop(param, None)
        if given not in (None, TOKEN_AGENT):  # as the server's binding refuses it: another agent is not permitted
            caller = self._whoami(token)
            if given != caller:
                raise NotPermitted(caller, name, "agent", str(given)[:128],
                                   f"this token is {caller!r}'s: it acts only as {caller!r}")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if op_id is not None:
            headers["Idempotency-Key"] = str(op_id)
        path = f"/v1/actions/{urllib.parse.quote(name, safe='')}"
        body = json.dumps({**fields, **rest}).encode()
        request = urllib.request.Request(self.server.rstrip("/") + path, data=body, method="POST", headers=headers)
        try:
            with open_url(request, self.timeout_s, self.server) as response:  # follows no redirect
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                raw = exc.read()
            finally:
                exc.close()
            try:
                problem = json.loads(raw or b"{}")
            except ValueError:
                problem = None
            if isinstance(problem, dict) and "code" in problem:
                raise RemoteError(problem) from None
            raise ServerUnreachable(self.server, f"HTTP {exc.code} without a PMW error") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ServerUnreachable(self.server, str(getattr(exc, "reason", exc))) from None

    def _whoami(self, token: str | None) -> str:
        return str(self._client(token).request("GET", "/v1/whoami")["result"]["agent_id"])

    async def agent_of(self, token: str | None) -> str:
        return await to_thread.run_sync(self._whoami, token)


__all__ = ["DispatchBackend", "McpBackend", "RemoteBackend"]
