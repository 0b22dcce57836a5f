"""A client of ``pmw serve``: what the CLI (and any Python program) uses to call a running server.

``engine.client.connect(url, token)`` is the server's World with the embedded World's method names and
errors (``engine.client.world``); ``engine.client.http`` is the plain HTTP client the CLI uses.

Stdlib only at import time, so a CLI call against a server starts fast (no SQLAlchemy, gRPC, Cerbos or
durable_rules in the client process).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.client.world import RemoteWorld


def connect(server: str, token: str | None, *, timeout_s: float = 60.0) -> RemoteWorld:
    """The World served at ``server``, acting as ``token``'s agent (``engine.client.world.connect``)."""
    from engine.client.world import connect as connect_world

    return connect_world(server, token, timeout_s=timeout_s)


__all__ = ["connect"]
