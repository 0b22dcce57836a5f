"""Every public World call, with a valid value for each parameter, so that a test can swap one parameter for a
bad value and call it.

The calls are found by introspection (``inspect.signature`` of each public method of the World, whatever
mixin, registry or wrapper defines it), so a call added or moved later is covered without a change here.
A parameter's valid value comes from its name (the ids of :func:`tests.hardening.support.seed`), else
from its annotation; a parameter with a default keeps it unless it is the one being fuzzed.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.world import World

NOT_INPUT = {"close", "open", "from_settings"}
# Valid values by parameter name; ``$name`` is an id of the seeded world.
BY_NAME: dict[str, Any] = {
    "actor": "alice", "worker": "alice", "agent_id": "alice", "source_agent": "alice", "target_agent": "bob",
    "assignee": "bob", "receiver": "bob", "recipient": "bob", "replacement_id": "$memory2",
    "task_id": "$task", "memory_id": "$memory", "room_id": "$room", "wake_id": "$wake", "handoff_id": "$handoff",
    "approval_id": "$approval", "artifact_id": "$artifact", "delivery_id": "$delivery", "receipt_id": "rcp-none",
    "subject_id": "progress:t1", "world_id": "w1", "key": "k", "prefix": "", "kind": "task", "ident": "$task",
    "objects": [("task", "$task")], "target": "agent:alice", "epoch": "e-test", "source": "tests",
    "display_name": "Xavier", "role_id": "worker", "term_key": "t-new", "goal": "a goal", "reason": "a reason",
    "content": "some content", "body": "a body", "idempotency_key": "ik-1", "channel": "general",
    "recipient_kind": "agent", "decision": "no_action", "outcome": "acted", "event_type": "note.posted",
    "edge_type": "info", "epistemic_type": "inference", "artifact_type": "doc", "object_id": "search",
    "expected_version": 1, "limit": 10, "after_seq": 0, "budget": 50, "value": {"v": 2},
    "source_memory_ids": ["$memory"], "changes": [{"source_agent": "alice", "target_agent": "bob",
                                                    "edge_type": "info"}],
}

def _a_command(ids: dict[str, str]) -> Any:
    """A valid registered command (for ``world.execute``): creating a task."""
    from engine.commands import parse

    return parse("create_task", {"goal": "from the fuzz"})


# Valid values built from the seeded ids (objects no literal can be).
BUILT: dict[str, Callable[[dict[str, str]], Any]] = {"command": _a_command}
# Keyword packets (``**packet``) and the names and kinds a fuzz may send through them.
PACKETS: dict[str, dict[str, str]] = {
    "create_handoff": {"current_state_ref": "str", "evidence_refs": "list", "constraints": "dict",
                       "authority_scope": "dict", "expected_output": "str"},
    "ack_wake": {"reason": "str", "payload": "dict", "observed_state_version": "int"},
    "write_receipt": {"reason": "str", "payload": "dict", "observed_state_version": "int"},
}


# Parameters whose values have a shape of their own: the bad value goes inside it (kind used for it, shaper).
SHAPED: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "objects": ("str", lambda bad: [("task", bad)]),
}


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # str, int, float, dict, list, any, bytes, or "" (not fuzzable: a model, a callable)
    required: bool
    packet: bool = False


@dataclass(frozen=True)
class Call:
    method: str
    params: tuple[Param, ...]

    def fuzzable(self) -> list[Param]:
        return [p for p in self.params if p.kind not in ("", "bytes")]


def _kind(annotation: Any) -> str:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    text = text.replace("None", "").replace("|", " ").strip()
    if any(m in text for m in ("Cause", "TraceBody", "Step", "Weights", "Callable")) and "dict" not in text:
        return ""
    if "bytes" in text:
        return "bytes"
    seq = min((text.find(m) for m in ("list", "Sequence") if m in text), default=-1)
    if "dict" in text and (seq < 0 or text.find("dict") < seq):
        return "dict"
    if seq >= 0:
        return "list"
    if text in ("Any", "object"):
        return "any"
    if "str" in text:
        return "str"
    if "float" in text:
        return "float"
    if "bool" in text:
        return ""
    if "int" in text:
        return "int"
    return ""


def world_calls(cls: type = World) -> list[Call]:
    """Every public method of the World (or of ``cls``, e.g. the runtime's book) with its parameters."""
    calls = []
    for name, fn in inspect.getmembers(cls, callable):
        if name.startswith("_") or name in NOT_INPUT or isinstance(inspect.getattr_static(cls, name), type):
            continue
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            continue
        params: list[Param] = []
        for p in list(sig.parameters.values())[1:]:
            if p.kind is inspect.Parameter.VAR_KEYWORD:
                params += [Param(n, k, False, packet=True) for n, k in PACKETS.get(name, {}).items()]
            elif p.kind is not inspect.Parameter.VAR_POSITIONAL:
                kind = SHAPED[p.name][0] if p.name in SHAPED else _kind(p.annotation)
                params.append(Param(p.name, kind, p.default is inspect.Parameter.empty))
        calls.append(Call(name, tuple(params)))
    return calls


def _valid(param: Param, ids: dict[str, str]) -> Any:
    def resolve(value: Any) -> Any:
        if isinstance(value, str) and value.startswith("$"):
            return ids[value[1:]]
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if isinstance(value, tuple):
            return tuple(resolve(v) for v in value)
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        return value

    if param.name in BY_NAME:
        return resolve(BY_NAME[param.name])
    if param.name in BUILT:
        return BUILT[param.name](ids)
    return {"str": "x", "int": 1, "float": 0.5, "dict": {}, "list": [], "any": "x", "bytes": b"x"}.get(param.kind)


def book_calls() -> list[Call]:
    """Every public method of the runtime's book (:class:`engine.world.book.RuntimeBook`) the World lacks:
    the runtime's bookkeeping."""
    from engine.world.book import RuntimeBook

    on_world = {c.method for c in world_calls()}
    return [c for c in world_calls(RuntimeBook) if c.method not in on_world]


def invocation(world: object, call: Call, ids: dict[str, str], fuzzed: str, bad: Any) -> Callable[[], Any] | None:
    """``world.<method>(...)`` (``world``: the World, or the book for a :func:`book_calls` call) with
    ``fuzzed`` set to ``bad`` and every other required parameter valid; ``None`` when a required parameter
    has no valid value this module knows."""
    kwargs: dict[str, Any] = {}
    for param in call.params:
        if param.name == fuzzed:
            kwargs[param.name] = SHAPED[param.name][1](bad) if param.name in SHAPED else bad
        elif param.required:
            value = _valid(param, ids)
            if value is None:
                return None
            kwargs[param.name] = value
    method = getattr(world, call.method)
    return lambda: method(**kwargs)


__all__ = ["Call", "Param", "book_calls", "invocation", "world_calls"]
