"""Rooms: a bounded place where agents join to resolve something, then leave.

A room's life is create -> join -> discuss -> commit (blind answers) -> distill -> leave -> close. Its
``stop_condition`` says when it is stale (a zombie) and may be closed by a sweep; the grammar is
:func:`parse_stop_condition` (``docs/rooms.md``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from pydantic import Field

from engine.models.common import Id, Model, Payload, Text, TimeUs, Version
from engine.models.lifecycle import Lifecycle


class RoomStatus(StrEnum):
    OPEN = "open"
    CLOSED = "closed"


ROOM_LIFECYCLE = Lifecycle("room", {
    "join": ({RoomStatus.OPEN}, RoomStatus.OPEN),
    "leave": ({RoomStatus.OPEN}, RoomStatus.OPEN),
    "close": ({RoomStatus.OPEN}, RoomStatus.CLOSED),
    "discuss": ({RoomStatus.OPEN}, RoomStatus.OPEN),
    "answer": ({RoomStatus.OPEN}, RoomStatus.OPEN),
    "distill": ({RoomStatus.OPEN}, RoomStatus.OPEN),
})


class Room(Model):
    room_id: Id
    goal: Text
    status: RoomStatus
    opened_by: Id
    context_scope: Payload = Field(default_factory=dict)
    authority_scope: Payload = Field(default_factory=dict)
    stop_condition: str | None = Field(default=None, max_length=1000)
    created_at_us: TimeUs
    closed_at_us: TimeUs | None = None
    version: Version


class RoomMember(Model):
    room_id: Id
    agent_id: Id
    active: bool
    joined_at_us: TimeUs
    left_at_us: TimeUs | None = None
    version: Version


class RoomAnswer(Model):
    """One member's blind answer: its private memory until every active member has answered, then room
    memory (``revealed``)."""

    room_id: Id
    agent_id: Id
    memory_id: Id
    revealed: bool
    committed_at_us: TimeUs
    revealed_at_us: TimeUs | None = None
    version: Version


class RoomMessage(Model):
    """A message said in a room (a ``room.discussed`` event). ``seq`` is its log position, known once
    committed (``None`` in what ``discuss`` returns)."""

    room_id: Id
    event_id: Id
    sender: Id
    body: Text
    payload: Payload = Field(default_factory=dict)
    created_at_us: TimeUs
    seq: int | None = None


# -- stop conditions ---------------------------------------------------------------------------------

MAX_IDLE_SECONDS = 10 * 365 * 86400
MAX_STOP_CLAUSES = 8
_CLAUSE = re.compile(r"^(?:idle:(?P<seconds>[1-9][0-9]{0,9})|(?P<fixed>answers:all|members:0))$")


@dataclass(frozen=True)
class StopClause:
    """One clause of a stop condition: ``idle`` (with ``seconds``), ``answers`` (all revealed) or
    ``members`` (nobody left)."""

    kind: Literal["idle", "answers", "members"]
    seconds: int = 0


def parse_stop_condition(text: str) -> tuple[StopClause, ...]:
    """The clauses of ``text``; the room is stale when any of them holds.

    Grammar (whitespace around clauses is ignored)::

        condition := clause ( "|" clause ){0,7}
        clause    := "idle:" SECONDS      no event about the room for SECONDS (1 .. 315360000) seconds
                   | "answers:all"        the room has answers and all of them are revealed
                   | "members:0"          no active member is left

    Raises ``ValueError`` naming the first clause that does not parse.
    """
    parts = [p.strip() for p in text.split("|")]
    if len(parts) > MAX_STOP_CLAUSES:
        raise ValueError(f"at most {MAX_STOP_CLAUSES} clauses joined by '|'")
    clauses: list[StopClause] = []
    for part in parts:
        match = _CLAUSE.match(part)
        if match is None:
            raise ValueError(f"{part!r} is not idle:<seconds>, answers:all or members:0")
        if match["seconds"] is not None:
            seconds = int(match["seconds"])
            if seconds > MAX_IDLE_SECONDS:
                raise ValueError(f"idle:{seconds} is over {MAX_IDLE_SECONDS} seconds")
            clauses.append(StopClause("idle", seconds))
        else:
            clauses.append(StopClause("answers" if match["fixed"] == "answers:all" else "members"))
    return tuple(clauses)


__all__ = ["ROOM_LIFECYCLE", "Room", "RoomAnswer", "RoomMember", "RoomMessage", "RoomStatus", "StopClause",
           "parse_stop_condition"]
