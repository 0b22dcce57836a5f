"""Subscriptions: what an agent follows. An event about a followed subject (a task, a state key, a room ...)
is a reason to wake the agent; the controller's wake-targeting rules read them as ``subscription`` facts."""

from __future__ import annotations

from pydantic import Field

from engine.commands.subscriptions import Subscribe
from engine.errors import InvalidInput
from engine.models.common import Id, Model, TimeUs, Version
from engine.policy.enforcement import Check
from engine.validation import build, check_id
from engine.world.core import Cause, Plan, WorldCore
from store import Change, Insert, Update


class Subscription(Model):
    agent_id: Id
    subject_id: str = Field(min_length=1, max_length=300)
    active: bool
    created_at_us: TimeUs
    updated_at_us: TimeUs
    version: Version


class SubscriptionCalls(WorldCore):
    def subscribe(self, actor: str, subject_id: str, *, agent_id: str | None = None, active: bool = True,
                  op_id: str | None = None, cause: Cause | None = None) -> Subscription:
        """``agent_id`` (default: ``actor``) follows ``subject_id`` (``active=False``: stops following).
        Decided as ``agent:subscribe`` on the subscribing agent (itself, or a governor). Only ``None`` means
        the caller: any other ``agent_id`` is validated as given."""
        req = build(Subscribe, subject_id=subject_id, agent_id=actor if agent_id is None else agent_id, active=active)
        who = req.agent_id or actor  # the caller, filled in above (so the request is the same whoever names it)

        def plan(now: int) -> Plan:
            agent = self._row("agents", "agent", who, agent_id=who)
            row = self._store.read.get("subscriptions", agent_id=who, subject_id=req.subject_id)
            sub = Subscription(agent_id=who, subject_id=req.subject_id, active=req.active,
                               created_at_us=row["created_at_us"] if row else now, updated_at_us=now,
                               version=row["version"] + 1 if row else 1)
            ident = f"{who}/{req.subject_id}"
            change: Change = Insert("subscriptions", sub.model_dump(mode="json"), "subscription", ident) \
                if row is None else Update("subscriptions", {"agent_id": who, "subject_id": req.subject_id},
                                           row["version"], {"active": req.active, "updated_at_us": now},
                                           "subscription", ident)
            return Plan("subscription.changed", "subscription", ident, sub, [change],
                        payload={"agent_id": who, "subject_id": req.subject_id, "active": req.active},
                        checks=[Check("agent", who, "subscribe", agent)])
        return self._write("subscribe", actor, req, plan, Subscription, op_id=op_id, cause=cause)

    def subscriptions(self, *, agent_id: str | None = None, subject_id: str | None = None,
                      actor: str | None = None) -> list[Subscription]:
        """Active subscriptions (of ``agent_id`` / to ``subject_id``). A read, decided as ``actor``: with a PDP
        ``actor`` is required (``InvalidInput``) and sees the subscriptions of the agents it may read
        (``agent:read``)."""
        reader = self._reader(actor)
        where: dict[str, object] = {"active": True}
        if agent_id is not None:
            where["agent_id"] = check_id("agent_id", agent_id)
        if subject_id is not None:
            if not isinstance(subject_id, str):
                raise InvalidInput("subject_id", f"must be a string, not {type(subject_id).__name__}")
            where["subject_id"] = build(Subscribe, subject_id=subject_id, agent_id=None).subject_id
        rows = self._store.read.rows("subscriptions", where, order_by=("agent_id", "subject_id"))
        if reader is not None and self._policy.external and rows:
            agents = self._store.read.rows("agents", {"agent_id": sorted({str(r["agent_id"]) for r in rows})})
            readable = {str(a["agent_id"]) for a in self._readable(reader, "agent", agents, "agent_id")}
            rows = [r for r in rows if r["agent_id"] in readable]
        return [Subscription.model_validate(r) for r in rows]


__all__ = ["Subscription", "SubscriptionCalls"]
