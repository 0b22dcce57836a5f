"""Scoped memory with epistemic types and a reviewed lifecycle ("shared is not true")."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from engine.models.common import Confidence, Id, Model, Payload, Refs, Text, TimeUs, Version
from engine.models.enums import EpistemicType
from engine.models.lifecycle import Lifecycle


class MemoryScope(StrEnum):
    PRIVATE = "private"
    ROOM = "room"
    SHARED = "shared"
    ARCHIVE = "archive"


class MemoryStatus(StrEnum):
    PRIVATE = "private"
    CANDIDATE = "candidate"
    IN_REVIEW = "in_review"
    SHARED = "shared"
    ARCHIVED = "archived"
    REOPENED = "reopened"
    SUPERSEDED = "superseded"
    REVOKED = "revoked"
    REJECTED = "rejected"


MEMORY_LIFECYCLE = Lifecycle("memory", {
    "propose": ({MemoryStatus.PRIVATE, MemoryStatus.REOPENED}, MemoryStatus.CANDIDATE),
    "review": ({MemoryStatus.CANDIDATE}, MemoryStatus.IN_REVIEW),
    "promote": ({MemoryStatus.CANDIDATE, MemoryStatus.IN_REVIEW}, MemoryStatus.SHARED),
    "reject": ({MemoryStatus.CANDIDATE, MemoryStatus.IN_REVIEW}, MemoryStatus.REJECTED),
    "archive": ({MemoryStatus.SHARED}, MemoryStatus.ARCHIVED),
    "reopen": ({MemoryStatus.SHARED, MemoryStatus.ARCHIVED}, MemoryStatus.REOPENED),
    "supersede": ({MemoryStatus.SHARED, MemoryStatus.REOPENED, MemoryStatus.ARCHIVED}, MemoryStatus.SUPERSEDED),
    "revoke": ({MemoryStatus.PRIVATE, MemoryStatus.CANDIDATE, MemoryStatus.IN_REVIEW, MemoryStatus.SHARED,
                MemoryStatus.ARCHIVED, MemoryStatus.REOPENED, MemoryStatus.SUPERSEDED,
                MemoryStatus.REJECTED}, MemoryStatus.REVOKED),
})

# Statuses a stable shared fact may have: only reviewed, current, shared memory.
STABLE_SHARED = frozenset({MemoryStatus.SHARED.value})


class Memory(Model):
    memory_id: Id
    scope: MemoryScope
    owner: Id
    room_id: Id | None = None
    epistemic_type: EpistemicType
    content: Text
    source_refs: Refs = Field(default_factory=list)
    confidence: Confidence
    status: MemoryStatus
    reviewer: Id | None = None
    supersedes: Id | None = None
    superseded_by: Id | None = None
    permission_scope: Payload = Field(default_factory=dict)
    valid_from_us: TimeUs
    valid_to_us: TimeUs | None = None
    expires_at_us: TimeUs | None = None
    created_at_us: TimeUs
    updated_at_us: TimeUs
    version: Version


__all__ = ["MEMORY_LIFECYCLE", "STABLE_SHARED", "EpistemicType", "Memory", "MemoryScope", "MemoryStatus"]
