"""Agents (stable identity), sessions (one execution occurrence on a terminal) and explicit targets."""

from __future__ import annotations

from pydantic import Field, model_validator

from engine.models.common import Id, Model, Name, Payload, TimeUs, Version
from engine.models.enums import Presence
from engine.models.lifecycle import Lifecycle

SESSION_LIFECYCLE = Lifecycle("session", {
    "activate": ({Presence.ATTACHED, Presence.ACTIVE}, Presence.ACTIVE),
    "relinquish": ({Presence.ACTIVE, Presence.ATTACHED}, Presence.ATTACHED),
    "detach": ({Presence.ACTIVE, Presence.ATTACHED, Presence.OFFLINE}, Presence.OFFLINE),
    "attach": ({Presence.OFFLINE, Presence.ATTACHED}, Presence.ATTACHED),
})


class Agent(Model):
    """A stable participant. ``agent_id`` is never a session, conversation or model id."""

    agent_id: Id
    display_name: Name
    role_id: Id
    status: Presence
    model_hint: str | None = Field(default=None, max_length=200)
    platform: Id | None = None
    capability_profile: Payload = Field(default_factory=dict)
    permission_profile: Payload = Field(default_factory=dict)
    current_task: Id | None = None
    last_seen_us: TimeUs
    created_at_us: TimeUs
    version: Version


class Session(Model):
    """One execution occurrence of an agent, bound to a terminal context (``term_key``)."""

    session_id: Id
    agent_id: Id
    term_key: Id
    status: Presence
    model_hint: str | None = Field(default=None, max_length=200)
    started_at_us: TimeUs
    updated_at_us: TimeUs
    version: Version


class Target(Model):
    """An explicit target: exactly one of agent_id, term_key or session_id. Never implicit discovery."""

    agent_id: Id | None = None
    term_key: Id | None = None
    session_id: Id | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Target:
        given = [v for v in (self.agent_id, self.term_key, self.session_id) if v is not None]
        if len(given) != 1:
            raise ValueError("a target names exactly one of agent_id, term_key or session_id")
        return self

    @classmethod
    def parse(cls, text: str) -> Target:
        """``agent:ID``, ``term:KEY`` or ``session:ID`` (a bare value is an agent id)."""
        kind, sep, value = text.partition(":")
        if not sep:
            return cls(agent_id=text)
        field = {"agent": "agent_id", "term": "term_key", "session": "session_id"}.get(kind)
        if field is None:
            raise ValueError(f"unknown target kind {kind!r}; use agent:, term: or session:")
        return cls.model_validate({field: value})

    def __str__(self) -> str:
        if self.agent_id is not None:
            return f"agent:{self.agent_id}"
        if self.term_key is not None:
            return f"term:{self.term_key}"
        return f"session:{self.session_id}"


class Registration(Model):
    """What ``register_agent`` returns: the agent and the session it now has on the terminal."""

    agent: Agent
    session: Session


__all__ = ["SESSION_LIFECYCLE", "Agent", "Presence", "Registration", "Session", "Target"]
