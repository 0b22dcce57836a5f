"""Events (append-only log) and provenance edges."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from engine.models.common import Id, Model, Payload, TimeUs


class RowChange(Model):
    """One row written by an event: the post-image of the columns it set. Folding these rebuilds state."""

    table: str
    op: str  # "insert" | "update"
    key: dict[str, Any]
    values: dict[str, Any]


class Event(Model):
    """Something that happened. ``seq`` is the event's position in the world's log (strictly increasing).

    Each event is also its operation's ledger entry: ``op_id`` (unique), the ``command``, the
    ``request_hash`` and the ``result`` returned to the caller (and to any retry of the same operation)."""

    seq: int
    event_id: Id
    event_type: str
    actor_id: Id
    op_id: Id
    command: str
    request_hash: str
    result: dict[str, Any] = Field(default_factory=dict)
    subject_kind: str
    subject_id: str
    payload: Payload = Field(default_factory=dict)
    changes: list[RowChange] = Field(default_factory=list)
    parent_event_id: Id | None = None
    causation_id: Id | None = None
    correlation_id: Id | None = None
    base_version: int | None = None
    resulting_version: int | None = None
    policy_epoch: str | None = None
    topology_version: int | None = None
    created_at_us: TimeUs


class ProvenanceEdge(Model):
    """``src`` contributed to ``dst`` (raw source -> event -> memory -> decision -> artifact)."""

    edge_id: Id
    src_kind: str
    src_id: str
    dst_kind: str
    dst_id: str
    relation: str
    event_id: Id
    created_at_us: TimeUs


__all__ = ["Event", "ProvenanceEdge", "RowChange"]
