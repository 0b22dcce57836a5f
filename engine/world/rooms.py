"""Rooms: open, join, leave, close. Joining a room shares the room's memory, never permissions."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from engine.errors import NotPermitted
from engine.models.common import Id, Model, Payload, Text
from engine.models.rooms import ROOM_LIFECYCLE, Room, RoomMember, RoomStatus
from engine.policy.enforcement import Check
from engine.validation import build, check_id
from engine.world.core import Cause, Plan, WorldCore
from store import Change, Insert, Update

MAX_ROOM_MEMBERS = 256


class OpenRoom(Model):
    goal: Text
    members: list[Id] = Field(default_factory=list, max_length=MAX_ROOM_MEMBERS)
    room_id: Id | None = None
    stop_condition: str | None = Field(default=None, max_length=1000)
    context_scope: Payload = Field(default_factory=dict)
    authority_scope: Payload = Field(default_factory=dict)


class RoomAction(Model):
    room_id: Id
    action: str
    agent_id: Id


class RoomCalls(WorldCore):
    def create_room(self, actor: str, goal: str, *, members: list[str] | None = None, room_id: str | None = None,
                    stop_condition: str | None = None, context_scope: dict[str, Any] | None = None,
                    authority_scope: dict[str, Any] | None = None, op_id: str | None = None,
                    cause: Cause | None = None) -> Room:
        """Open a room with ``actor`` and ``members`` joined."""
        req = build(OpenRoom, goal=goal, members=members or [], room_id=room_id, stop_condition=stop_condition,
                    context_scope=context_scope or {}, authority_scope=authority_scope or {})

        def plan(now: int) -> Plan:
            rid = req.room_id or self.ids.new("room")
            room = Room(room_id=rid, goal=req.goal, status=RoomStatus.OPEN, opened_by=actor,
                        context_scope=req.context_scope, authority_scope=req.authority_scope,
                        stop_condition=req.stop_condition, created_at_us=now, version=1)
            who = list(dict.fromkeys([actor, *req.members]))
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

    def join_room(self, actor: str, room_id: str, *, agent_id: str | None = None, op_id: str | None = None,
                  cause: Cause | None = None) -> RoomMember:
        """``agent_id`` (default: ``actor``) joins an open room (or rejoins after leaving)."""
        req = build(RoomAction, room_id=room_id, action="join", agent_id=agent_id or actor)

        def plan(now: int) -> Plan:
            room = self._load(Room, "rooms", "room", room_id, room_id=room_id)
            ROOM_LIFECYCLE.target(room_id, room.status.value, "join")
            self._row("agents", "agent", req.agent_id, agent_id=req.agent_id)
            row = self.store.read.get("room_members", room_id=room_id, agent_id=req.agent_id)
            member = RoomMember(room_id=room_id, agent_id=req.agent_id, active=True, joined_at_us=now,
                                version=row["version"] + 1 if row else 1)
            change: Change = self._member_insert(room_id, req.agent_id, now) if row is None else Update(
                "room_members", {"room_id": room_id, "agent_id": req.agent_id}, row["version"],
                {"active": True, "joined_at_us": now, "left_at_us": None}, "room_member", f"{room_id}/{req.agent_id}")
            return Plan("room.joined", "room", room_id, member, [change], payload={"agent_id": req.agent_id},
                        checks=[Check("room", room_id, "join", room.model_dump(mode="json"))])
        return self._write("join_room", actor, req, plan, RoomMember, op_id=op_id, cause=cause)

    def leave_room(self, actor: str, room_id: str, *, agent_id: str | None = None, op_id: str | None = None,
                   cause: Cause | None = None) -> RoomMember:
        req = build(RoomAction, room_id=room_id, action="leave", agent_id=agent_id or actor)

        def plan(now: int) -> Plan:
            row = self._row("room_members", "room_member", f"{room_id}/{req.agent_id}", room_id=room_id,
                            agent_id=req.agent_id)
            if not row["active"]:
                raise NotPermitted(actor, "leave", "room", room_id, f"{req.agent_id} is not a member")
            member = RoomMember.model_validate({**row, "active": False, "left_at_us": now,
                                                "version": row["version"] + 1})
            return Plan("room.left", "room", room_id, member, [Update(
                "room_members", {"room_id": room_id, "agent_id": req.agent_id}, row["version"],
                {"active": False, "left_at_us": now}, "room_member", f"{room_id}/{req.agent_id}")],
                payload={"agent_id": req.agent_id},
                checks=[Check("room", room_id, "leave", self._row("rooms", "room", room_id, room_id=room_id))])
        return self._write("leave_room", actor, req, plan, RoomMember, op_id=op_id, cause=cause)

    def close_room(self, actor: str, room_id: str, *, op_id: str | None = None, cause: Cause | None = None) -> Room:
        """Close the room; every member leaves in the same transaction."""
        req = build(RoomAction, room_id=room_id, action="close", agent_id=actor)

        def plan(now: int) -> Plan:
            leaves = [Update("room_members", {"room_id": room_id, "agent_id": m["agent_id"]}, m["version"],
                             {"active": False, "left_at_us": now}, "room_member", f"{room_id}/{m['agent_id']}")
                      for m in self.store.read.rows("room_members", {"room_id": room_id, "active": True})]
            p, _ = self._transition(Room, "rooms", "room", room_id, ROOM_LIFECYCLE, "close", now,
                                    time_field="closed_at_us", extra=leaves, event_type="room.closed")
            return p
        return self._write("close_room", actor, req, plan, Room, op_id=op_id, cause=cause)

    def get_room(self, room_id: str, *, actor: str | None = None) -> Room:
        check_id("room_id", room_id)
        return self._get(Room, "rooms", "room", room_id, actor, room_id=room_id)

    def room_members(self, room_id: str, *, active_only: bool = True, actor: str | None = None) -> list[RoomMember]:
        self.get_room(room_id, actor=actor)
        where: dict[str, Any] = {"room_id": room_id, **({"active": True} if active_only else {})}
        return [RoomMember.model_validate(r) for r in self.store.read.rows("room_members", where)]
