"""What the log shows a reader: which row images, payloads and results of an event it may see.

An event row records everything its write did: the post-image of every row (``changes``), the result
returned to the caller and the payload. Those carry content that readers may not see, so
:meth:`~engine.world.state.StateCalls.events` shows a record through these filters, in order:

1. **Tables (allow-list).** Row images are shown only for the tables in :data:`LOG_TABLES`, whose rows
   are the objects a reader of the log may see (and whose content, where some of it is sealed, the later
   steps seal). Every other table's change keeps its table, operation and key, and its values are replaced
   by ``{"sealed": true}``: above all ``snapshots``, whose row is a whole-state image (every private
   memory, every sealed answer). A table added to the schema is sealed until it is listed here.
   This holds for every reader, with or without a PDP. A listed table's credential columns
   (:data:`~store.schema.CREDENTIAL_COLUMNS`: an agent token's ``secret_sha256``) are left out of its
   images for every reader too.
2. **Whose events** (with a PDP): a governor sees every event's full record (its audit view); any other
   reader the full record of its own events only, and the envelope of the others'.
3. **Memory content** (with a PDP): the content of memory the reader may not read now (another agent's
   private memory, an unrevealed answer) is sealed in row images and results
   (:func:`~engine.world.memory.seal_memory_content`).
4. **Room discussions** (with a PDP): a ``room.discussed`` event's body and payload (in its payload and
   result) are sealed for a reader that is not an active member of the room now, governors included, as
   :meth:`~engine.world.rooms.RoomCalls.room_discussion` refuses them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.world.core import WorldCore
from engine.world.memory import SEALED_MARK, seal_memory_content
from store.schema import CREDENTIAL_COLUMNS

#: The tables whose row images the log shows (each object is one a reader may see, or is sealed in the
#: later steps: memory content by ``seal_memory_content``; a room answer's row names its memory only).
LOG_TABLES: frozenset[str] = frozenset({
    "agents", "sessions",                            # the registry (capabilities, roles, presence)
    "state_entries",                                 # shared state (governors, and each writer's own)
    "tasks", "handoffs", "approvals",                # work and its authority
    "artifacts", "artifact_versions",                # registry entries (content is on disk, by checksum)
    "memory",                                        # content sealed unless the reader may read it
    "wakes", "receipts", "traces",                   # runs: what was asked, done, retrieved (by reference)
    "topology_versions", "topology_edges",           # the collaboration topology
    "rooms", "room_members", "room_answers",         # rooms; an answer's row names its (sealed) memory
    "messages", "deliveries", "subscriptions",       # channels and routing
    "provenance_edges",                              # what came from what
    "policy_epochs", "policy_activations",           # the policies in force
    "controller_positions", "controller_facts",      # the controller's position and routing facts
    "agent_tokens",                                  # token metadata (the hash left out: CREDENTIAL_COLUMNS)
})
DISCUSSION_EVENT = "room.discussed"
_DISCUSSION_FIELDS = ("body", "payload")


def listed_changes(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with the values of every change outside :data:`LOG_TABLES` sealed, and the credential
    columns of the listed ones left out (step 1)."""
    changes = row.get("changes") or ()
    if all(c.get("table") in LOG_TABLES and c.get("table") not in CREDENTIAL_COLUMNS for c in changes):
        return row
    return {**row, "changes": [_listed(c) for c in changes]}


def _listed(change: dict[str, Any]) -> dict[str, Any]:
    table = change.get("table")
    if table not in LOG_TABLES:
        return {**change, "values": {SEALED_MARK: True}}
    hidden = CREDENTIAL_COLUMNS.get(str(table))
    if not hidden:
        return change
    values = change.get("values")
    shown = {k: v for k, v in values.items() if k not in hidden} if isinstance(values, dict) else values
    return {**change, "values": shown}


def envelope(row: dict[str, Any]) -> dict[str, Any]:
    """An event's envelope: ids, type, actor, subject, versions, chain, time; no changes, result or payload."""
    return {**row, "changes": [], "result": {}, "payload": {}}


def seal_discussions(world: WorldCore, reader: str, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with the body and payload of every ``room.discussed`` event of a room ``reader`` is not an
    active member of now taken out of its payload and result (``sealed: true`` in their place; step 4).
    One read of the reader's rooms, only when the page holds a discussion."""
    if not any(r.get("event_type") == DISCUSSION_EVENT for r in rows):
        return list(rows)
    rooms = set(world._store.read.active_rooms_of(reader))

    def sealed(r: dict[str, Any]) -> dict[str, Any]:
        if r.get("event_type") != DISCUSSION_EVENT or (r.get("subject_kind") == "room" and r["subject_id"] in rooms):
            return r
        result = r.get("result")
        cut = {k: v for k, v in result.items() if k not in _DISCUSSION_FIELDS} if isinstance(result, dict) else {}
        return {**r, "payload": {SEALED_MARK: True}, "result": {**cut, SEALED_MARK: True} if result else {}}
    return [sealed(r) for r in rows]


def shown_records(world: WorldCore, reader: str | None, rows: Sequence[dict[str, Any]], *,
                  governor: bool) -> list[dict[str, Any]]:
    """The event rows as ``reader`` may see them (the module's steps; ``reader=None`` without a PDP: step 1
    only, the store's own single-user view)."""
    out = [listed_changes(r) for r in rows]
    if reader is None or not world._policy.external:
        return out
    if not governor:
        out = [r if r["actor_id"] == reader else envelope(r) for r in out]
    out = seal_memory_content(world, reader, out)
    return seal_discussions(world, reader, out)


__all__ = ["DISCUSSION_EVENT", "LOG_TABLES", "envelope", "listed_changes", "seal_discussions", "shown_records"]
