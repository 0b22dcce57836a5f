"""Agents for ``pmw worker --agent AGENT=tests.runloop.cli_agents:ATTR`` in the CLI tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.protocol.adapters import RuleAgent
from tests.runloop.support import relay


def bob() -> RuleAgent:
    """A factory: bob bumps ``bob-out`` whenever woken."""
    return relay("bob-out")


def llm_like(context: Mapping[str, Any]) -> dict[str, Any]:
    """A decision function (what an LLM-backed agent is): JSON context in, JSON decision out."""
    wake = context["wake"]
    return {"decision": "no_action", "reason": f"nothing to do for {wake['cause']}"}


NOT_AN_ADAPTER = 42
