"""Channel messages: durable communication that never creates ownership.

A message goes to one agent, to ``any`` (first claim wins), to a role or platform pool (first claim by a
matching agent wins) or to ``all`` active agents except the sender (one delivery each). Unread listing
takes an explicit target; a named receiver must be among the target's live identities; what it shows is
decided as its reader (``actor``), never as the target.
"""

from __future__ import annotations

from typing import Any

from engine.commands.messages import AckMessage, ClaimMessage, SendMessage
from engine.errors import InvalidInput, NotFound, NotPermitted, TargetUnresolved
from engine.models.agents import Agent, Target
from engine.models.channels import (
    DELIVERY_LIFECYCLE,
    Delivery,
    DeliveryStatus,
    Inbox,
    Message,
    RecipientKind,
)
from engine.models.common import Model
from engine.policy.enforcement import Check
from engine.validation import build, check_id, check_int64
from engine.world.agents import AgentCalls
from engine.world.core import Cause, Plan, WorldCore
from store import Change, Insert

MAX_FANOUT = 10_000
MAX_UNREAD = 10_000


class Sent(Model):
    message: Message
    deliveries: list[Delivery]


class ChannelCalls(AgentCalls):
    def send_message(self, actor: str, channel: str, recipient_kind: str, body: str, *,
                     recipient: str | None = None, payload: dict[str, Any] | None = None,
                     correlation_id: str | None = None, reply_to: str | None = None, op_id: str | None = None,
                     cause: Cause | None = None) -> Sent:
        req = build(SendMessage, channel=channel, recipient_kind=recipient_kind, recipient=recipient, body=body,
                    payload=payload or {}, correlation_id=correlation_id, reply_to=reply_to)
        return self._write("send_message", actor, req, lambda now: self._plan_send(actor, req, now), Sent,
                           op_id=op_id, cause=cause)

    def _plan_send(self, actor: str, req: SendMessage, now: int) -> Plan:
        mid = self.ids.new("msg")
        msg = Message(message_id=mid, sender=actor, created_at_us=now, **req.model_dump())
        if req.recipient_kind is RecipientKind.AGENT:
            self._row("agents", "agent", req.recipient or "", agent_id=req.recipient)
            slots: list[str | None] = [req.recipient]
        elif req.recipient_kind is RecipientKind.ALL:
            slots = [a["agent_id"] for a in self._store.read.rows("agents", {"status": "active"}, limit=MAX_FANOUT)
                     if a["agent_id"] != actor]
        else:
            slots = [req.recipient]
        deliveries = [Delivery(delivery_id=self.ids.new("dlv"), message_id=mid, recipient_kind=req.recipient_kind,
                               recipient=r, status=DeliveryStatus.UNREAD, updated_at_us=now, version=1)
                      for r in slots]
        changes: list[Change] = [Insert("messages", msg.model_dump(mode="json"), "message", mid)]
        changes += [Insert("deliveries", d.model_dump(mode="json"), "delivery", d.delivery_id) for d in deliveries]
        return Plan("message.posted", "message", mid, Sent(message=msg, deliveries=deliveries), changes,
                    checks=[Check("channel", req.channel, "send")],
                    payload={"channel": req.channel, "recipient_kind": req.recipient_kind.value,
                             "deliveries": len(deliveries)})

    def unread(self, target: Target | str, *, receiver: str | None = None, limit: int = 100,
               actor: str | None = None) -> list[Inbox]:
        """Messages waiting for the live identities the explicit ``target`` names (or for ``receiver``,
        which must be one of them), at most ``limit`` (1 to 10,000). A read, decided as ``actor``: with a
        PDP ``actor`` is required (``InvalidInput``) and sees the deliveries it may read (``message:read``:
        its own, pool messages, a governor every one), whoever the target names."""
        reader = self._reader(actor)
        if not 1 <= check_int64("limit", limit) <= MAX_UNREAD:
            raise InvalidInput("limit", f"{limit!r} is not a whole number from 1 to {MAX_UNREAD}")
        agents = self._live_agents(target)
        if receiver is not None:
            check_id("receiver", receiver)
            agents = [a for a in agents if a.agent_id == receiver]
            if not agents:
                raise TargetUnresolved(str(target), f"receiver {receiver!r} is not a live identity of it")
        rows = self._store.read.inbox([a.agent_id for a in agents], sorted({a.role_id for a in agents}),
                                     sorted({a.platform for a in agents if a.platform}), limit)
        messages = {m["message_id"]: m for m in self._store.read.rows(
            "messages", {"message_id": sorted({d["message_id"] for d in rows})})} if rows else {}
        own = {a.agent_id for a in agents}
        out = []
        for d in rows:
            m = messages[d["message_id"]]  # a delivery's message exists (foreign key)
            if d["recipient_kind"] in ("any", "role", "platform") and m["sender"] in own:
                continue  # a pool message is not for its own sender
            out.append(Inbox(message=Message.model_validate(m), delivery=Delivery.model_validate(d)))
        if reader is not None and self._policy.external:  # the reader sees only what the policy lets it read
            rows = [{**i.delivery.model_dump(mode="json"), "sender": i.message.sender} for i in out]
            allowed = {r["delivery_id"] for r in self._readable(reader, "message", rows, "delivery_id")}
            out = [i for i in out if i.delivery.delivery_id in allowed]
        return out

    def _live_agents(self, target: Target | str) -> list[Agent]:
        sessions = self._sessions_of(target)
        ids = sorted({s.agent_id for s in sessions if s.status.value in ("active", "attached")})
        if not ids:
            raise TargetUnresolved(str(target), "no active or attached identity")
        return [self._load(Agent, "agents", "agent", a, agent_id=a) for a in ids]

    def claim_message(self, actor: str, delivery_id: str, *, op_id: str | None = None,
                      cause: Cause | None = None) -> Delivery:
        """Take a delivery. For ``any`` and pools the first claim wins; others get a conflict."""
        return self._delivery_action("claim", actor, build(ClaimMessage, delivery_id=delivery_id), op_id, cause)

    def ack_message(self, actor: str, delivery_id: str, *, op_id: str | None = None,
                    cause: Cause | None = None) -> Delivery:
        return self._delivery_action("ack", actor, build(AckMessage, delivery_id=delivery_id), op_id, cause)

    def _delivery_action(self, action: str, actor: str, req: ClaimMessage | AckMessage, op_id: str | None,
                         cause: Cause | None) -> Delivery:
        delivery_id = req.delivery_id

        def plan(now: int) -> Plan:
            check_delivery_visible(self, actor, delivery_id, self._store.read.get("deliveries",
                                                                                  delivery_id=delivery_id))
            values = {"claimed_by": actor} if action == "claim" else {}
            p, _ = self._transition(Delivery, "deliveries", "delivery", delivery_id, DELIVERY_LIFECYCLE, action,
                                    now, values=values, check=lambda d: check_delivery_rules(self, actor, action, d),
                                    event_type=f"message.{action}ed")
            return p
        return self._write(f"{action}_message", actor, req, plan, Delivery, op_id=op_id, cause=cause)


def check_delivery_visible(world: WorldCore, actor: str, delivery_id: str, row: dict[str, Any] | None) -> None:
    """``NotFound`` for a delivery that is missing (``row`` None) or that ``actor`` may not read (the PDP
    decides ``message:read``: its recipient, a pool's takers, governors): checked first, before the
    delivery's lifecycle and party rules, so that another agent's delivery is answered exactly as a missing
    one (never ``illegal_transition`` telling its status). No-op for a readable row, and without a PDP."""
    if row is None:
        raise NotFound("delivery", delivery_id)
    if world._policy.external:
        (decision,) = world._policy.decide(actor, [Check("message", delivery_id, "read", row)])
        if not decision.allowed("read"):
            raise NotFound("delivery", delivery_id)


def check_delivery_rules(world: WorldCore, actor: str, action: str, d: Delivery) -> None:
    """The World's own rules for claiming or acking a delivery (after its lifecycle, before the policy):
    ``NotPermitted`` unless the delivery is addressed to ``actor`` (by id, role, platform or pool), the
    agent is not offline, and (to ack) ``actor`` claimed it."""
    agent = world._load(Agent, "agents", "agent", actor, agent_id=actor)
    if action == "ack" and d.claimed_by != actor:
        raise NotPermitted(actor, "ack", "delivery", d.delivery_id, f"claimed by {d.claimed_by}")
    if not _addressed_to(d, agent):
        raise NotPermitted(actor, action, "delivery", d.delivery_id, "not addressed to this agent")
    if agent.status.value == "offline":
        raise NotPermitted(actor, action, "delivery", d.delivery_id, "agent is offline")


def _addressed_to(d: Delivery, agent: Agent) -> bool:
    kind = d.recipient_kind
    if kind in (RecipientKind.AGENT, RecipientKind.ALL):
        return d.recipient == agent.agent_id
    if kind is RecipientKind.ROLE:
        return d.recipient == agent.role_id
    if kind is RecipientKind.PLATFORM:
        return d.recipient == agent.platform
    return True
