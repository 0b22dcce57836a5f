"""One command vocabulary: each agent-facing write of the World as one pydantic command, declared once.

``engine.commands.registry`` holds them (``COMMANDS``, ``command``, ``json_schema``); the World runs one
with ``world.execute(actor, command, op_id=, cause=)`` (``engine.world.execute``); the agents' effects
(``engine.protocol.adapters``), ``pmw exec`` and the transports' schemas are derived from them. This
package depends on ``engine.models`` and ``engine.validation`` only, never on ``engine.world``.
"""

from __future__ import annotations

from engine.commands.base import Command
from engine.commands.registry import COMMANDS, RUNTIME_CALLS, command, effects, json_schema, parse

__all__ = ["COMMANDS", "RUNTIME_CALLS", "Command", "command", "effects", "json_schema", "parse"]
