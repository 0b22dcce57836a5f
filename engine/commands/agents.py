"""Identity, authority and presence: register, grant, and session changes by explicit target.

None of these is an agent effect: who an agent is and which terminal it is on belong to its runtime, and
authority is a governor's grant.
"""

from __future__ import annotations

from pydantic import Field

from engine.commands.base import Command
from engine.commands.fields import Capability, Id, Name, Payload, TargetText

MAX_CAPABILITIES = 256
MAX_CLEARANCE = 5
MAX_MODEL_HINT_CHARS = 200


class RegisterAgent(Command):
    """Create the agent if new (else recover it, e.g. after going offline) and attach a new session on
    ``term_key``; the new session is ``attached`` (``activate_session`` claims the terminal's active role).
    Roles and profiles are granted, never self-taken: an agent registers itself only with its current role or
    one that carries no authority, and profiles given explicitly (or a changed role of a known agent) are a
    grant (governors only); left out, a known agent keeps what it was granted. The caller defaults to the
    agent itself."""

    name = "register_agent"
    events = ("agent.registered", "agent.recovered")
    ref_field = "agent.agent_id"

    agent_id: Id = Field(description="The agent's stable id (never a session, conversation or model id).")
    display_name: Name
    role_id: Id = Field(description="The agent's role, e.g. worker or reviewer.")
    term_key: Id = Field(description="The terminal context the new session is bound to.")
    session_id: Id | None = Field(default=None, description="Choose the new session's id (default: generated).")
    model_hint: str | None = Field(default=None, max_length=MAX_MODEL_HINT_CHARS)
    platform: Id | None = None
    capability_profile: Payload | None = Field(default=None, description=(
        "Replace the agent's capability profile (a grant; omit to keep it, or {} for a new agent)."))
    permission_profile: Payload | None = Field(default=None, description=(
        "Replace the agent's permission profile (a grant; omit to keep it)."))


class Grant(Command):
    """Set an agent's maximum capabilities, clearance and/or workspace role (policy action ``agent:grant``:
    governors only). Capabilities given replace the agent's list; a field left out stays as it is. ``role_id``
    is how an agent gets a privileged role (governor, reviewer, moderator): it never registers itself with
    one."""

    name = "grant"
    events = ("agent.granted",)
    ref_field = "agent_id"

    agent_id: Id = Field(description="The agent whose authority is set.")
    capabilities: list[Capability] | None = Field(default=None, max_length=MAX_CAPABILITIES, description=(
        "The agent's capabilities, e.g. state.write, task.create (replaces the list)."))
    clearance: int | None = Field(default=None, ge=0, le=MAX_CLEARANCE, description="Clearance level, 0 to 5.")
    role_id: Id | None = Field(default=None, description="The agent's new workspace role.")


class ActivateSession(Command):
    """Make the one session ``target`` names the active owner of its terminal (at most one active agent
    per terminal; another owner is ``terminal_owned``)."""

    name = "activate_session"
    events = ("session.activate",)
    ref_field = "session_id"

    target: TargetText


class RelinquishSession(Command):
    """Give up the terminal's active ownership; the session ``target`` names stays attached."""

    name = "relinquish_session"
    events = ("session.relinquish",)
    ref_field = "session_id"

    target: TargetText


class DetachSession(Command):
    """Mark the one session ``target`` names offline. Nothing durable is deleted."""

    name = "detach_session"
    events = ("session.detach",)
    ref_field = "session_id"

    target: TargetText


class UnregisterAgent(Command):
    """Mark every session ``target`` names offline (and its agents' presence). Identity, tasks, messages
    and memory stay. Returns the sessions that went offline."""

    name = "unregister_agent"
    events = ("agent.unregistered",)

    target: TargetText


__all__ = ["ActivateSession", "DetachSession", "Grant", "RegisterAgent", "RelinquishSession", "UnregisterAgent"]
