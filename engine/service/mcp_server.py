"""PMW's MCP server: the official SDK's low-level ``Server`` with PMW's tools and resources.

One builder, :func:`build_server`, for every transport: ``/mcp`` on ``pmw serve`` (streamable HTTP,
``engine.service.mcp_http``) and ``pmw mcp`` (stdio, ``engine.cli.mcp``). What differs is only where the
calls go (an :class:`~engine.service.mcp_backend.McpBackend`) and where a request's token comes from
(:data:`TokenOf`: the ``Authorization`` header of the HTTP request that carried it, or the token of the
stdio process).

- ``tools/list``: :data:`engine.service.mcp_tools.TOOLS` (generated from the registry and the reads).
- ``tools/call``: one World call as the token's agent; the result as ``structuredContent`` and text; a PMW
  error as an ``isError`` result with its code and fields (``engine.service.mcp_tools``). An op id for a
  write may be given as the ``op_id`` argument or as ``_meta["pmw/op_id"]``.
- resources (``engine.service.mcp_resources``): the token's agent's projection, tasks and receipts, read
  through the same calls; another agent's URI is refused (``not_permitted``) as a JSON-RPC error whose
  ``data`` is PMW's error.
- ``resources/subscribe`` (handshake era) and ``subscriptions/listen`` (2026-07-28): the session (or the
  listen stream) is told ``notifications/resources/updated`` for its agent's URIs when a wake for that
  agent is queued (``engine.service.mcp_subscriptions``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from engine.errors import InvalidInput, NotFound, PMWError
from engine.models.tokens import TokenPrincipal
from engine.service.mcp_backend import McpBackend
from engine.service.mcp_resources import RESOURCE_KINDS, read_resource, resource_templates, resources_of
from engine.service.mcp_subscriptions import SubscriptionHub
from engine.service.mcp_tools import OP_ID_META_KEY, TOOLS, error_payload, error_result, success_result

logger = logging.getLogger(__name__)

#: Where a request's bearer token comes from (None: the request carries none).
TokenOf = Callable[[ServerRequestContext[Any, Any]], str | None]
#: Who the request's token was proven to be by the transport, moments ago, for this request only (None: not
#: proven by the transport; the backend proves it). Used by ``tools/call`` alone: what outlives the request (a
#: subscription, a listen stream) keeps the token and proves it again each time.
ProvenOf = Callable[[ServerRequestContext[Any, Any]], TokenPrincipal | None]
SERVER_NAME = "pmw"
INSTRUCTIONS = (
    "PMW: a persistent multi-agent world. Every tool is one World call made as your token's agent and decided "
    "by the policy. Errors carry PMW's stable code (structuredContent.code): on version_conflict re-read and "
    "recompute (structuredContent.current is the stored version). Read allowed_actions to learn what you may "
    "do; subscribe to pmw://agents/{you}/projection to be told when a wake for you is queued.")
#: JSON-RPC error codes of a refused resource request (PMW's error is the error's ``data``).
RESOURCE_NOT_FOUND = -32002
REFUSED = -32001


def mcp_error(exc: PMWError) -> MCPError:
    """A PMW error as a JSON-RPC error (for requests without an ``isError`` result): ``data`` is PMW's error."""
    code = (RESOURCE_NOT_FOUND if isinstance(exc, NotFound) else types.INVALID_PARAMS
            if isinstance(exc, InvalidInput) else REFUSED)
    return MCPError(code, f"{exc.code}: {exc.message}", error_payload(exc))


def _op_id(meta: Any) -> str | None:
    found = meta.get(OP_ID_META_KEY) if isinstance(meta, dict) else None
    return found if isinstance(found, str) else None


def build_server(backend: McpBackend, token_of: TokenOf, hub: SubscriptionHub | None = None,
                 *, version: str = "", proven_of: ProvenOf | None = None) -> Server[Any]:
    """The MCP server over ``backend``; ``hub`` (optional) carries wake notifications to subscribers;
    ``proven_of`` (optional) spares a ``tools/call`` a second proof of the token its transport just proved."""
    hub = hub or SubscriptionHub()

    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[spec.tool() for spec in TOOLS.values()])

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        spec = TOOLS.get(params.name)
        if spec is None:
            return error_result(NotFound("tool", params.name[:100]))
        arguments = dict(params.arguments or {})
        op_id = _op_id(params.meta)
        if op_id is not None and spec.write and "op_id" not in arguments:
            arguments["op_id"] = op_id
        try:
            proven = proven_of(ctx) if proven_of is not None else None
            wire = await backend.call(token_of(ctx), spec.name, arguments, proven=proven)
            return success_result(spec, wire)
        except PMWError as exc:
            return error_result(exc)
        except Exception as exc:  # a bug: an error result that shows nothing of it (the log has it)
            logger.exception("tool %s failed", spec.name)
            return error_result(PMWError(f"internal error ({type(exc).__name__}); see the server's log"))

    async def list_resources(ctx: ServerRequestContext[Any, Any],
                             params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        try:
            agent = await backend.agent_of(token_of(ctx))
        except PMWError as exc:
            raise mcp_error(exc) from None
        return types.ListResourcesResult(resources=resources_of(agent))

    async def list_templates(ctx: ServerRequestContext[Any, Any],
                             params: types.PaginatedRequestParams | None) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=resource_templates())

    async def read(ctx: ServerRequestContext[Any, Any],
                   params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        try:
            return await read_resource(backend, token_of(ctx), params.uri)
        except PMWError as exc:
            raise mcp_error(exc) from None

    async def subscribe(ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        try:
            agent = await hub.check_uri(backend, token_of(ctx), params.uri)
        except PMWError as exc:
            raise mcp_error(exc) from None
        hub.subscribe_session(ctx.session, agent, params.uri, backend=backend, token=token_of(ctx))
        return types.EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any, Any],
                          params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        hub.unsubscribe_session(ctx.session, params.uri)
        return types.EmptyResult()

    async def listen(ctx: ServerRequestContext[Any, Any],
                     params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
        token = token_of(ctx)
        try:
            for uri in params.notifications.resource_subscriptions or ():
                await hub.check_uri(backend, token, uri)
            return await hub.listen(backend, token, ctx, params)
        except PMWError as exc:
            raise mcp_error(exc) from None

    server: Server[Any] = Server(
        SERVER_NAME, version=version, title="PMW", instructions=INSTRUCTIONS,
        on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
        on_list_resource_templates=list_templates, on_read_resource=read, on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe, on_subscriptions_listen=listen,
        get_tool_input_schema=lambda name: TOOLS[name].input_schema if name in TOOLS else None)
    return server


__all__ = ["RESOURCE_KINDS", "SERVER_NAME", "TokenOf", "build_server", "mcp_error"]
