"""From world events to the controller's world facts.

Every event records the rows it wrote (``changes``: inserts with the whole row, updates with the values
set). The controller's world facts are a pure function of those changes in log order, so they are
derived here from the event alone (plus the facts already known, for updates that set only some
fields), never from the tables' current rows: a follower that is behind sees the world as it was at
the event.

| table / event        | fact                                                       |
| -------------------- | ---------------------------------------------------------- |
| tasks                | ``task`` (owner, status); the assignee follows the task    |
| subscriptions        | ``subscription`` (agent follows the subject)               |
| room_members         | ``member`` (active members of the room)                    |
| rooms                | ``room`` (status, topic)                                   |
| handoffs             | ``handoff`` (task, source, target, status)                 |
| topology_edges       | ``edge`` (active edges)                                    |
| agents               | ``reviewer`` (agents whose workspace role is reviewer)     |
| traces               | ``context`` (valid until the run's end + the context TTL)  |
| ``claim.asserted``   | ``claim`` (term, value, claim id)                          |
| ``conflict.resolved``| the term's claims are retracted                            |

A decision event (``conflict.resolved``) changes facts only when the controller accepts it as a decision:
appended by a role allowed to decide it, as the runtime recorded (``engine.controller.facts
.decision_refusal``); otherwise it is ignored and the claims stay.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from engine.controller.facts import FACT_ID_PATTERN, Fact, decision_refusal

CONTEXT_TTL_US = 15 * 60 * 1_000_000  # a rehydrated context is trusted for 15 minutes of world time
_SAFE = re.compile(FACT_ID_PATTERN)
_TERM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,100}$")


def safe_id(*parts: str) -> str:
    """A fact id from ``parts``, hashed when the parts are not id-safe (free-form subjects)."""
    ident = ":".join(parts)
    if _SAFE.match(ident):
        return ident
    return f"{parts[0]}:h{hashlib.sha256(ident.encode()).hexdigest()[:32]}"


class FactDelta:
    """The world-fact upserts and retractions one event implies (later changes win)."""

    def __init__(self, known: Mapping[str, Fact]) -> None:
        self.known = known
        self.upserts: dict[str, Fact] = {}
        self.retracts: dict[str, None] = {}

    def current(self, fact_id: str) -> Fact | None:
        if fact_id in self.upserts:
            return self.upserts[fact_id]
        if fact_id in self.retracts:
            return None
        return self.known.get(fact_id)

    def upsert(self, fact_id: str, kind: str, key: str, **fields: Any) -> None:
        base = dict(self.current(fact_id) or {"id": fact_id, "kind": kind, "key": key})
        base.update({k: v for k, v in fields.items() if v is not None})
        if base != self.current(fact_id):
            self.upserts[fact_id] = base
        self.retracts.pop(fact_id, None)

    def retract(self, fact_id: str) -> None:
        self.upserts.pop(fact_id, None)
        if fact_id in self.known:
            self.retracts[fact_id] = None


def _task(d: FactDelta, op: str, key: dict[str, Any], v: dict[str, Any]) -> None:
    task = str(key["task_id"])
    fid = safe_id("task", task)
    d.upsert(fid, "task", task, owner=v.get("owner_agent"), status=v.get("status"))
    if v.get("assignee"):
        d.upsert(safe_id("sub", task, str(v["assignee"])), "subscription", task, agent=v["assignee"])


def _subscription(d: FactDelta, op: str, key: dict[str, Any], v: dict[str, Any]) -> None:
    fid = safe_id("sub", str(key["subject_id"]), str(key["agent_id"]))
    current = d.current(fid)
    active = v.get("active", current is not None)
    if active:
        d.upsert(fid, "subscription", str(key["subject_id"])[:256], agent=key["agent_id"])
    else:
        d.retract(fid)


def _member(d: FactDelta, op: str, key: dict[str, Any], v: dict[str, Any]) -> None:
    fid = safe_id("member", str(key["room_id"]), str(key["agent_id"]))
    if v.get("active", d.current(fid) is not None):
        d.upsert(fid, "member", str(key["room_id"]), agent=key["agent_id"])
    else:
        d.retract(fid)


def _room(d: FactDelta, op: str, key: dict[str, Any], v: dict[str, Any]) -> None:
    room = str(key["room_id"])
    goal = v.get("goal")
    d.upsert(safe_id("room", room), "room", room, status=v.get("status"),
             topic=str(goal)[:200] if goal is not None else None)


def _handoff(d: FactDelta, op: str, key: dict[str, Any], v: dict[str, Any]) -> None:
    hid = str(key["handoff_id"])
    d.upsert(safe_id("handoff", hid), "handoff", hid, task=v.get("task_id"), source=v.get("source_agent"),
             target=v.get("target_agent"), status=v.get("status"))


def _edge(d: FactDelta, op: str, key: dict[str, Any], v: dict[str, Any]) -> None:
    src, dst, kind = str(key["source_agent"]), str(key["target_agent"]), str(key["edge_type"])
    fid = safe_id("edge", src, dst, kind)
    if v.get("active", d.current(fid) is not None):
        d.upsert(fid, "edge", f"{src}->{dst}", src=src, dst=dst, edge_type=kind)
    else:
        d.retract(fid)


def _agent(d: FactDelta, op: str, key: dict[str, Any], v: dict[str, Any]) -> None:
    agent = str(key["agent_id"])
    fid = safe_id("reviewer", agent)
    if v.get("role_id") == "reviewer" and v.get("status", "active") != "unregistered":
        d.upsert(fid, "reviewer", agent, agent=agent, scope="memory")
    elif v.get("role_id") is not None or v.get("status") == "unregistered":
        d.retract(fid)


def _trace(d: FactDelta, op: str, key: dict[str, Any], v: dict[str, Any]) -> None:
    if op == "insert":
        agent = str(v["agent_id"])
        d.upsert(safe_id("context", agent), "context", agent, agent=agent,
                 valid_until=int(v["finished_at_us"]) + CONTEXT_TTL_US)


_TABLES: dict[str, Callable[[FactDelta, str, dict[str, Any], dict[str, Any]], None]] = {
    "tasks": _task, "subscriptions": _subscription, "room_members": _member, "rooms": _room,
    "handoffs": _handoff, "topology_edges": _edge, "agents": _agent, "traces": _trace,
}


def fact_changes(event: Mapping[str, Any], known: Mapping[str, Fact]) -> tuple[list[Fact], list[str]]:
    """The world facts to upsert and the fact ids to retract for ``event`` (an events row), given the
    facts ``known`` before it."""
    delta = FactDelta(known)
    for change in event.get("changes") or ():
        handler = _TABLES.get(change["table"])
        if handler is not None:
            handler(delta, change["op"], dict(change["key"]), dict(change["values"]))
    payload = event.get("payload") or {}
    term = payload.get("term")
    if isinstance(term, str) and _TERM.match(term):
        if event["event_type"] == "claim.asserted" and isinstance(payload.get("value"), str | int | float | bool):
            claim = payload.get("claim")
            delta.upsert(safe_id("claim", term, str(event["actor_id"])), "claim", term, agent=event["actor_id"],
                         value=payload["value"], claim=str(claim) if claim is not None else str(event["event_id"]))
        elif event["event_type"] == "conflict.resolved" and decision_refusal(
                "conflict.resolved", str(event["actor_id"]), payload) is None:
            for fid, fact in known.items():
                if fact.get("kind") == "claim" and fact.get("key") == term:
                    delta.retract(fid)
    return list(delta.upserts.values()), list(delta.retracts)


__all__ = ["CONTEXT_TTL_US", "fact_changes", "safe_id"]
