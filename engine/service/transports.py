"""The transports ``pmw serve`` mounts on its API app beside the ``/v1`` calls, each a module with
``mount(app, service)`` (routes, middleware, lifespans in ``app.state.lifespans``), mounted in this order."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from engine.service.host import Service

#: ``engine.service.rest_api``: the commands as REST resources and actions (OpenAPI 3.1);
#: ``engine.service.sse_routes``: an agent's wakes as a server-sent-events stream;
#: ``engine.service.mcp_http``: the MCP server at ``/mcp`` (streamable HTTP); ``engine.console``: the
#: governance console's pages at ``/console``.
TRANSPORTS: tuple[str, ...] = ("engine.service.rest_api", "engine.service.sse_routes", "engine.service.mcp_http",
                               "engine.console")


def mount_transports(app: FastAPI, service: Service) -> None:
    """Mount every transport of :data:`TRANSPORTS` on ``app``."""
    for name in TRANSPORTS:
        importlib.import_module(name).mount(app, service)


__all__ = ["TRANSPORTS", "mount_transports"]
