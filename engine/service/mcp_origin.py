"""Exact ``Host`` and ``Origin`` checks for ``/mcp`` (DNS rebinding), in front of the SDK's.

The SDK's ``TransportSecuritySettings`` match a ``name:*`` pattern as a *prefix* (``Origin:
http://127.0.0.1:8765.evil.com`` passed ``http://127.0.0.1:*``), and the app's ``HostCheck`` takes the text
before the first ``:`` (``127.0.0.1:8765@evil.com`` passed). Here both headers are parsed whole:

- ``Host`` must be exactly ``name`` or ``name:port`` (``port`` 1 to 5 digits), ``name`` one of the server's
  own (``service.allowed_hosts``, compared case-insensitively; a bracketed IPv6 literal as ``[::1]``);
  anything else (a user-info ``@``, a suffix after ``]``, a trailing dot, spaces) is refused with 421;
- ``Origin``, when sent, must be exactly ``http://`` or ``https://`` + such a ``Host`` (no path, no
  user-info, no ``null``); anything else is refused with 403.

Any port of the server's own names is allowed (a client on another local port is no DNS rebinding).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

_HOST = re.compile(r"(?P<name>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)(?::(?P<port>[0-9]{1,5}))?")
_ORIGIN = re.compile(r"(?P<scheme>https?)://(?P<host>.+)")


def host_allowed(host: str | None, allowed: Iterable[str]) -> bool:
    """Whether ``host`` (a ``Host`` header) is exactly one of ``allowed`` names, with or without a port."""
    if not host:
        return False
    found = _HOST.fullmatch(host)
    if found is None or (found["port"] is not None and not 0 < int(found["port"]) < 65536):
        return False
    return found["name"].lower() in {name.lower() for name in allowed}


def origin_allowed(origin: str | None, allowed: Iterable[str]) -> bool:
    """Whether ``origin`` (an ``Origin`` header; None: not sent, allowed) is exactly ``http(s)://`` + an allowed
    host (see :func:`host_allowed`)."""
    if origin is None:
        return True
    found = _ORIGIN.fullmatch(origin)
    return found is not None and host_allowed(found["host"], allowed)


class ExactHostOrigin:
    """ASGI: a request to ``app`` whose ``Host`` or ``Origin`` is not exactly the server's own is refused."""

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str]) -> None:
        self.app = app
        self.allowed = frozenset(allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and "*" not in self.allowed:
            headers = Headers(scope=scope)
            if not host_allowed(headers.get("host"), self.allowed):
                await Response("Invalid Host header", status_code=421)(scope, receive, send)
                return
            if not origin_allowed(headers.get("origin"), self.allowed):
                await Response("Invalid Origin header", status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)


__all__ = ["ExactHostOrigin", "host_allowed", "origin_allowed"]
