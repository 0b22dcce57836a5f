"""How much one principal may hold open on ``/mcp``: sessions, listen streams, and how long an idle session lives.

The SDK's own limits are server-wide (10,000 sessions idle for up to 30 minutes; 1,024 listen streams), so one
token could fill them for everyone (attack findings items 2 and 7). PMW caps each principal well below them:

=============================== ======= =========================================================
environment variable            default what
=============================== ======= =========================================================
``PMW_MCP_SESSIONS_PER_TOKEN``  16      open stateful sessions of one token
``PMW_MCP_SESSIONS_PER_AGENT``  64      open stateful sessions of one agent (all its tokens)
``PMW_MCP_SESSION_IDLE_S``      300     seconds a session with no request in flight lives
``PMW_MCP_LISTENS_PER_TOKEN``   16      open ``subscriptions/listen`` streams of one token
``PMW_MCP_LISTENS_PER_AGENT``   64      open ``subscriptions/listen`` streams of one agent
=============================== ======= =========================================================

Read once when ``/mcp`` is mounted; a value that is not a positive number refuses to start (``invalid_input``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from engine.errors import InvalidInput

ENV_PREFIX = "PMW_MCP_"


@dataclass(frozen=True)
class McpLimits:
    """Per-principal caps on ``/mcp`` (see the module docstring); each field is read from
    ``PMW_MCP_<FIELD>`` (upper case) by :meth:`from_env`."""

    sessions_per_token: int = 16
    sessions_per_agent: int = 64
    session_idle_s: float = 300.0
    listens_per_token: int = 16
    listens_per_agent: int = 64

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> McpLimits:
        """The limits of ``env`` (``os.environ`` by default); unset variables keep the defaults. A value that is
        not a positive (finite) number is ``InvalidInput`` naming the variable."""
        source = os.environ if env is None else env
        values: dict[str, int | float] = {}
        for spec in fields(cls):
            name = ENV_PREFIX + spec.name.upper()
            raw = source.get(name)
            if raw is None or raw.strip() == "":
                continue
            try:
                value: int | float = float(raw) if spec.type == "float" else int(raw)
            except ValueError:
                raise InvalidInput(name, f"{raw[:40]!r} is not a number") from None
            if not (math.isfinite(value) and value > 0):
                raise InvalidInput(name, f"{raw[:40]!r} is not a positive number")
            values[spec.name] = value
        return cls(**values)  # type: ignore[arg-type]


__all__ = ["ENV_PREFIX", "McpLimits"]
