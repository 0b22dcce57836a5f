"""Rooms: create -> (invite) -> join -> discuss -> commit -> distill -> leave -> close (``docs/rooms.md``).

Joining a room shares the room's memory, never permissions, and needs an invitation: the members named at
creation are seated at once; anyone else is invited (a ``room_members`` row that is not active and has not
left) by a member, the opener or a moderator, or holds the capability the room policy names
(``room.join_any``). Only a member leaves itself; a moderator (or a governor) removes another member, and
the removal is its own event (``room.member_removed``: who removed whom). Blind answers (commit) live in
:mod:`engine.world.room_answers`; distilling turns room memory into a shared *candidate*, which only the
memory review path makes shared; a sweep closes rooms whose stop condition holds (zombie rooms).
"""

from __future__ import annotations

from typing import Any

from engine.commands.rooms import (
    CloseRoom,
    CloseStaleRooms,
    CreateRoom,
    Discuss,
    DistillRoom,
    InviteToRoom,
    JoinRoom,
    LeaveRoom,
)
from engine.errors import AlreadyExists, IllegalTransition, InvalidInput, NotFound, NotPermitted, VersionConflict
from engine.models.common import Id, Model, TimeUs
from engine.models.memory import Memory, MemoryScope, MemoryStatus
from engine.models.rooms import (
    ROOM_LIFECYCLE,
    Room,
    RoomMember,
    RoomMessage,
    RoomStatus,
    StopClause,
    parse_stop_condition,
)
from engine.policy.enforcement import Check
from engine.policy.model import CONTROLLER_ROOM_PREFIX
from engine.validation import build, check_id, check_int64
from engine.world.core import Cause, Plan
from engine.world.room_answers import RoomAnswerCalls
from store import Change, Insert, Update

MAX_DISCUSSION = 1000
# What counts as activity for ``idle:<seconds>`` (a denied attempt by an outsider keeps no room alive).
ROOM_ACTIVITY = ("room.opened", "room.invited", "room.joined", "room.left", "room.member_removed", "room.discussed",
                 "room.answered", "room.distilled")


def membership_of(row: dict[str, Any] | None) -> str:
    """An agent's membership of a room from its ``room_members`` row: ``none`` (no row), ``active``,
    ``invited`` (a row that is not active and has not left: an invitation not yet taken up) or ``left``
    (left or removed; a new invitation is needed to come back)."""
    if row is None:
        return "none"
    if row["active"]:
        return "active"
    return "invited" if row["left_at_us"] is None else "left"


def membership_check(action: str, room_row: dict[str, Any], agent_id: str, membership: str) -> Check:
    """The policy question for a membership action: the room, the agent acted on and its membership."""
    return Check("room", str(room_row["room_id"]), action, {**room_row, "member": agent_id, "membership": membership})


def _reserved_room(actor: str, room_id: str) -> str | None:
    """Why ``actor`` may not open a room named ``room_id`` (``None``: it may): ids that start with
    :data:`~engine.policy.model.CONTROLLER_ROOM_PREFIX` are the controller's (its conflict rooms), opened by
    its agent only; an agent that took one first would own the room the governor's resolution must close."""
    from engine.world import CONTROLLER_AGENT  # the package's constant (engine.world imports this module)

    if room_id.startswith(CONTROLLER_ROOM_PREFIX) and actor != CONTROLLER_AGENT:
        return f"{room_id!r} is in the controller's namespace ({CONTROLLER_ROOM_PREFIX}...): only {CONTROLLER_AGENT} " \
               "opens those rooms"
    return None


class _StaleClose(Model):
    """The request of one room's close by the sweep (internal: ``close_stale_rooms`` is the command)."""

    room_id: Id
    stop_condition: str
    now_us: TimeUs


class RoomCalls(RoomAnswerCalls):
    def create_room(self, actor: str, goal: str, *, members: list[str] | None = None, room_id: str | None = None,
                    stop_condition: str | None = None, context_scope: dict[str, Any] | None = None,
                    authority_scope: dict[str, Any] | None = None, op_id: str | None = None,
                    cause: Cause | None = None) -> Room:
        """Open a room with ``actor`` and ``members`` joined. ``stop_condition`` follows the grammar of
        :func:`~engine.models.rooms.parse_stop_condition` (else ``InvalidInput``, nothing written)."""
        req = build(CreateRoom, goal=goal, members=members or [], room_id=room_id, stop_condition=stop_condition,
                    context_scope=context_scope or {}, authority_scope=authority_scope or {})
        check_id("actor", actor)
        if req.room_id is not None and (refusal := _reserved_room(actor, req.room_id)) is not None:
            raise InvalidInput("room_id", refusal)

        def plan(now: int) -> Plan:
            rid = req.room_id or self.ids.new("room")
            room = Room(room_id=rid, goal=req.goal, status=RoomStatus.OPEN, opened_by=actor,
                        context_scope=req.context_scope or {}, authority_scope=req.authority_scope or {},
                        stop_condition=req.stop_condition, created_at_us=now, version=1)
            who = list(dict.fromkeys([actor, *(req.members or [])]))
            for agent in who:
                self._row("agents", "agent", agent, agent_id=agent)
            changes: list[Change] = [Insert("rooms", room.model_dump(mode="json"), "room", rid)]
            changes += [self._member_insert(rid, a, now) for a in who]
            return Plan("room.opened", "room", rid, room, changes, payload={"members": who}, resulting_version=1,
                        checks=[Check("room", rid, "create", room.model_dump(mode="json"))])
        return self._write("create_room", actor, req, plan, Room, op_id=op_id, cause=cause)

    @staticmethod
    def _member_insert(room_id: str, agent_id: str, now: int) -> Insert:
        m = RoomMember(room_id=room_id, agent_id=agent_id, active=True, joined_at_us=now, version=1)
        return Insert("room_members", m.model_dump(mode="json"), "room_member", f"{room_id}/{agent_id}")

    def invite_to_room(self, actor: str, room_id: str, agent_id: str, *, op_id: str | None = None,
                       cause: Cause | None = None) -> RoomMember:
        """Invite ``agent_id`` to an open room (policy ``room:invite``: its active members, its opener, a
        moderator or a governor). The invitation is a membership row that is not active (``joined_at_us``:
        when it was written; ``left_at_us`` empty) and lets the invitee :meth:`join_room` itself. Raises
        ``AlreadyExists`` if the agent is a member or invited already, ``NotFound`` for an unknown room or
        agent, ``IllegalTransition`` on a closed room; nothing is written then."""
        req = build(InviteToRoom, room_id=room_id, agent_id=agent_id)
        room_id = req.room_id

        def plan(now: int) -> Plan:
            room_row = self._row("rooms", "room", room_id, room_id=room_id)
            ROOM_LIFECYCLE.target(room_id, str(room_row["status"]), "join")  # only an open room takes anyone in
            self._row("agents", "agent", req.agent_id, agent_id=req.agent_id)
            row = self._store.read.get("room_members", room_id=room_id, agent_id=req.agent_id)
            state = membership_of(row)
            if state in ("active", "invited"):
                raise AlreadyExists("room_invitation", f"{room_id}/{req.agent_id}")
            member = RoomMember(room_id=room_id, agent_id=req.agent_id, active=False, joined_at_us=now,
                                version=row["version"] + 1 if row else 1)
            change: Change = Insert("room_members", member.model_dump(mode="json"), "room_member",
                                    f"{room_id}/{req.agent_id}") if row is None else Update(
                "room_members", {"room_id": room_id, "agent_id": req.agent_id}, row["version"],
                {"active": False, "joined_at_us": now, "left_at_us": None}, "room_member", f"{room_id}/{req.agent_id}")
            return Plan("room.invited", "room", room_id, member, [change],
                        payload={"agent_id": req.agent_id, "invited_by": actor},
                        checks=[membership_check("invite", room_row, req.agent_id, state)])
        return self._write("invite_to_room", actor, req, plan, RoomMember, op_id=op_id, cause=cause)

    def join_room(self, actor: str, room_id: str, *, agent_id: str | None = None, op_id: str | None = None,
                  cause: Cause | None = None) -> RoomMember:
        """``agent_id`` (default: ``actor``) joins an open room. The policy decides on the agent's membership
        (``room:join``): an agent joins itself when invited (or holding ``room.join_any``); the opener, a
        moderator or a governor seats another agent. Leaving ends an invitation: coming back needs a new one.
        Only ``None`` means the caller: any other ``agent_id`` is validated as given."""
        req = build(JoinRoom, room_id=room_id, agent_id=actor if agent_id is None else agent_id)
        room_id, who = req.room_id, req.agent_id or actor  # the caller, filled in above

        def plan(now: int) -> Plan:
            room = self._load(Room, "rooms", "room", room_id, room_id=room_id)
            ROOM_LIFECYCLE.target(room_id, room.status.value, "join")
            self._row("agents", "agent", who, agent_id=who)
            row = self._store.read.get("room_members", room_id=room_id, agent_id=who)
            member = RoomMember(room_id=room_id, agent_id=who, active=True, joined_at_us=now,
                                version=row["version"] + 1 if row else 1)
            change: Change = self._member_insert(room_id, who, now) if row is None else Update(
                "room_members", {"room_id": room_id, "agent_id": who}, row["version"],
                {"active": True, "joined_at_us": now, "left_at_us": None}, "room_member", f"{room_id}/{who}")
            return Plan("room.joined", "room", room_id, member, [change], payload={"agent_id": who},
                        checks=[membership_check("join", room.model_dump(mode="json"), who,
                                                 membership_of(row))])
        return self._write("join_room", actor, req, plan, RoomMember, op_id=op_id, cause=cause)

    def leave_room(self, actor: str, room_id: str, *, agent_id: str | None = None, op_id: str | None = None,
                   cause: Cause | None = None) -> RoomMember:
        """``agent_id`` (default: ``actor``) leaves. Only a member leaves itself; removing another member
        is for a moderator or a governor (policy ``room:leave`` on the member) and is recorded as
        ``room.member_removed`` (payload: who was removed, by whom) instead of ``room.left``. In a blind
        round, if everyone still present has answered, the leave reveals the answers (in the same
        transaction). Only ``None`` means the caller: any other ``agent_id`` is validated as given."""
        req = build(LeaveRoom, room_id=room_id, agent_id=actor if agent_id is None else agent_id)
        room_id, who = req.room_id, req.agent_id or actor  # the caller, filled in above

        def plan(now: int) -> Plan:
            row = self._row("room_members", "room_member", f"{room_id}/{who}", room_id=room_id,
                            agent_id=who)
            if not row["active"]:
                raise NotPermitted(actor, "leave", "room", room_id, f"{who} is not a member")
            room_row = self._row("rooms", "room", room_id, room_id=room_id)
            member = RoomMember.model_validate({**row, "active": False, "left_at_us": now,
                                                "version": row["version"] + 1})
            removal = who != actor
            return Plan("room.member_removed" if removal else "room.left", "room", room_id, member, [Update(
                "room_members", {"room_id": room_id, "agent_id": who}, row["version"],
                {"active": False, "left_at_us": now}, "room_member", f"{room_id}/{who}"),
                *self._blind_round_on_leave(room_row, who, now)],
                payload={"agent_id": who, **({"removed_by": actor} if removal else {})},
                checks=[membership_check("leave", room_row, who, "active")])
        return self._write("leave_room", actor, req, plan, RoomMember, op_id=op_id, cause=cause)

    def close_room(self, actor: str, room_id: str, *, op_id: str | None = None, cause: Cause | None = None) -> Room:
        """Close the room; every member leaves in the same transaction."""
        req = build(CloseRoom, room_id=room_id)
        return self._write("close_room", actor, req, lambda now: self._plan_close(req.room_id, now), Room,
                           op_id=op_id, cause=cause)

    def _plan_close(self, room_id: str, now: int, payload: dict[str, Any] | None = None) -> Plan:
        """The one close path: the room closes and every active member leaves, in one transaction."""
        leaves = [Update("room_members", {"room_id": room_id, "agent_id": m["agent_id"]}, m["version"],
                         {"active": False, "left_at_us": now}, "room_member", f"{room_id}/{m['agent_id']}")
                  for m in self._store.read.rows("room_members", {"room_id": room_id, "active": True})]
        p, _ = self._transition(Room, "rooms", "room", room_id, ROOM_LIFECYCLE, "close", now,
                                time_field="closed_at_us", extra=leaves, event_type="room.closed", payload=payload)
        return p

    def get_room(self, room_id: str, *, actor: str | None = None) -> Room:
        check_id("room_id", room_id)
        return self._get(Room, "rooms", "room", room_id, actor, room_id=room_id)

    def room_members(self, room_id: str, *, active_only: bool = True, actor: str | None = None) -> list[RoomMember]:
        self.get_room(room_id, actor=actor)
        where: dict[str, Any] = {"room_id": room_id, **({"active": True} if active_only else {})}
        return [RoomMember.model_validate(r) for r in self._store.read.rows("room_members", where)]

    # -- discuss -------------------------------------------------------------------------------------

    def discuss(self, actor: str, room_id: str, body: str, *, payload: dict[str, Any] | None = None,
                op_id: str | None = None, cause: Cause | None = None) -> RoomMessage:
        """Say ``body`` in an open room ``actor`` is an active member of (a ``room.discussed`` event; the
        room's active members read it with :meth:`room_discussion`)."""
        req = build(Discuss, room_id=room_id, body=body, payload=payload or {})
        event_id = self.ids.new("evt")

        def plan(now: int) -> Plan:
            room_row = self._open_room_of_member(actor, req.room_id, "discuss")
            said = RoomMessage(room_id=req.room_id, event_id=event_id, sender=actor, body=req.body,
                               payload=req.payload or {}, created_at_us=now)
            return Plan("room.discussed", "room", req.room_id, said, payload={"body": req.body,
                                                                              "payload": req.payload or {}},
                        checks=[Check("room", req.room_id, "discuss", room_row)])
        return self._write("discuss", actor, req, plan, RoomMessage, op_id=op_id, cause=cause, event_id=event_id)

    def room_discussion(self, room_id: str, *, actor: str | None = None, limit: int = 100) -> list[RoomMessage]:
        """The last ``limit`` (1 to 1000) messages of the room, oldest first. A reader must be allowed to
        read the room and be one of its active members (``NotPermitted``)."""
        if not 1 <= check_int64("limit", limit) <= MAX_DISCUSSION:
            raise InvalidInput("limit", f"{limit!r} is not a whole number from 1 to {MAX_DISCUSSION}")
        check_id("room_id", room_id)
        self._get(Room, "rooms", "room", room_id, actor, room_id=room_id)
        if actor is not None:
            self._require_room_member(actor, room_id, "read the discussion of")
        rows = self._store.read.rows("events", {"subject_kind": "room", "subject_id": room_id,
                                               "event_type": "room.discussed"},
                                    order_by=("seq",), descending=True, limit=limit)
        return [RoomMessage(room_id=room_id, event_id=r["event_id"], sender=r["actor_id"], body=r["payload"]["body"],
                            payload=r["payload"].get("payload", {}), created_at_us=r["created_at_us"], seq=r["seq"])
                for r in reversed(rows)]

    def _open_room_of_member(self, actor: str, room_id: str, action: str) -> dict[str, Any]:
        """The room's row, if it is open for ``action`` and ``actor`` is an active member."""
        room_row = self._row("rooms", "room", room_id, room_id=room_id)
        ROOM_LIFECYCLE.target(room_id, str(room_row["status"]), action)
        self._require_room_member(actor, room_id, f"{action} in")
        return room_row

    # -- distill -------------------------------------------------------------------------------------

    def distill_room(self, actor: str, room_id: str, content: str, *, source_memory_ids: list[str],
                     epistemic_type: str = "inference", confidence: float = 0.5, op_id: str | None = None,
                     cause: Cause | None = None) -> Memory:
        """Distill room memory of ``room_id`` into a shared CANDIDATE owned by ``actor`` (an active
        member), derived from each source (provenance ``derived_from``: revoking a source revokes it).
        It is not a shared fact: only the memory review path (review, then promote by a reviewer other
        than ``actor``) makes it one. Every source must be live room memory of this room the actor may
        read (``InvalidInput`` / ``NotFound`` / ``PolicyDenied``; nothing written)."""
        req = build(DistillRoom, room_id=room_id, content=content, source_memory_ids=source_memory_ids,
                    epistemic_type=epistemic_type, confidence=confidence)
        return self._write("distill_room", actor, req, lambda now: self._plan_distill(actor, req, now), Memory,
                           op_id=op_id, cause=cause)

    def _plan_distill(self, actor: str, req: DistillRoom, now: int) -> Plan:
        room_row = self._open_room_of_member(actor, req.room_id, "distill")
        sources = self._room_sources(req.room_id, req.source_memory_ids)
        mid = self.ids.new("mem")
        mem = Memory(memory_id=mid, scope=MemoryScope.SHARED, owner=actor, room_id=req.room_id,
                     epistemic_type=req.epistemic_type, content=req.content, source_refs=req.source_memory_ids,
                     confidence=req.confidence, status=MemoryStatus.CANDIDATE, valid_from_us=now,
                     created_at_us=now, updated_at_us=now, version=1)
        row = mem.model_dump(mode="json")
        return Plan("room.distilled", "room", req.room_id, mem, [Insert("memory", row, "memory", mid)],
                    payload={"memory_id": mid, "sources": req.source_memory_ids},
                    provenance=[("memory", s, "memory", mid, "derived_from") for s in req.source_memory_ids],
                    checks=[Check("room", req.room_id, "distill", room_row),
                            Check("memory", mid, "create", {**row, "status": ""}),
                            *(Check("memory", s["memory_id"], "read", s) for s in sources)])

    def _room_sources(self, room_id: str, ids: list[str]) -> list[dict[str, Any]]:
        rows = {r["memory_id"]: r for r in self._store.read.rows("memory", {"memory_id": ids})}
        for mid in ids:
            row = rows.get(mid)
            if row is None:
                raise NotFound("memory", mid)
            if row["scope"] != MemoryScope.ROOM.value or row["room_id"] != room_id:
                raise InvalidInput("source_memory_ids", f"{mid} is not room memory of {room_id}")
            if row["status"] in (MemoryStatus.REVOKED.value, MemoryStatus.REJECTED.value):
                raise InvalidInput("source_memory_ids", f"{mid} is {row['status']}")
        return [rows[mid] for mid in ids]

    # -- zombie rooms --------------------------------------------------------------------------------

    def close_stale_rooms(self, actor: str, *, now_us: int | None = None) -> list[Room]:
        """Close every open room whose stop condition holds at ``now_us`` (default: the clock) and that
        ``actor`` may close (the policy's ``close``; others are left open), each through the one close
        path. A room closed or changed by someone else meanwhile is skipped. Returns the rooms closed."""
        check_id("actor", actor)
        req = build(CloseStaleRooms, now_us=now_us)
        now = self.clock.now_us() if req.now_us is None else req.now_us
        due = [r for r in self._store.read.rows("rooms", {"status": RoomStatus.OPEN.value}) if self._is_stale(r, now)]
        if not due:
            return []
        decisions = self._policy.decide(actor, [Check("room", r["room_id"], "close", r) for r in due])
        closed: list[Room] = []
        for row, decision in zip(due, decisions, strict=True):
            if decision.allowed("close"):
                try:
                    closed.append(self._close_stale(actor, row["room_id"], row["stop_condition"], now))
                except (IllegalTransition, VersionConflict):
                    continue  # closed, or no longer stale, by the time it was planned
        return closed

    def _close_stale(self, actor: str, room_id: str, stop_condition: str, now_us: int) -> Room:
        req = build(_StaleClose, room_id=room_id, stop_condition=stop_condition, now_us=now_us)

        def plan(now: int) -> Plan:
            row = self._row("rooms", "room", room_id, room_id=room_id)
            if row["status"] != RoomStatus.OPEN.value or not self._is_stale(row, now_us):
                raise IllegalTransition("room", room_id, str(row["status"]), "close")
            return self._plan_close(room_id, now, {"stop_condition": stop_condition, "stale_at_us": now_us})
        return self._write("close_stale_room", actor, req, plan, Room, op_id=None, cause=None)

    def _is_stale(self, room_row: dict[str, Any], now_us: int) -> bool:
        """Whether any clause of the room's stop condition holds (a stored condition that does not parse,
        from before the grammar, never does)."""
        text = room_row["stop_condition"]
        try:
            clauses = parse_stop_condition(text) if text else ()
        except ValueError:
            return False
        return any(self._holds(room_row, c, now_us) for c in clauses)

    def _holds(self, room_row: dict[str, Any], clause: StopClause, now_us: int) -> bool:
        rid = str(room_row["room_id"])
        if clause.kind == "members":
            return not self._active_member_ids(rid)
        if clause.kind == "answers":
            answers = self._store.read.rows("room_answers", {"room_id": rid})
            return bool(answers) and all(a["revealed"] for a in answers)
        last = self._store.read.rows("events", {"subject_kind": "room", "subject_id": rid,
                                               "event_type": list(ROOM_ACTIVITY)},
                                    order_by=("seq",), descending=True, limit=1)
        since = int(last[0]["created_at_us"]) if last else int(room_row["created_at_us"])
        return now_us - since >= clause.seconds * 1_000_000
