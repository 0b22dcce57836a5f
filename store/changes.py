"""What a write asks of the gateway: plain data, no SQL.

The World (``engine/``) describes a mutation as a :class:`WriteRequest`: the operation identity, the
row changes (each :class:`Update` is a compare-and-set on the row's version), the event to append and
the provenance edges to record. :func:`store.gateway.commit` is the only code that turns it into SQL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Insert:
    """Insert a new row. ``kind``/``ident`` name it in errors (a duplicate is ``AlreadyExists``)."""

    table: str
    row: Mapping[str, Any]
    kind: str
    ident: str


@dataclass(frozen=True)
class Update:
    """Compare-and-set: set ``values`` and ``version = expected_version + 1`` where the key and version match.

    Zero rows changed is a ``VersionConflict`` carrying the current version, or ``NotFound``.
    """

    table: str
    key: Mapping[str, Any]
    expected_version: int
    values: Mapping[str, Any]
    kind: str
    ident: str


Change = Insert | Update


@dataclass(frozen=True)
class Provenance:
    """``src`` contributed to ``dst``; recorded in the same transaction as the event."""

    edge_id: str
    src_kind: str
    src_id: str
    dst_kind: str
    dst_id: str
    relation: str


@dataclass(frozen=True)
class WriteRequest:
    """One atomic write: operation ledger entry, row changes, one event, provenance edges."""

    op_id: str
    command: str
    request_hash: str
    actor_id: str
    event_id: str
    event_type: str
    subject_kind: str
    subject_id: str
    created_at_us: int
    result: Mapping[str, Any]
    changes: Sequence[Change] = ()
    provenance: Sequence[Provenance] = ()
    payload: Mapping[str, Any] = field(default_factory=dict)
    parent_event_id: str | None = None
    causation_id: str | None = None
    correlation_id: str | None = None
    base_version: int | None = None
    resulting_version: int | None = None
    policy_epoch: str | None = None
    topology_version: int | None = None


@dataclass(frozen=True)
class CommitOutcome:
    """What the gateway returns after commit. ``replayed`` means the operation id was already applied
    with the same request and ``result`` is the original result (nothing was written this time)."""

    result: Mapping[str, Any]
    event_id: str
    replayed: bool


@dataclass(frozen=True)
class StoredOperation:
    op_id: str
    command: str
    request_hash: str
    result: Mapping[str, Any]
    event_id: str


__all__ = ["Change", "CommitOutcome", "Insert", "Provenance", "StoredOperation", "Update", "WriteRequest"]
