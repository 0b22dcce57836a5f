"""Blind-then-join: isolate -> private commit -> join -> compare (the room calls' answer half).

Each active member of an open room commits one answer. Until the last active member has committed, an
answer is its author's private memory (recording the room it belongs to): no other agent can read it,
whatever the call, governors included (the memory policy gives nobody but the owner ``read`` of private
memory; projections of another agent and the log's row images seal it; ``tests/security/test_rooms.py``).
The one exception is a governor's ``break_glass_read``, which is recorded before it returns the content
and reveals nothing to anyone else. The commit that completes the round reveals every answer of the room in the same
transaction: each becomes room memory, readable by the room's members. After that the round is over and
no further answer is taken (a late joiner would answer anchored).

Commits and the leaves of a room in its blind round compare-and-set the room's version, so two of them
never both decide "not everyone has answered" (or both reveal) concurrently.
"""

from __future__ import annotations

from typing import Any

from engine.commands.rooms import CommitAnswer
from engine.errors import AlreadyExists, IllegalTransition, NotPermitted
from engine.models.memory import Memory, MemoryScope, MemoryStatus
from engine.models.rooms import ROOM_LIFECYCLE, Room, RoomAnswer
from engine.policy.enforcement import Check
from engine.validation import build, check_id
from engine.world.core import Cause, Plan, WorldCore
from store import Change, Insert, Update


class RoomAnswerCalls(WorldCore):
    def commit_answer(self, actor: str, room_id: str, content: str, *, epistemic_type: str = "inference",
                      confidence: float = 0.5, op_id: str | None = None, cause: Cause | None = None) -> RoomAnswer:
        """Commit ``actor``'s blind answer in an open room it is an active member of.

        The answer is private memory of ``actor`` until every active member has answered; the commit that
        completes the round reveals every answer of the room (room scope) in the same transaction, and
        the returned record says ``revealed``. Raises ``AlreadyExists`` for a second answer of the same
        member, ``IllegalTransition`` once the round is revealed or the room closed, ``NotPermitted`` for
        a non-member; nothing is written then.
        """
        req = build(CommitAnswer, room_id=room_id, content=content, epistemic_type=epistemic_type,
                    confidence=confidence)
        return self._write("commit_answer", actor, req, lambda now: self._plan_answer(actor, req, now),
                           RoomAnswer, op_id=op_id, cause=cause)

    def _plan_answer(self, actor: str, req: CommitAnswer, now: int) -> Plan:
        rid = req.room_id
        room_row = self._row("rooms", "room", rid, room_id=rid)
        ROOM_LIFECYCLE.target(rid, str(room_row["status"]), "answer")
        self._require_room_member(actor, rid, "answer in")
        answers = self._store.read.rows("room_answers", {"room_id": rid})
        if any(a["agent_id"] == actor for a in answers):
            raise AlreadyExists("room_answer", f"{rid}/{actor}")
        if any(a["revealed"] for a in answers):
            raise IllegalTransition("room", rid, "answers_revealed", "answer")
        reveal = set(self._active_member_ids(rid)) <= {actor, *(a["agent_id"] for a in answers)}
        mid = self.ids.new("mem")
        mem = Memory(memory_id=mid, scope=MemoryScope.ROOM if reveal else MemoryScope.PRIVATE, owner=actor,
                     room_id=rid, epistemic_type=req.epistemic_type, content=req.content, confidence=req.confidence,
                     status=MemoryStatus.PRIVATE, valid_from_us=now, created_at_us=now, updated_at_us=now, version=1)
        answer = RoomAnswer(room_id=rid, agent_id=actor, memory_id=mid, revealed=reveal, committed_at_us=now,
                            revealed_at_us=now if reveal else None, version=1)
        version = int(room_row["version"])
        changes: list[Change] = [
            Update("rooms", {"room_id": rid}, version, {}, "room", rid),
            Insert("memory", mem.model_dump(mode="json"), "memory", mid),
            Insert("room_answers", answer.model_dump(mode="json"), "room_answer", f"{rid}/{actor}"),
            *(self._reveal_changes(answers, now) if reveal else ())]
        revealed = sorted({actor, *(a["agent_id"] for a in answers)}) if reveal else []
        return Plan("room.answered", "room", rid, answer, changes, payload={"agent_id": actor, "revealed": revealed},
                    base_version=version, resulting_version=version + 1,
                    checks=[Check("room", rid, "answer", room_row)])

    def _reveal_changes(self, answers: list[dict[str, Any]], now: int) -> list[Change]:
        """Every unrevealed answer becomes room memory, and its record says so."""
        hidden = [a for a in answers if not a["revealed"]]
        if not hidden:
            return []
        ids = [a["memory_id"] for a in hidden]
        mems = {m["memory_id"]: m for m in self._store.read.rows("memory", {"memory_id": ids})}
        changes: list[Change] = []
        for a in hidden:
            mem = mems[a["memory_id"]]
            changes.append(Update("memory", {"memory_id": mem["memory_id"]}, int(mem["version"]),
                                  {"scope": MemoryScope.ROOM.value, "updated_at_us": now}, "memory", mem["memory_id"]))
            key = {"room_id": a["room_id"], "agent_id": a["agent_id"]}
            changes.append(Update("room_answers", key, int(a["version"]), {"revealed": True, "revealed_at_us": now},
                                  "room_answer", f"{a['room_id']}/{a['agent_id']}"))
        return changes

    def _blind_round_on_leave(self, room_row: dict[str, Any], leaver: str, now: int) -> list[Change]:
        """What a leave adds while the room's blind round is open: the room's compare-and-set (so a leave
        and a commit serialise) and, if everyone still present has answered, the reveal."""
        rid = str(room_row["room_id"])
        answers = self._store.read.rows("room_answers", {"room_id": rid})
        if not answers or any(a["revealed"] for a in answers):
            return []
        bump: list[Change] = [Update("rooms", {"room_id": rid}, int(room_row["version"]), {}, "room", rid)]
        staying = set(self._active_member_ids(rid)) - {leaver}
        if staying and staying <= {a["agent_id"] for a in answers}:
            return bump + self._reveal_changes(answers, now)
        return bump

    def room_answers(self, room_id: str, *, actor: str | None = None) -> list[RoomAnswer]:
        """The answers of the room ``actor`` may see: its own, and revealed ones whose memory it may read
        (without a reader and without a PDP: all of them). An unrevealed answer is its author's alone,
        whatever the policy would let a reader see."""
        check_id("room_id", room_id)
        self._get(Room, "rooms", "room", room_id, actor, room_id=room_id)
        rows = self._store.read.rows("room_answers", {"room_id": room_id}, order_by=("committed_at_us", "agent_id"))
        if actor is None:
            return [RoomAnswer.model_validate(r) for r in rows]
        others = [r for r in rows if r["revealed"] and r["agent_id"] != actor]
        readable = self._readable_answer_memory(actor, room_id, others)
        return [RoomAnswer.model_validate(r) for r in rows
                if r["agent_id"] == actor or r["memory_id"] in readable]

    def _readable_answer_memory(self, actor: str, room_id: str, answers: list[dict[str, Any]]) -> set[str]:
        if not answers:
            return set()
        if not self._policy.external:  # the memory scopes: room memory is its active members'
            return {a["memory_id"] for a in answers} if room_id in self._store.read.active_rooms_of(actor) else set()
        mems = self._store.read.rows("memory", {"memory_id": [a["memory_id"] for a in answers]})
        return {m["memory_id"] for m in self._readable(actor, "memory", mems, "memory_id")}

    # -- membership, shared by the room calls ------------------------------------------------------

    def _active_member_ids(self, room_id: str) -> list[str]:
        return [str(m["agent_id"]) for m in self._store.read.rows("room_members", {"room_id": room_id, "active": True})]

    def _require_room_member(self, actor: str, room_id: str, action: str) -> None:
        row = self._store.read.get("room_members", room_id=room_id, agent_id=actor)
        if row is None or not row["active"]:
            raise NotPermitted(actor, action, "room", room_id, "not an active member")
