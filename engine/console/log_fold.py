"""What the console rebuilds from the world's log, as the signed-in principal reads it (``World.events``:
the PDP decides, memory content and discussions stay sealed as the log view seals them for that reader).

There is no list call for approvals or rooms, nor a call for the topology at an old version, so the console
folds the post-images of the events it may read (``Event.changes``), page by page, bounded by
:data:`MAX_EVENTS_READ` (``LogFold.truncated`` says when the log was longer). Nothing here writes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.models.events import Event, RowChange

PAGE = 5000
MAX_EVENTS_READ = 200_000
MAX_STEPS_SHOWN = 100

EventReader = Callable[[int, int], list[Event]]  # (after_seq, limit) -> events in log order


@dataclass
class TopologyVersion:
    """The collaboration topology as version ``version`` was committed, with the rooms and their members as
    they were at that moment."""

    version: int
    created_by: str
    reason: str
    created_at_us: int
    edges: dict[tuple[str, str, str], dict[str, Any]]
    rooms: dict[str, dict[str, Any]]
    members: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)


@dataclass
class LogFold:
    """Approvals, rooms, contests and every topology version, as the log shows them to its reader."""

    approvals: dict[str, dict[str, Any]] = field(default_factory=dict)
    rooms: dict[str, dict[str, Any]] = field(default_factory=dict)
    members: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # room -> agent -> row
    contests: list[Event] = field(default_factory=list)
    steps: deque[Event] = field(default_factory=lambda: deque(maxlen=MAX_STEPS_SHOWN))  # newest controller steps
    versions: list[TopologyVersion] = field(default_factory=list)
    events_read: int = 0
    truncated: bool = False
    _edges: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)

    def apply(self, event: Event) -> None:
        """Fold one event's row images (sealed images carry no values and change nothing shown)."""
        self.events_read += 1
        if event.event_type == "claim.contested":
            self.contests.append(event)
        elif event.event_type == "controller.step" and event.payload.get("decisions"):
            self.steps.append(event)
        elif event.event_type == "approval.requested" and isinstance(event.payload.get("payload"), dict):
            self.approvals.setdefault(event.subject_id, {})["payload"] = event.payload["payload"]
        new_version: dict[str, Any] | None = None
        for change in event.changes:
            values = change.values
            if values.get("sealed") is True:
                continue
            if change.table == "approvals":
                self.approvals.setdefault(_column(change, "approval_id"), {}).update(values)
            elif change.table == "rooms":
                self.rooms.setdefault(_column(change, "room_id"), {}).update(values)
            elif change.table == "room_members":
                room = self.members.setdefault(_column(change, "room_id"), {})
                room.setdefault(_column(change, "agent_id"), {}).update(values)
            elif change.table == "topology_edges":
                key = (_column(change, "source_agent"), _column(change, "target_agent"),
                       _column(change, "edge_type"))
                self._edges.setdefault(key, {}).update({**change.key, **values})
            elif change.table == "topology_versions":
                new_version = {**change.key, **values}
        if new_version is not None:  # the version as committed: its edges, and the rooms as they were then
            self.versions.append(TopologyVersion(
                int(new_version.get("version", len(self.versions) + 1)), str(new_version.get("created_by", "")),
                str(new_version.get("reason", "")), int(new_version.get("created_at_us", event.created_at_us)),
                {k: dict(v) for k, v in self._edges.items()}, {k: dict(v) for k, v in self.rooms.items()},
                {k: {a: dict(r) for a, r in v.items()} for k, v in self.members.items()}))

    def pending_approvals(self) -> list[dict[str, Any]]:
        """The approvals still pending, oldest first."""
        rows = [{"approval_id": aid, **row} for aid, row in self.approvals.items() if row.get("status") == "pending"]
        return sorted(rows, key=lambda r: (int(r.get("created_at_us") or 0), r["approval_id"]))

    def version(self, number: int) -> TopologyVersion | None:
        """Topology version ``number`` (None: not in the log read)."""
        return next((v for v in self.versions if v.version == number), None)


def _column(change: RowChange, name: str) -> str:
    """A key column of a row change (from its key, else from its values)."""
    return str(change.key.get(name, change.values.get(name, "")))


def fold_log(read: EventReader, *, limit: int = MAX_EVENTS_READ) -> LogFold:
    """Read the log from its start, :data:`PAGE` events at a time, at most ``limit`` events, and fold it."""
    fold = LogFold()
    after = 0
    while fold.events_read < limit:
        asked = min(PAGE, limit - fold.events_read)
        page = read(after, asked)
        for event in page:
            fold.apply(event)
            after = event.seq
        if len(page) < asked:
            return fold
    fold.truncated = True
    return fold


__all__ = ["MAX_EVENTS_READ", "EventReader", "LogFold", "TopologyVersion", "fold_log"]
