"""Behaviours of one's own: a scripted or LLM-backed agent dropped into a scenario.

An agent's ``behaviour`` is one of the library's names (``simulations.behaviours``) or ``MODULE:ATTR``, a
module path resolved with the same contract as ``pmw worker --agent ID=MODULE:ATTR``
(``engine.protocol.adapters``): ATTR is

* an **adapter**, an object with ``run(agent_state, world_view, event) -> AgentDecision``, used as it is
  (a conversation or model replacement keeps the same object: it holds what it holds);
* an **adapter factory**, a class or a callable without required arguments that returns an adapter, called
  once for each new conversation (the scenario's start, each conversation or model replacement);
* a **decision function** of one argument, mapping the JSON context ``{agent, view, wake}`` to a JSON
  decision (wrapped in :class:`~engine.protocol.adapters.CallableAdapter`: what an LLM call does).

From Python the same three kinds are passed as objects (:func:`simulations.driver.simulate`'s
``behaviours``, by agent id), so a notebook can hand a closure to one agent of a shipped scenario.

Whatever decides, the worker carries its effects out through the PDP and the gateway as that agent, and
every run ends in a receipt: a plug-in gets exactly the authority its agent was granted.

Errors, raised before anything runs: :class:`~engine.errors.BehaviourUnavailable` (the module does not
import, or has no such attribute), :class:`~engine.errors.BehaviourInvalid` (the attribute, or what its
factory returned, is none of the three kinds).
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any, cast

from engine.errors import BehaviourInvalid, BehaviourUnavailable
from engine.protocol.adapters import AgentAdapter, CallableAdapter

PLUGIN_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
_PLUGIN = re.compile(PLUGIN_PATTERN)

#: What stands for a behaviour in Python: an adapter, an adapter factory or a decision function.
AdapterSource = AgentAdapter | Callable[[], AgentAdapter] | Callable[[Mapping[str, Any]], Mapping[str, Any]]


def is_plugin_path(value: str) -> bool:
    """Whether ``value`` names a behaviour of one's own (``MODULE:ATTR``) rather than a library name."""
    return bool(_PLUGIN.match(value))


def load_plugin(path: str, *, field: str = "behaviour") -> AdapterSource:
    """Import ``MODULE:ATTR`` and check that it is one of the three kinds (not called yet).

    Raises ``BehaviourUnavailable`` (bad path, module not importable, no such attribute) or
    ``BehaviourInvalid`` (something else)."""
    if not is_plugin_path(path):
        raise BehaviourUnavailable(path, "expected MODULE:ATTR (a dotted module path, a colon, a name)", field)
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BehaviourUnavailable(path, f"module {module_name!r} does not import ({exc})", field) from exc
    if not hasattr(module, attr):
        raise BehaviourUnavailable(path, f"module {module_name!r} has no attribute {attr!r}", field)
    found: Any = getattr(module, attr)
    kind_of(found, path, field)
    return cast(AdapterSource, found)


def kind_of(source: object, name: str, field: str = "behaviour") -> str:
    """``adapter``, ``factory`` or ``decision_function``; ``BehaviourInvalid`` for anything else."""
    if isinstance(source, type):
        return "factory"
    if callable(getattr(source, "run", None)):
        return "adapter"
    if callable(source):
        required = _required_positional(source)
        if required == 0:
            return "factory"
        if required == 1:
            return "decision_function"
        raise BehaviourInvalid(name, f"a callable of {required} required arguments", field)
    raise BehaviourInvalid(name, f"a {type(source).__name__}", field)


def _required_positional(fn: Callable[..., object]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: taken as a decision function
        return 1
    return sum(1 for p in params if p.default is p.empty
               and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def new_conversation(source: AdapterSource, name: str, field: str = "behaviour") -> AgentAdapter:
    """The adapter for a new conversation of ``source``: the adapter itself, a fresh one from the factory,
    or the decision function wrapped. ``BehaviourInvalid`` when a factory returns no adapter."""
    kind = kind_of(source, name, field)
    found: Any = source
    if kind == "adapter":
        return cast(AgentAdapter, found)
    if kind == "decision_function":
        return CallableAdapter(found)
    made: Any = found()
    if not callable(getattr(made, "run", None)):
        raise BehaviourInvalid(name, f"a factory that returned a {type(made).__name__}", field)
    return cast(AgentAdapter, made)

__all__ = ["PLUGIN_PATTERN", "AdapterSource", "is_plugin_path", "kind_of", "load_plugin", "new_conversation"]
