"""The attention broker's commands (seed 003 §14-16): a human's interruptibility state, set by that human or
a governor, and a notice to a human, decided by the broker and recorded."""

from __future__ import annotations

from pydantic import Field

from engine.attention.model import (
    MAX_FULL_ALERTS,
    MAX_WINDOW_S,
    AttentionOutput,
    Interruptibility,
    NoticeKind,
    Risk,
    Urgency,
)
from engine.commands.base import Command
from engine.commands.fields import Id

#: The event each broker output is recorded as (on the human: subject ``agent``, the human's id).
DECISION_EVENTS = tuple(f"attention.{o.value.lower()}" for o in AttentionOutput)


class SetAttentionState(Command):
    """Set a human's interruptibility (FREE, FOCUSED, MEETING, DRIVING, RESTING, SLEEP, UNKNOWN) and, if given,
    their attention budget (at most `full_alerts` FULL_ALERTs in any `window_s` seconds); only that human or a
    governor may. Unknown states are refused and nothing is written."""

    name = "set_attention_state"
    events = ("attention.state_set",)
    agent_effect = True
    ref_field = "human"

    human: Id = Field(description="The human principal (an agent whose role is governor or reviewer).")
    state: Interruptibility
    full_alerts: int | None = Field(default=None, ge=0, le=MAX_FULL_ALERTS, description=(
        "FULL_ALERTs allowed per window (default: as before, else 3)."))
    window_s: float | None = Field(default=None, gt=0, le=MAX_WINDOW_S, description=(
        "The budget's window in seconds (default: as before, else 3600)."))


class NotifyHuman(Command):
    """Ask the attention broker how far a notice (an approval request, a review, an escalation, a wake) may
    interrupt a human: SILENT_LOG, BATCH_LATER, PASSIVE_BADGE, FULL_ALERT or FORCE_HUMAN_REVIEW, from its
    urgency, risk and side-effect class, the human's state and attention budget. The decision and its reasons
    are recorded on the human (an `attention.<output>` event) and returned."""

    name = "notify_human"
    events = DECISION_EVENTS
    agent_effect = True
    ref_field = "decision_id"

    human: Id
    kind: NoticeKind
    subject_kind: str = Field(min_length=1, max_length=50, description="What the notice is about, e.g. approval.")
    subject_id: str = Field(min_length=1, max_length=300)
    urgency: Urgency = Urgency.NORMAL
    risk: Risk = Risk.LOW
    side_effect: str = Field(default="S0", pattern=r"^S[0-3]$", description=(
        "The side-effect class of what the human is asked about; S3 always forces a human review."))


__all__ = ["DECISION_EVENTS", "NotifyHuman", "SetAttentionState"]
