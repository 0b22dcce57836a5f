"""What a server serves: which calls of the World and of the governance facade a token may make, and how
the token's agent becomes each call's principal.

A request names a call and gives its keyword arguments as a JSON object. The principal is the token's agent,
never a field of the request: every parameter that names who acts (``actor``; a worker's ``worker`` for
wake claims and acks) is filled with it, and a request that names anyone else there is refused
(``NotPermitted``) before anything is read. A claim over the API is always the token's agent's own
(``agent_id`` forced). A ``read``-scoped token may make only reads. The time a call acts at is the world's
clock (:data:`RUNTIME_FIELDS`), and a transport bounds what one call may ask (:data:`TRANSPORT_LIMITS`).
Runtime bookkeeping (``RUNTIME_CALLS``), ``execute`` and anything private are not calls at all; a command's
causation link is the runtime's to set.
Arguments are passed through to the World method, which validates them as it validates an in-process call
(its command model).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.auth.tokens import scope_allows
from engine.client.http import TOKEN_AGENT
from engine.commands import COMMANDS, RUNTIME_CALLS
from engine.errors import InvalidInput, NotFound, NotPermitted
from engine.models.tokens import TokenPrincipal

#: The World's reads a token may make (every parameter named ``actor`` is the token's agent).
WORLD_READS: frozenset[str] = frozenset({
    "action_contract", "action_status", "allowed_actions", "allowed_actions_batch", "artifact_versions",
    "attention_of", "current_policy_epoch", "events", "get_agent", "get_approval", "get_artifact", "get_handoff",
    "get_memory",
    "get_receipt", "get_room", "get_state", "get_task", "get_topology", "get_trace", "get_wake",
    "handoff_checkpoint", "list_agents", "list_artifacts", "list_handoffs", "list_memory", "list_receipts",
    "list_state", "list_tasks", "list_tokens", "list_traces", "list_wakes", "project_world", "read_artifact",
    "receipt_for_wake", "resolve_target", "room_answers", "room_discussion", "room_members", "subscriptions",
    "task_checkpoint", "unread",
})
#: The World's writes that are not commands of the registry but agent-facing all the same.
WORLD_WRITES: frozenset[str] = frozenset({"issue_token", "revoke_token"})
#: The calls whose lease owner is the caller: claimed and acked by the token's agent for itself only.
WAKE_CALLS: frozenset[str] = frozenset({"claim_wake", "ack_wake"})
#: Command fields only the runtime sets: the time a call acts at is the world's clock, never a request's
#: (``close_stale_rooms(now_us=...)`` in process is a simulation's driver stepping its own clock).
RUNTIME_FIELDS: frozenset[str] = frozenset({"now_us"})
#: Bounds a transport puts on a call's arguments beyond the World's own: (parameter, most items). Calls are
#: served one at a time, so one request may not hold the world for long (10,000 objects of
#: ``allowed_actions_batch`` held it ~10 s; 500 is one PDP request's worth).
TRANSPORT_LIMITS: Mapping[str, tuple[str, int]] = {"allowed_actions_batch": ("objects", 500)}


@dataclass(frozen=True)
class CallSpec:
    """One call a token may make: its name, whether it writes, and the parameters that name its principal."""

    name: str
    write: bool
    principal_params: tuple[str, ...]
    #: parameters a request may never set: the runtime's own (a command's causation link is the runtime's)
    runtime_params: tuple[str, ...] = ()


def _world_specs() -> dict[str, CallSpec]:
    specs = {name: CallSpec(name, False, ("actor",)) for name in WORLD_READS}
    specs["current_policy_epoch"] = CallSpec("current_policy_epoch", False, ())
    for name, cls in COMMANDS.items():
        if name not in RUNTIME_CALLS:
            runtime = (cls.cause_param,) if cls.cause_param is not None else ()
            specs[name] = CallSpec(name, True, (cls.actor_param,),
                                   runtime + tuple(sorted(RUNTIME_FIELDS & set(cls.model_fields))))
    for name in WORLD_WRITES - set(specs):
        specs[name] = CallSpec(name, True, ("actor",))
    return specs


WORLD_CALLS: Mapping[str, CallSpec] = _world_specs()


def spec_of(calls: Mapping[str, CallSpec], facade: str, name: str) -> CallSpec:
    """The spec of ``name``; an unknown or private name is ``NotFound`` (nothing is looked up by it)."""
    found = calls.get(name) if isinstance(name, str) else None
    if found is None:
        raise NotFound(f"{facade} call", str(name)[:100])
    return found


def bind(spec: CallSpec, principal: TokenPrincipal, arguments: Mapping[str, Any],
         positional: Sequence[Any] = (), *, target: object | None = None) -> dict[str, Any]:
    """The keyword arguments of the call, with the principal filled from the token. ``positional`` (a
    client's convenience) is mapped to parameter names with ``target``'s signature first. Refused (nothing
    read or written): a write on a read-only token, a principal parameter naming another agent, runtime
    parameters, a claim for another agent, arguments the call does not take."""
    if not isinstance(arguments, Mapping):
        raise InvalidInput("arguments", "must be a JSON object of keyword arguments")
    if spec.write and not scope_allows(principal.scope, write=True):
        raise NotPermitted(principal.agent_id, spec.name, "token", principal.token_id,
                           f"a {principal.scope}-scoped token may only read")
    signature = inspect.signature(getattr(target, spec.name)) if target is not None else None
    kwargs = dict(arguments)
    if positional:
        if signature is None:
            raise InvalidInput("positional", f"{spec.name} takes keyword arguments only")
        try:
            kwargs = dict(signature.bind_partial(*positional, **kwargs).arguments)
        except TypeError as exc:
            raise InvalidInput("arguments", f"{spec.name}: {exc}") from exc
    for name in kwargs:
        if not isinstance(name, str) or name in spec.runtime_params or name.startswith("_"):
            raise InvalidInput(str(name)[:100], "is set by the runtime, never by a request")
    if (limit := TRANSPORT_LIMITS.get(spec.name)) is not None:
        param, most = limit
        items = kwargs.get(param)
        if isinstance(items, Sequence) and not isinstance(items, str) and len(items) > most:
            raise InvalidInput(param, f"{len(items)} items; at most {most} per call over a transport")
    for param in spec.principal_params:
        given = kwargs.get(param)
        if given not in (None, TOKEN_AGENT, principal.agent_id):
            raise NotPermitted(principal.agent_id, spec.name, "agent", str(given)[:128],
                               f"this token is {principal.agent_id!r}'s: it acts only as {principal.agent_id!r}")
        kwargs[param] = principal.agent_id
    if spec.name == "claim_wake":  # a claim over the API is the caller's own wakes only
        for param in ("agent_id", "agent_ids"):
            given = kwargs.pop(param, None)
            if given not in (None, principal.agent_id, [principal.agent_id]):
                raise NotPermitted(principal.agent_id, "claim", "wake", str(given)[:128],
                                   "a token claims only its own agent's wakes")
        kwargs["agent_id"] = principal.agent_id
    if signature is not None:
        try:
            signature.bind(**kwargs)
        except TypeError as exc:
            raise InvalidInput("arguments", f"{spec.name}: {exc}") from exc
    return kwargs


def invoke(target: object, spec: CallSpec, kwargs: dict[str, Any]) -> Any:
    """Call ``target.<spec.name>(**kwargs)`` (arguments checked by :func:`bind`); its errors pass unchanged."""
    method: Callable[..., Any] = getattr(target, spec.name)
    return method(**kwargs)


__all__ = ["RUNTIME_FIELDS", "TOKEN_AGENT", "TRANSPORT_LIMITS", "WORLD_CALLS", "CallSpec", "bind", "invoke", "spec_of"]
