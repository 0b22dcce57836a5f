"""The World of a running server, as a Python object: the embedded World's method names and errors.

``engine.client.connect(url, token)`` gives a :class:`RemoteWorld`. Code written against the embedded World
(``runtime.world``) runs against ``pmw serve`` by changing only the line that makes ``world``::

    world = runtime.world                                        # embedded
    world = engine.client.connect("http://127.0.0.1:8765", token)  # the same calls, over HTTP

Every method of the World a token may call (``engine.service.calls.WORLD_CALLS``) is a method here, with the
same arguments (positional ones too: the server binds them with the World's own signature) and the same
results (the World's models, rebuilt from the names the server sends). The token's agent is the principal
of every call: an ``actor`` that names it (or is left out) is that agent; one that names another agent is
refused with ``NotPermitted``, exactly as the World refuses acting for another. Errors are raised as the
World's own classes (``engine.client.errors.typed_error``: ``VersionConflict`` with ``.current``,
``NotPermitted``, ``NotFound``, ``PolicyDenied``, ...); a code this client does not know is
``engine.client.http.RemoteError`` with the same code and fields. An unreachable server is
``ServerUnreachable``. :meth:`RemoteWorld.wakes` iterates the token's agent's wakes as they are queued (the
server's SSE stream, resumed by ``Last-Event-ID``: ``engine.client.sse``).

Stdlib only until a result is rebuilt (which imports the World's models).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.client.errors import typed_error
from engine.client.http import RemoteError, ServerClient
from engine.client.sse import WakeStream

#: Names that are this client's own, not calls of the server.
OWN = frozenset({"client", "server", "token", "wakes", "whoami", "call", "close"})


class RemoteWorld:
    """A server's World, acting as the agent of ``token``. Safe to share between threads (each call is one
    HTTP request of its own)."""

    def __init__(self, client: ServerClient) -> None:
        self.client = client

    @property
    def server(self) -> str:
        return self.client.server

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``World.<name>(*args, **kwargs)`` on the server; its result as the World returns it, or the World's
        error."""
        try:
            return self.client.call("world", name, args, kwargs)
        except RemoteError as exc:
            raise typed_error(exc) from None

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return self.call(name, *args, **kwargs)
        call.__name__ = call.__qualname__ = name
        return call

    def __dir__(self) -> list[str]:
        from engine.service.calls import WORLD_CALLS

        return sorted({*super().__dir__(), *WORLD_CALLS})

    def whoami(self) -> dict[str, Any]:
        """The token's agent, token id, scope and expiry (``GET /v1/whoami``)."""
        try:
            found = self.client.request("GET", "/v1/whoami").get("result")
        except RemoteError as exc:
            raise typed_error(exc) from None
        return dict(found) if isinstance(found, dict) else {}

    def wakes(self, agent: str | None = None, *, after_seq: int | None = None, models: bool = True,
              max_reconnects: int = 20, wait_s: float | None = None) -> WakeStream:
        """An iterator of ``agent``'s wakes queued from this call on (default: the token's agent; connected
        before it returns; another agent's stream is refused here with ``NotPermitted``). ``after_seq``:
        first the wakes queued after that log position (a previous stream's ``last_seq``), so a restarted
        agent misses none. Drops and server restarts are resumed from the last wake given; nothing is
        delivered twice. ``wait_s``: ``next`` raises ``TimeoutError`` when no wake came within it."""
        if agent is None:
            agent = str(self.whoami()["agent_id"])
        stream = WakeStream(self.client, agent, after_seq=after_seq, models=models, max_reconnects=max_reconnects,
                            wait_s=wait_s)
        return stream.open()


def connect(server: str, token: str | None, *, timeout_s: float = 60.0) -> RemoteWorld:
    """The World served at ``server`` (``http://127.0.0.1:PORT``), acting as ``token``'s agent. Nothing is
    sent until the first call; a bad URL is ``InvalidInput``."""
    return RemoteWorld(ServerClient(server, token, timeout_s=timeout_s))


__all__ = ["OWN", "RemoteWorld", "connect"]
