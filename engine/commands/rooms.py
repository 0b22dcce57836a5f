"""Rooms: create -> join -> discuss -> commit (blind answers) -> distill -> leave -> close
(``docs/rooms.md``). Joining a room shares the room's memory, never permissions."""

from __future__ import annotations

from pydantic import Field, field_validator

from engine.commands.base import Command
from engine.commands.fields import Id, Payload, Refs, Text, TimeUs
from engine.models.common import Confidence
from engine.models.memory import EpistemicType
from engine.models.rooms import parse_stop_condition

MAX_ROOM_MEMBERS = 256
MAX_STOP_CONDITION_CHARS = 1000
_STOP_CLAUSE = r"(?:idle:[1-9][0-9]{0,9}|answers:all|members:0)"
# The grammar of ``engine.models.rooms.parse_stop_condition`` (which also bounds idle's seconds).
STOP_CONDITION_PATTERN = rf"^\s*{_STOP_CLAUSE}\s*(?:\|\s*{_STOP_CLAUSE}\s*){{0,7}}$"


class CreateRoom(Command):
    """Open a room for ``goal`` with the caller and ``members`` joined (every one an existing agent).
    ``stop_condition`` says when the room is stale and may be closed by a sweep: clauses joined by ``|``,
    each ``idle:SECONDS``, ``answers:all`` or ``members:0``."""

    name = "create_room"
    events = ("room.opened",)
    agent_effect = True
    ref_field = "room_id"

    goal: Text
    members: list[Id] | None = Field(default=None, max_length=MAX_ROOM_MEMBERS, description=(
        "Agents joined with the caller."))
    room_id: Id | None = Field(default=None, description="Choose the room id (default: generated).")
    stop_condition: str | None = Field(default=None, max_length=MAX_STOP_CONDITION_CHARS,
                                       pattern=STOP_CONDITION_PATTERN, description=(
        "When the room is stale: clauses joined by |, each idle:SECONDS (at most 315360000), answers:all or "
        "members:0; e.g. idle:3600|members:0."))
    context_scope: Payload | None = None
    authority_scope: Payload | None = None

    @field_validator("stop_condition")
    @classmethod
    def _grammar(cls, value: str | None) -> str | None:
        if value is not None:
            parse_stop_condition(value)  # ValueError names the clause that does not parse
        return value


class InviteToRoom(Command):
    """Invite ``agent_id`` to an open room (its active members, its opener, a moderator or a governor may);
    the invitee then joins itself. An agent already a member or invited is ``already_exists``."""

    name = "invite_to_room"
    events = ("room.invited",)
    agent_effect = True
    ref_field = "room_id"

    room_id: Id
    agent_id: Id = Field(description="Who is invited.")


class JoinRoom(Command):
    """``agent_id`` (default: the caller) joins an open room: an agent joins itself when invited (or holding
    the capability the room policy names); the opener, a moderator or a governor seats another agent. Leaving
    ends an invitation."""

    name = "join_room"
    events = ("room.joined",)
    agent_effect = True
    ref_field = "room_id"

    room_id: Id
    agent_id: Id | None = Field(default=None, description="Who joins (default: the caller).")


class LeaveRoom(Command):
    """``agent_id`` (default: the caller) leaves the room. Only a member leaves itself; a moderator or a
    governor removes another member (recorded as `room.member_removed`). In a blind round, if everyone still
    present has answered, the leave reveals the answers (in the same transaction)."""

    name = "leave_room"
    events = ("room.left", "room.member_removed")
    agent_effect = True
    ref_field = "room_id"

    room_id: Id
    agent_id: Id | None = Field(default=None, description="Who leaves (default: the caller).")


class CloseRoom(Command):
    """Close an open room; every member leaves in the same transaction."""

    name = "close_room"
    events = ("room.closed",)
    agent_effect = True
    ref_field = "room_id"

    room_id: Id


class Discuss(Command):
    """Say ``body`` in an open room the caller is an active member of; the room's active members read it
    in the room's discussion."""

    name = "discuss"
    events = ("room.discussed",)
    agent_effect = True
    ref_field = "room_id"

    room_id: Id
    body: Text
    payload: Payload | None = None


class CommitAnswer(Command):
    """Commit the caller's blind answer in an open room it is an active member of. The answer is the
    caller's private memory until every active member has answered; the commit that completes the round
    reveals every answer (room memory) in the same transaction. A second answer is ``already_exists``;
    after the reveal or once closed, ``illegal_transition``."""

    name = "commit_answer"
    events = ("room.answered",)
    agent_effect = True
    ref_field = "room_id"

    room_id: Id
    content: Text
    epistemic_type: EpistemicType = EpistemicType.INFERENCE
    confidence: Confidence = 0.5


class DistillRoom(Command):
    """Distill room memory of ``room_id`` into a shared CANDIDATE owned by the caller (an active member),
    derived from each source (revoking a source revokes it). It is not a shared fact until a reviewer other
    than the caller promotes it. Every source must be live room memory of this room that the caller may
    read."""

    name = "distill_room"
    events = ("room.distilled",)
    agent_effect = True
    ref_field = "memory_id"

    room_id: Id
    content: Text
    source_memory_ids: Refs = Field(min_length=1, description="The room memory it is distilled from (distinct).")
    epistemic_type: EpistemicType = EpistemicType.INFERENCE
    confidence: Confidence = 0.5

    @field_validator("source_memory_ids")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("a source memory is named twice")
        return value


class CloseStaleRooms(Command):
    """Close every open room whose stop condition holds at ``now_us`` (default: the world's clock) and that
    the caller may close (others are left open), each through the one close path. Returns the rooms
    closed."""

    name = "close_stale_rooms"
    events = ("room.closed",)
    takes_op_id = False
    cause_param = None

    now_us: TimeUs | None = None


__all__ = ["CloseRoom", "CloseStaleRooms", "CommitAnswer", "CreateRoom", "Discuss", "DistillRoom", "InviteToRoom",
           "JoinRoom", "LeaveRoom"]
