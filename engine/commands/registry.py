"""The registry of commands: every agent-facing write of the World, declared once.

``COMMANDS`` maps each command's ``name`` (its World method) to its class, in a stable order (by
domain module, then as declared). A command class is registered by being declared in one of the
domain modules below; nothing else has to be listed. ``RUNTIME_CALLS`` names the World's writes that
are runtime bookkeeping, not commands: no agent, CLI or transport may call them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType, ModuleType
from typing import Any

from pydantic import ValidationError

from engine.commands import (
    actions,
    agents,
    approvals,
    artifacts,
    attention,
    handoffs,
    memory,
    messages,
    retention,
    rooms,
    state,
    subscriptions,
    tasks,
    tokens,
    topology,
    wakes,
)
from engine.commands.base import Command
from engine.errors import InvalidInput
from engine.validation import invalid_from

DOMAINS: tuple[ModuleType, ...] = (state, tasks, handoffs, memory, rooms, artifacts, messages, subscriptions,
                                   approvals, actions, retention, topology, agents, wakes, tokens)
DOMAINS = (*DOMAINS, attention)  # the attention broker's commands (engine.commands.attention)

# The World's writes that only the runtime makes (no PDP decision an agent could ask for).
RUNTIME_CALLS: tuple[str, ...] = ("record_decision", "commit_controller_step", "activate_policy_epoch",
                                  "recheck_queued_work", "bootstrap_governor", "take_snapshot")


def _declared(modules: Sequence[ModuleType]) -> dict[str, type[Command]]:
    found: dict[str, type[Command]] = {}
    for module in modules:
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, Command) and value.__module__ == module.__name__
                    and "name" in value.__dict__):
                if value.name in found:
                    raise RuntimeError(f"two commands named {value.name!r}: {found[value.name]} and {value}")
                if value.name in RUNTIME_CALLS:
                    raise RuntimeError(f"{value.name!r} is runtime bookkeeping, never a command")
                found[value.name] = value
    return found


COMMANDS: Mapping[str, type[Command]] = MappingProxyType(_declared(DOMAINS))


def command(name: str) -> type[Command]:
    """The command class named ``name``; an unknown name is ``InvalidInput`` listing the names."""
    found = COMMANDS.get(name) if isinstance(name, str) else None
    if found is None:
        raise InvalidInput("command", f"{str(name)[:100]!r} is not a command; one of: {', '.join(COMMANDS)}")
    return found


def json_schema(name: str) -> dict[str, Any]:
    """The JSON schema of the command named ``name`` (pydantic's, validation mode): what a tool or transport
    shows its callers."""
    return command(name).model_json_schema()


def parse(name: str, body: Mapping[str, Any]) -> Command:
    """The command ``name`` built from a JSON object ``body``; bad input is ``InvalidInput`` naming the field
    (nothing is read or written)."""
    cls = command(name)
    try:
        return cls.model_validate(body)
    except ValidationError as exc:
        raise invalid_from(exc) from exc


def effects() -> tuple[type[Command], ...]:
    """The commands an agent may name as effects of its decision, in registry order."""
    return tuple(c for c in COMMANDS.values() if c.agent_effect)


__all__ = ["COMMANDS", "DOMAINS", "RUNTIME_CALLS", "command", "effects", "json_schema", "parse"]
