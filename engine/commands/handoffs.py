"""Handoffs: the source hands a task to a target with pointers and a delta, never the transcript.

PENDING -> ACCEPTED -> COMPLETED, or PENDING -> REJECTED. Accepting moves the task itself to the target.
"""

from __future__ import annotations

from pydantic import Field

from engine.commands.base import Command
from engine.commands.fields import Id, Payload, Reason, Refs, Text

MAX_STATE_REF_CHARS = 256
MAX_EXPECTED_OUTPUT_CHARS = 4000


class CreateHandoff(Command):
    """Offer ``task_id`` to ``target_agent`` with a packet of pointers and a delta (goal, state ref, evidence
    and artifact refs, constraints, authority scope, expected output, return route), never a transcript. The
    caller must hold the task (its assignee, or its owner while nobody holds it). The handed-over authority
    (``authority_scope.capabilities``) is a subset of the caller's own, by default all of it; asking for
    more is ``not_permitted``."""

    name = "create_handoff"
    events = ("handoff.created",)
    agent_effect = True
    ref_field = "handoff_id"

    target_agent: Id = Field(description="The agent the task is handed to.")
    task_id: Id
    goal: Text = Field(description="What the target is to do.")
    current_state_ref: str | None = Field(default=None, max_length=MAX_STATE_REF_CHARS)
    evidence_refs: Refs = Field(default_factory=list)
    artifact_refs: Refs = Field(default_factory=list)
    constraints: Payload = Field(default_factory=dict)
    authority_scope: Payload = Field(default_factory=dict, description=(
        "What authority is handed over, e.g. {\"capabilities\": [\"task.work\"]} (default: all the caller's)."))
    expected_output: str | None = Field(default=None, max_length=MAX_EXPECTED_OUTPUT_CHARS)
    return_route: Id | None = Field(default=None, description="Where the result goes back to.")


class AcceptHandoff(Command):
    """The target accepts a pending handoff addressed to it: the handoff is ACCEPTED and its task is now
    claimed by the target, in the same transaction."""

    name = "accept_handoff"
    events = ("handoff.accept",)
    agent_effect = True
    ref_field = "handoff_id"

    handoff_id: Id


class CompleteHandoff(Command):
    """The target reports the expected output of an accepted handoff back (to its ``return_route``)."""

    name = "complete_handoff"
    events = ("handoff.complete",)
    agent_effect = True
    ref_field = "handoff_id"

    handoff_id: Id
    result: Payload | None = None


class RejectHandoff(Command):
    """The target declines a pending handoff, with the reason; the task stays with the source."""

    name = "reject_handoff"
    events = ("handoff.reject",)
    agent_effect = True
    ref_field = "handoff_id"

    handoff_id: Id
    reason: Reason


__all__ = ["AcceptHandoff", "CompleteHandoff", "CreateHandoff", "RejectHandoff"]
