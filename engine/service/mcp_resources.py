"""The MCP resources of PMW: an agent's projection, its tasks and its receipts, as JSON.

``pmw://agents/{agent_id}/projection`` (``project_world``), ``pmw://agents/{agent_id}/tasks``
(``list_tasks`` assigned to it) and ``pmw://agents/{agent_id}/receipts`` (``list_receipts`` of it), each
read through the same World calls as the tools, as the token's agent. Only the token's own agent's URIs
may be read or subscribed to: another agent's is ``not_permitted`` before anything is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from engine.errors import InvalidInput, NotPermitted
from engine.service.mcp_backend import McpBackend

MIME = "application/json"
#: kind -> (World call, its arguments for the agent, description)
RESOURCE_KINDS: Mapping[str, tuple[str, str, str]] = {
    "projection": ("project_world", "agent_id", "What the agent sees of the world now (project_world)."),
    "tasks": ("list_tasks", "assignee", "The tasks assigned to the agent (list_tasks)."),
    "receipts": ("list_receipts", "agent_id", "The agent's decision receipts (list_receipts)."),
}
_URI = re.compile(r"^pmw://agents/(?P<agent>[^/?#]{1,128})/(?P<kind>[a-z_]{1,32})$")


def uri_of(agent_id: str, kind: str) -> str:
    return f"pmw://agents/{agent_id}/{kind}"


def parse_uri(uri: str) -> tuple[str, str]:
    """``(agent_id, kind)`` of a resource URI; anything else is ``InvalidInput``."""
    found = _URI.match(uri) if isinstance(uri, str) else None
    if found is None or found["kind"] not in RESOURCE_KINDS:
        raise InvalidInput("uri", f"{str(uri)[:200]!r} is not pmw://agents/{{agent_id}}/"
                                  f"{{{'|'.join(RESOURCE_KINDS)}}}")
    return found["agent"], found["kind"]


def resources_of(agent_id: str) -> list[types.Resource]:
    """The resources of ``agent_id`` (what ``resources/list`` answers its token)."""
    return [types.Resource(uri=uri_of(agent_id, kind), name=f"{agent_id}/{kind}", description=about,
                           mime_type=MIME) for kind, (_call, _param, about) in RESOURCE_KINDS.items()]


def resource_templates() -> list[types.ResourceTemplate]:
    return [types.ResourceTemplate(uri_template=uri_of("{agent_id}", kind), name=kind, description=about,
                                   mime_type=MIME) for kind, (_call, _param, about) in RESOURCE_KINDS.items()]


async def owned_uri(backend: McpBackend, token: str | None, uri: str) -> str:
    """The agent of ``uri`` when it is the token's own (``not_permitted`` otherwise; bad URIs refused)."""
    agent, _kind = parse_uri(uri)
    caller = await backend.agent_of(token)
    if agent != caller:
        raise NotPermitted(caller, "read", "resource", uri[:200],
                           f"this token is {caller!r}'s: it reads only {caller!r}'s resources")
    return agent


async def read_resource(backend: McpBackend, token: str | None, uri: str) -> types.ReadResourceResult:
    """The resource's JSON, read as the token's agent."""
    agent = await owned_uri(backend, token, uri)
    call, param, _about = RESOURCE_KINDS[parse_uri(uri)[1]]
    arguments: dict[str, Any] = {param: agent}
    value = await backend.call(token, call, arguments)
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=MIME, text=text)])


__all__ = ["MIME", "RESOURCE_KINDS", "owned_uri", "parse_uri", "read_resource", "resource_templates",
           "resources_of", "uri_of"]
