"""Snapshots: the state image at one log position. Snapshots never delete the log."""

from __future__ import annotations

from engine.commands.state import TakeSnapshot
from engine.fold import StateImage, fold
from engine.models.common import Id, Model, TimeUs
from engine.policy.enforcement import Check
from engine.validation import build, check_id
from engine.world.core import Plan, WorldCore
from store import Insert


class SnapshotRef(Model):
    snapshot_id: Id
    at_seq: int
    created_at_us: TimeUs


class SnapshotCalls(WorldCore):
    def take_snapshot(self, actor: str) -> SnapshotRef:
        """Record the state image as of the current log position (read in one consistent view)."""
        check_id("actor", actor)
        req = build(TakeSnapshot)
        seq, image = self._store.read.state_image()
        sid = self.ids.new("snap")

        def plan(now: int) -> Plan:
            ref = SnapshotRef(snapshot_id=sid, at_seq=seq, created_at_us=now)
            row = {"snapshot_id": sid, "at_seq": seq, "content": image, "created_by": actor, "created_at_us": now}
            return Plan("snapshot.taken", "snapshot", sid, ref, [Insert("snapshots", row, "snapshot", sid)],
                        checks=[Check("state", "snapshot", "write")],
                        payload={"at_seq": seq})
        return self._write("take_snapshot", actor, req, plan, SnapshotRef, op_id=None, cause=None)



class ImageCalls(WorldCore):
    """The whole state, undecided: runtime and test reads on :class:`~engine.world.book.RuntimeBook` only
    (an image holds every private memory and sealed answer, so no agent-facing object offers it)."""

    def state_image(self) -> StateImage:
        """Every state table as it is now (rows ordered by primary key)."""
        return fold((), self._store.read.state_image()[1])

    def rebuild_state(self, *, from_snapshot: bool = True) -> StateImage:
        """The state folded from the event log (from the latest snapshot plus its tail, or from the start)."""
        snap = self._store.read.latest_snapshot() if from_snapshot else None
        after = int(snap["at_seq"]) if snap else 0
        return fold(self._store.read.events(after), snap["content"] if snap else None)
