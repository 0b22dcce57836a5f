"""The attention broker's vocabulary (seed 003 §3.4, §14-16): a human's interruptibility, what may interrupt
them, the broker's outputs and its recorded decisions.

Humans in PMW are the principals whose workspace role is a human's (:data:`HUMAN_ROLES`: governors and
reviewers, the roles a human holds through ``pmw human decide`` / the console); the broker decides for them
only, and every other agent keeps being woken as before.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from engine.models.common import Id, Model, TimeUs

#: The workspace roles a human principal holds (governors decide approvals, reviewers review).
HUMAN_ROLES = ("governor", "reviewer")
DEFAULT_FULL_ALERTS = 3
DEFAULT_WINDOW_S = 3600.0
MAX_FULL_ALERTS = 100
MAX_WINDOW_S = 7 * 86400.0


class Interruptibility(StrEnum):
    """I_t of §15. UNKNOWN (nobody said) never gets the most intrusive output by default."""

    FREE = "FREE"
    FOCUSED = "FOCUSED"
    MEETING = "MEETING"
    DRIVING = "DRIVING"
    RESTING = "RESTING"
    SLEEP = "SLEEP"
    UNKNOWN = "UNKNOWN"


class AttentionOutput(StrEnum):
    """How far a notice may interrupt its human, least to most (§3.4)."""

    SILENT_LOG = "SILENT_LOG"
    BATCH_LATER = "BATCH_LATER"
    PASSIVE_BADGE = "PASSIVE_BADGE"
    FULL_ALERT = "FULL_ALERT"
    FORCE_HUMAN_REVIEW = "FORCE_HUMAN_REVIEW"


class Urgency(StrEnum):
    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"
    CRITICAL = "critical"


class Risk(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class NoticeKind(StrEnum):
    """What would wake or notify the human."""

    APPROVAL_REQUEST = "approval_request"
    REVIEW = "review"
    ESCALATION = "escalation"
    WAKE = "wake"


class Notice(Model):
    """Something that would interrupt a human: what it is about and how urgent and risky it is."""

    kind: NoticeKind
    subject_kind: str = Field(min_length=1, max_length=50)
    subject_id: str = Field(min_length=1, max_length=300)
    urgency: Urgency = Urgency.NORMAL
    risk: Risk = Risk.LOW
    side_effect: str = Field(default="S0", pattern=r"^S[0-3]$")


class Budget(Model):
    """A human's attention budget: at most ``full_alerts`` FULL_ALERTs in any ``window_s`` seconds."""

    full_alerts: int = Field(default=DEFAULT_FULL_ALERTS, ge=0, le=MAX_FULL_ALERTS)
    window_s: float = Field(default=DEFAULT_WINDOW_S, gt=0, le=MAX_WINDOW_S)


class AttentionState(Model):
    """A human's interruptibility and budget as last set (UNKNOWN and the default budget if never)."""

    human: Id
    state: Interruptibility = Interruptibility.UNKNOWN
    budget: Budget = Field(default_factory=Budget)
    set_by: Id | None = None
    set_at_us: TimeUs | None = None


class AttentionDecision(Model):
    """One decision of the broker, as recorded (event ``attention.<output, lower case>`` on the human)."""

    decision_id: Id
    human: Id
    notice: Notice
    output: AttentionOutput
    reasons: list[str]
    state: Interruptibility
    full_alerts_in_window: int = Field(ge=0, description="FULL_ALERTs the human had in the window before this.")
    budget: Budget
    decided_by: Id
    decided_at_us: TimeUs


class AttentionView(Model):
    """What a human sees of the broker: their state and the newest decisions about them (their inbox)."""

    state: AttentionState
    decisions: list[AttentionDecision]


__all__ = ["DEFAULT_FULL_ALERTS", "DEFAULT_WINDOW_S", "HUMAN_ROLES", "MAX_FULL_ALERTS", "MAX_WINDOW_S",
           "AttentionDecision", "AttentionOutput", "AttentionState", "AttentionView", "Budget", "Interruptibility",
           "Notice", "NoticeKind", "Risk", "Urgency"]
