"""Snapshots: the state image at one log position. Snapshots never delete the log.

A state image holds every row of every state table: every private memory, every unrevealed blind answer.
It is the runtime's, never an agent's: taking one, reading one and folding the log from one are calls of
:class:`ImageCalls`, a base of :class:`~engine.world.book.RuntimeBook` only, and the log never shows a
snapshot's row image to any reader (``engine.world.log_view``). ``pmw snapshot`` is a governance command
that decides its caller with the PDP before it asks the book (``docs/security.md``).
"""

from __future__ import annotations

from engine.fold import StateImage, fold
from engine.models.common import Id, Model, TimeUs
from engine.validation import check_id
from engine.world.core import Plan, WorldCore
from store import Insert

#: The event a snapshot appends (the runtime's own: ``append_event`` refuses it).
SNAPSHOT_EVENT = "snapshot.taken"


class SnapshotRef(Model):
    snapshot_id: Id
    at_seq: int
    created_at_us: TimeUs


class _TakeSnapshot(Model):
    """The request of a snapshot (no fields: the image is the whole state at the current position)."""


class ImageCalls(WorldCore):
    """The whole state, undecided: runtime and test calls on :class:`~engine.world.book.RuntimeBook` only
    (an image holds every private memory and sealed answer, so no agent-facing object offers it)."""

    def take_snapshot(self, actor: str) -> SnapshotRef:
        """Record the state image as of the current log position (read in one consistent view), attributed
        to ``actor`` (who asked: the governor a governance command decided, or the runtime). Runtime
        bookkeeping, not decided by the PDP: whoever offers it to a principal decides first."""
        check_id("actor", actor)
        req = _TakeSnapshot()
        seq, image = self._store.read.state_image()
        sid = self.ids.new("snap")

        def plan(now: int) -> Plan:
            ref = SnapshotRef(snapshot_id=sid, at_seq=seq, created_at_us=now)
            row = {"snapshot_id": sid, "at_seq": seq, "content": image, "created_by": actor, "created_at_us": now}
            return Plan(SNAPSHOT_EVENT, "snapshot", sid, ref, [Insert("snapshots", row, "snapshot", sid)],
                        payload={"at_seq": seq})
        return self._write("take_snapshot", actor, req, plan, SnapshotRef, op_id=None, cause=None, decided=False)

    def state_image(self) -> StateImage:
        """Every state table as it is now (rows ordered by primary key)."""
        return fold((), self._store.read.state_image()[1])

    def rebuild_state(self, *, from_snapshot: bool = True) -> StateImage:
        """The state folded from the event log (from the latest snapshot plus its tail, or from the start)."""
        snap = self._store.read.latest_snapshot() if from_snapshot else None
        after = int(snap["at_seq"]) if snap else 0
        return fold(self._store.read.events(after), snap["content"] if snap else None)
