"""Subscriptions: what an agent follows (an event about a followed subject is a reason to wake it)."""

from __future__ import annotations

from pydantic import Field

from engine.commands.base import Command
from engine.commands.fields import Id

MAX_SUBJECT_CHARS = 300


class Subscribe(Command):
    """``agent_id`` (default: the caller) follows ``subject_id`` (a task, a state key, a room ...);
    ``active`` false stops following. Decided as ``agent:subscribe`` on the subscribing agent (itself, or a
    governor)."""

    name = "subscribe"
    events = ("subscription.changed",)
    agent_effect = True

    subject_id: str = Field(min_length=1, max_length=MAX_SUBJECT_CHARS, description="What to follow.")
    agent_id: Id | None = Field(default=None, description="Who follows (default: the caller).")
    active: bool = True

    def ref(self, result: object) -> str | None:
        agent, subject = (getattr(result, part) for part in ("agent_id", "subject_id"))
        return f"{agent}/{subject}"


__all__ = ["Subscribe"]
