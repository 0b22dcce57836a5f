"""The value sets of the domain models that the command line names in its options and help texts.

Plain ``StrEnum`` classes, importable without pydantic (``pmw --help`` stays light). Each is re-exported
by the model module of its concept (``engine.models.tasks.TaskStatus`` is this ``TaskStatus``), which is
where the rest of the code imports it from.
"""

from __future__ import annotations

from enum import StrEnum


class Presence(StrEnum):
    """active owns its terminal context; attached participates without owning; offline keeps everything."""

    ACTIVE = "active"
    ATTACHED = "attached"
    OFFLINE = "offline"


class HandoffStatus(StrEnum):
    PENDING = "pending"
    ACCEPTED = "accepted"
    COMPLETED = "completed"
    REJECTED = "rejected"


class EpistemicType(StrEnum):
    OBSERVATION = "observation"
    USER_STATEMENT = "user_statement"
    TOOL_RESULT = "tool_result"
    HYPOTHESIS = "hypothesis"
    INFERENCE = "inference"
    CONSTRAINT = "constraint"
    DECISION = "decision"
    VERIFIED_FACT = "verified_fact"
    OPEN_QUESTION = "open_question"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"


class TaskStatus(StrEnum):
    OPEN = "open"
    ASSIGNED = "assigned"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    FAILED = "failed"
    ABORTED = "aborted"


class EdgeType(StrEnum):
    INFO = "info"
    CONTROL = "control"
    AUTHORITY = "authority"
    MEMORY = "memory"
    ROOM = "room"


class Decision(StrEnum):
    NO_ACTION = "no_action"
    ACT = "act"
    SHARE = "share"
    JOIN = "join"
    HANDOFF = "handoff"
    REQUEST = "request"
    VERIFY = "verify"


class Outcome(StrEnum):
    ACTED = "acted"
    NO_ACTION = "no_action"
    DENIED = "denied"
    CONFLICT = "conflict"
    SUPPRESSED = "suppressed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    # the decision envelope's outcomes other than execute (engine/runloop/envelope.py; seed 003 §8-9)
    DRAFTED = "drafted"
    DEFERRED = "deferred"
    REFUSED = "refused"
    ESCALATED = "escalated"
    IDLE = "idle"
    # a layered wake that stopped at the passive monitor: logged, the agent not run (seed 001 §45-46)
    MONITORED = "monitored"


class WakeStatus(StrEnum):
    PENDING = "pending"
    CLAIMED = "claimed"
    ACKED = "acked"
    CANCELLED = "cancelled"


__all__ = ["Decision", "EdgeType", "EpistemicType", "HandoffStatus", "Outcome", "Presence", "TaskStatus",
           "WakeStatus"]
