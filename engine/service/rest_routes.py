"""The REST resources of ``pmw serve``: one table of routes, each a World call (a command of the registry or
one of the World's reads) at a resource-style path.

A :class:`Route` names the resource (its OpenAPI tag), the method and path, the call, which path
parameters fill which of the call's fields, and which path parameters must name the token's own agent
(``own``: refused ``not_permitted`` before anything is read when they name anyone else). Everything else
is derived: a command route's body is the command's pydantic model minus the fields its path fills; a
read route's query parameters are the World read's keyword parameters (``engine.service.rest_reads``).
Every command is also an action at ``POST /v1/actions/<command>`` (:func:`action_routes`), so none is left
out of the API. Nothing here is hand-copied from a model: a field named in a route that its call does not
take is refused when the table is checked (:func:`check_routes`, run when the API is mounted).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from engine.commands import COMMANDS
from engine.service.calls import WORLD_CALLS, WORLD_READS


@dataclass(frozen=True)
class Route:
    """One REST operation: ``method path`` runs the World call ``call``."""

    resource: str
    method: str
    path: str
    call: str
    #: path parameter -> the call's field (or parameter) it fills
    fills: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: path parameters that must name the token's agent (checked like a principal parameter)
    own: tuple[str, ...] = ()
    #: a short summary for the OpenAPI document (default: the command's description, or the read's name)
    summary: str = ""
    #: path parameters whose values may hold ``/`` (a state key ``plan/step``): matched to the path's end
    slashed: tuple[str, ...] = ()

    @property
    def is_command(self) -> bool:
        """Whether the call is a command of the registry (a write with a body) rather than a read."""
        return self.call in COMMANDS

    @property
    def mounted_path(self) -> str:
        """The path as the router matches it (``{key:path}`` for a slashed parameter); ``path`` is the
        template the OpenAPI document and the docs show."""
        path = self.path
        for param in self.slashed:
            path = path.replace("{" + param + "}", "{" + param + ":path}")
        return path

    @property
    def operation_id(self) -> str:
        """The operation's id in the OpenAPI document (unique per route)."""
        if self.path == f"/v1/actions/{self.call}":
            return f"action_{self.call}"
        return self.call if not self.own else f"{self.call}_of_agent"


def _r(resource: str, method: str, path: str, call: str, own: tuple[str, ...] = (), summary: str = "",
       slashed: tuple[str, ...] = (), **fills: str) -> Route:
    return Route(resource, method, path, call, MappingProxyType(fills), own, summary, slashed)


#: The resource-style routes (the generic actions are :func:`action_routes`).
ROUTES: tuple[Route, ...] = (
    _r("state", "GET", "/v1/state", "list_state"),
    _r("state", "GET", "/v1/state/{key}", "get_state", slashed=("key",), key="key"),
    _r("state", "PUT", "/v1/state/{key}", "compare_and_set_state", slashed=("key",), key="key"),
    _r("events", "GET", "/v1/events", "events"),
    _r("events", "POST", "/v1/events", "append_event"),
    _r("tasks", "GET", "/v1/tasks", "list_tasks"),
    _r("tasks", "POST", "/v1/tasks", "create_task"),
    _r("tasks", "GET", "/v1/tasks/{task_id}", "get_task", task_id="task_id"),
    _r("tasks", "POST", "/v1/tasks/{task_id}/assign", "assign_task", task_id="task_id"),
    _r("tasks", "POST", "/v1/tasks/{task_id}/claim", "claim_task", task_id="task_id"),
    _r("tasks", "POST", "/v1/tasks/{task_id}/complete", "complete_task", task_id="task_id"),
    _r("tasks", "POST", "/v1/tasks/{task_id}/fail", "fail_task", task_id="task_id"),
    _r("tasks", "POST", "/v1/tasks/{task_id}/release", "release_task", task_id="task_id"),
    _r("tasks", "POST", "/v1/tasks/{task_id}/abort", "abort_task", task_id="task_id"),
    _r("tasks", "GET", "/v1/tasks/{task_id}/checkpoint", "task_checkpoint", task_id="task_id"),
    _r("handoffs", "GET", "/v1/handoffs", "list_handoffs"),
    _r("handoffs", "POST", "/v1/handoffs", "create_handoff"),
    _r("handoffs", "GET", "/v1/handoffs/{handoff_id}", "get_handoff", handoff_id="handoff_id"),
    _r("handoffs", "POST", "/v1/handoffs/{handoff_id}/accept", "accept_handoff", handoff_id="handoff_id"),
    _r("handoffs", "POST", "/v1/handoffs/{handoff_id}/complete", "complete_handoff", handoff_id="handoff_id"),
    _r("handoffs", "POST", "/v1/handoffs/{handoff_id}/reject", "reject_handoff", handoff_id="handoff_id"),
    _r("handoffs", "GET", "/v1/handoffs/{handoff_id}/checkpoint", "handoff_checkpoint", handoff_id="handoff_id"),
    _r("contracts", "GET", "/v1/contracts/{action}", "action_contract", action="action"),
    _r("contracts", "GET", "/v1/action-attempts/{idempotency_key}", "action_status",
       idempotency_key="idempotency_key"),
    _r("memory", "GET", "/v1/memory", "list_memory"),
    _r("memory", "POST", "/v1/memory", "store_memory"),
    _r("memory", "GET", "/v1/memory/{memory_id}", "get_memory", memory_id="memory_id"),
    _r("memory", "POST", "/v1/memory/{memory_id}/propose", "propose_memory", memory_id="memory_id"),
    _r("memory", "POST", "/v1/memory/{memory_id}/review", "review_memory", memory_id="memory_id"),
    _r("memory", "POST", "/v1/memory/{memory_id}/promote", "promote_memory", memory_id="memory_id"),
    _r("memory", "POST", "/v1/memory/{memory_id}/reject", "reject_memory", memory_id="memory_id"),
    _r("memory", "POST", "/v1/memory/{memory_id}/archive", "archive_memory", memory_id="memory_id"),
    _r("memory", "POST", "/v1/memory/{memory_id}/reopen", "reopen_memory", memory_id="memory_id"),
    _r("memory", "POST", "/v1/memory/{memory_id}/supersede", "supersede_memory", memory_id="memory_id"),
    _r("memory", "POST", "/v1/memory/{memory_id}/revoke", "revoke_memory", memory_id="memory_id"),
    _r("rooms", "POST", "/v1/rooms", "create_room"),
    _r("rooms", "GET", "/v1/rooms/{room_id}", "get_room", room_id="room_id"),
    _r("rooms", "GET", "/v1/rooms/{room_id}/members", "room_members", room_id="room_id"),
    _r("rooms", "POST", "/v1/rooms/{room_id}/members", "invite_to_room", room_id="room_id"),
    _r("rooms", "POST", "/v1/rooms/{room_id}/join", "join_room", room_id="room_id"),
    _r("rooms", "POST", "/v1/rooms/{room_id}/leave", "leave_room", room_id="room_id"),
    _r("rooms", "POST", "/v1/rooms/{room_id}/close", "close_room", room_id="room_id"),
    _r("rooms", "GET", "/v1/rooms/{room_id}/discussion", "room_discussion", room_id="room_id"),
    _r("rooms", "POST", "/v1/rooms/{room_id}/discussion", "discuss", room_id="room_id"),
    _r("rooms", "GET", "/v1/rooms/{room_id}/answers", "room_answers", room_id="room_id"),
    _r("rooms", "POST", "/v1/rooms/{room_id}/answers", "commit_answer", room_id="room_id"),
    _r("rooms", "POST", "/v1/rooms/{room_id}/distill", "distill_room", room_id="room_id"),
    _r("wakes", "GET", "/v1/wakes", "list_wakes"),
    _r("wakes", "POST", "/v1/wakes", "enqueue_wake"),
    _r("wakes", "POST", "/v1/wakes/claim", "claim_wake"),
    _r("wakes", "GET", "/v1/wakes/{wake_id}", "get_wake", wake_id="wake_id"),
    _r("wakes", "POST", "/v1/wakes/{wake_id}/ack", "ack_wake", wake_id="wake_id"),
    _r("wakes", "POST", "/v1/wakes/{wake_id}/cancel", "cancel_wake", wake_id="wake_id"),
    _r("wakes", "GET", "/v1/wakes/{wake_id}/receipt", "receipt_for_wake", wake_id="wake_id"),
    _r("wakes", "GET", "/v1/wakes/{wake_id}/trace", "get_trace", wake_id="wake_id"),
    _r("receipts", "GET", "/v1/receipts", "list_receipts"),
    _r("receipts", "POST", "/v1/receipts", "write_receipt"),
    _r("receipts", "GET", "/v1/receipts/{receipt_id}", "get_receipt", receipt_id="receipt_id"),
    _r("artifacts", "GET", "/v1/artifacts", "list_artifacts"),
    _r("artifacts", "POST", "/v1/artifacts", "register_artifact"),
    _r("artifacts", "GET", "/v1/artifacts/{artifact_id}", "get_artifact", artifact_id="artifact_id"),
    _r("artifacts", "GET", "/v1/artifacts/{artifact_id}/versions", "artifact_versions", artifact_id="artifact_id"),
    _r("artifacts", "POST", "/v1/artifacts/{artifact_id}/versions", "new_artifact_version",
       artifact_id="artifact_id"),
    _r("artifacts", "GET", "/v1/artifacts/{artifact_id}/content", "read_artifact", artifact_id="artifact_id"),
    _r("messages", "POST", "/v1/messages", "send_message"),
    _r("messages", "GET", "/v1/messages/unread", "unread"),
    _r("messages", "POST", "/v1/deliveries/{delivery_id}/claim", "claim_message", delivery_id="delivery_id"),
    _r("messages", "POST", "/v1/deliveries/{delivery_id}/ack", "ack_message", delivery_id="delivery_id"),
    _r("agents", "GET", "/v1/agents", "list_agents"),
    _r("agents", "POST", "/v1/agents", "register_agent"),
    _r("agents", "GET", "/v1/agents/{agent_id}", "get_agent", agent_id="agent_id"),
    _r("agents", "POST", "/v1/agents/{agent_id}/grant", "grant", agent_id="agent_id"),
    _r("agents", "GET", "/v1/agents/{agent_id}/allowed-actions", "allowed_actions", ("agent_id",),
       "What the agent may do to one object (kind, ident): allowed and denied actions.", agent_id="actor"),
    _r("agents", "GET", "/v1/agents/{agent_id}/projection", "project_world", ("agent_id",),
       "The agent's bounded projection of the world (what it reads when woken).", agent_id="agent_id"),
    _r("agents", "GET", "/v1/agents/{agent_id}/memory", "list_memory", ("agent_id",),
       "The memory the agent may read.", agent_id="actor"),
    _r("agents", "GET", "/v1/agents/{agent_id}/wakes", "list_wakes", ("agent_id",),
       "The agent's wakes.", agent_id="target_agent"),
    _r("agents", "GET", "/v1/agents/{agent_id}/receipts", "list_receipts", ("agent_id",),
       "The agent's decision receipts.", agent_id="agent_id"),
    _r("topology", "GET", "/v1/topology", "get_topology"),
    _r("approvals", "GET", "/v1/approvals/{approval_id}", "get_approval", approval_id="approval_id"),
)


def action_routes() -> tuple[Route, ...]:
    """``POST /v1/actions/<command>`` for every command of the registry (its body: the command's model)."""
    return tuple(Route("actions", "POST", f"/v1/actions/{name}", name) for name in COMMANDS
                 if name in WORLD_CALLS)


def all_routes() -> tuple[Route, ...]:
    """The resource routes, then one action per command."""
    return ROUTES + action_routes()


def check_routes(routes: tuple[Route, ...], world: type) -> None:
    """Refuse (``RuntimeError``) a table naming a call that is not served, a filled field the call does not
    take, a path parameter the path does not hold, or two routes on one method and path."""
    seen: set[tuple[str, str]] = set()
    for route in routes:
        if (route.method, route.path) in seen:
            raise RuntimeError(f"two routes on {route.method} {route.path}")
        seen.add((route.method, route.path))
        if route.call not in WORLD_CALLS or (not route.is_command and route.call not in WORLD_READS):
            raise RuntimeError(f"{route.path}: {route.call!r} is not a served World call")
        takes = (set(COMMANDS[route.call].model_fields) if route.is_command
                 else set(inspect.signature(getattr(world, route.call)).parameters) - {"self"})
        for param, target in route.fills.items():
            if "{" + param + "}" not in route.path:
                raise RuntimeError(f"{route.path}: no path parameter {param!r}")
            if target not in takes:
                raise RuntimeError(f"{route.path}: {route.call} takes no {target!r}")
        if not set(route.own) <= set(route.fills) or not set(route.slashed) <= set(route.fills):
            raise RuntimeError(f"{route.path}: an own or slashed parameter must fill a field")


__all__ = ["ROUTES", "Route", "action_routes", "all_routes", "check_routes"]
