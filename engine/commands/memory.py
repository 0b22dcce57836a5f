"""Scoped memory: private and room memory, and the reviewed path to shared ("shared is not true").

``store_memory`` writes private or room memory only; ``propose_memory`` makes it a candidate; a reviewer
other than the owner reviews, promotes (shared) or rejects it. Revoking a source revokes what was derived
from it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from engine.commands.base import Command
from engine.commands.fields import MAX_REASON_CHARS, ExpectedVersion, Id, Payload, Reason, Refs, Text, TimeUs
from engine.models.common import Confidence
from engine.models.memory import EpistemicType

MAX_TTL_SECONDS = 10 * 365 * 86400
MAX_SEALED_ID_CHARS = 300


class StoreMemory(Command):
    """Write ``content`` as the caller's private memory, or as room memory of ``room_id`` (scope ``room``,
    as an active member). Shared memory comes only from review (propose, then a reviewer promotes)."""

    name = "store_memory"
    events = ("memory.stored",)
    agent_effect = True
    ref_field = "memory_id"

    content: Text
    epistemic_type: EpistemicType = Field(description="What kind of statement it is (observation, inference ...).")
    scope: Literal["private", "room"] = "private"
    room_id: Id | None = Field(default=None, description="The room, for room memory (and only then).")
    confidence: Confidence = 0.5
    source_refs: Refs | None = Field(default=None, description=(
        "What it is derived from (revoking a source revokes it too)."))
    permission_scope: Payload | None = None
    valid_to_us: TimeUs | None = None
    ttl_seconds: int | None = Field(default=None, ge=1, le=MAX_TTL_SECONDS)
    memory_id: Id | None = Field(default=None, description="Choose the memory id (default: generated).")

    @field_validator("room_id")
    @classmethod
    def _room_only_for_room_scope(cls, value: str | None, info: ValidationInfo) -> str | None:
        if (info.data.get("scope") == "room") != (value is not None):
            raise ValueError("room memory needs a room_id, and only room memory has one")
        return value


class _MemoryTransition(Command):
    memory_id: Id
    ref_field = "memory_id"
    agent_effect = True


class ProposeMemory(_MemoryTransition):
    """The owner offers its private (or reopened) memory for review: it becomes a CANDIDATE."""

    name = "propose_memory"
    events = ("memory.propose",)

    expected_version: ExpectedVersion | None = None


class ReviewMemory(_MemoryTransition):
    """A reviewer other than the owner takes a candidate into review (IN_REVIEW)."""

    name = "review_memory"
    events = ("memory.review",)

    expected_version: ExpectedVersion | None = None


class PromoteMemory(_MemoryTransition):
    """A reviewer other than the owner promotes a candidate (or memory in its review): it becomes SHARED
    memory, a stable shared fact."""

    name = "promote_memory"
    events = ("memory.promote",)

    expected_version: ExpectedVersion | None = None


class RejectMemory(_MemoryTransition):
    """A reviewer other than the owner rejects a candidate (or memory in its review), with the reason."""

    name = "reject_memory"
    events = ("memory.reject",)

    reason: Reason
    expected_version: ExpectedVersion | None = None


class ArchiveMemory(_MemoryTransition):
    """Shared memory leaves the working set (scope ARCHIVE); it stays readable."""

    name = "archive_memory"
    events = ("memory.archive",)

    expected_version: ExpectedVersion | None = None


class ReopenMemory(_MemoryTransition):
    """Shared or archived memory is questioned again, with the reason: REOPENED (visible, no longer a
    stable fact)."""

    name = "reopen_memory"
    events = ("memory.reopen",)

    reason: Reason
    expected_version: ExpectedVersion | None = None


class SupersedeMemory(_MemoryTransition):
    """``replacement_id`` (other memory, already SHARED) replaces ``memory_id``, which becomes SUPERSEDED."""

    name = "supersede_memory"
    events = ("memory.supersede",)

    replacement_id: Id
    expected_version: ExpectedVersion | None = None


class RevokeMemory(_MemoryTransition):
    """Withdraw memory (its owner, or its reviewer), with the reason; everything derived from it
    (transitively, by provenance) is revoked too."""

    name = "revoke_memory"
    events = ("memory.revoke",)

    reason: Reason
    expected_version: ExpectedVersion | None = None


class BreakGlassRead(Command):
    """A governor reads memory sealed from it, with the reason: another agent's private memory (`kind`
    memory, `ident` a memory id) or a blind answer before its reveal (`kind` room_answer, `ident`
    `ROOM_ID/AGENT_ID`). Decided by the policy (live governors only) and recorded as a
    `memory.break_glass_read` event (who read what of whom, and why; never the content) before the content
    is returned."""

    name = "break_glass_read"
    events = ("memory.break_glass_read",)
    ref_field = "record.memory_id"

    kind: Literal["memory", "room_answer"]
    ident: str = Field(min_length=1, max_length=MAX_SEALED_ID_CHARS, description=(
        "A memory id, or ROOM_ID/AGENT_ID for a blind answer."))
    reason: str = Field(min_length=1, max_length=MAX_REASON_CHARS, pattern=r"\S", description=(
        "Why the seal is broken (recorded)."))


__all__ = ["ArchiveMemory", "BreakGlassRead", "PromoteMemory", "ProposeMemory", "RejectMemory", "ReopenMemory",
           "ReviewMemory", "RevokeMemory", "StoreMemory", "SupersedeMemory"]
