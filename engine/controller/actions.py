"""The actions rules may name: pure handlers from a match to an :class:`Effect`.

A handler reads only its :class:`Activation` (the matched facts by alias, the world, the event position and
the logical time) and its validated parameters, and returns an :class:`Effect`: decisions for the outbox,
controller facts to upsert or retract, and transient events to post (wake candidates). It does no I/O,
reads no clock and keeps no state, so the same match always gives the same effect. The host applies the
effect; nothing else reaches the engine.

Parameter kinds a rule file may use (checked when the rules are loaded):

* an **alias**: the name of a ``when`` pattern, e.g. ``wake`` (the spec says which fact kind it must match);
* a **field reference** ``alias.field``, e.g. ``task.owner`` or ``ev.payload.target_agent``;
* a **template**: text with ``{alias.field}`` placeholders, filled from the match.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.controller.decisions import (
    AnyDecision,
    Contest,
    DeferWake,
    ForceRefresh,
    RouteReview,
    Suppress,
    SuppressReason,
    TopologyOp,
    TopologyProposal,
    WakeTarget,
    WeighWakes,
)
from engine.controller.facts import Fact
from engine.policy.model import CONTROLLER_ROOM_PREFIX

PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_.]*)\}")


@dataclass(frozen=True, slots=True)
class Activation:
    """One firing of a rule: the matched facts by alias, in the world and at the event position.
    ``index`` is the index the first decision of this firing will have among the event's decisions."""

    world: str
    position: int
    now: int
    rule: str
    facts: Mapping[str, Mapping[str, Any]]
    index: int = 0

    def origin(self, offset: int = 0) -> dict[str, Any]:
        """The fields every decision of this firing carries (``offset``: for a second decision)."""
        return {"world": self.world, "position": self.position, "rule": self.rule, "index": self.index + offset}

    def value(self, ref: str) -> Any:
        """The value of ``alias.field`` in this match (``None`` if the fact lacks the field)."""
        alias, _, name = ref.partition(".")
        return self.facts[alias].get(name)

    def render(self, template: str) -> str:
        """``template`` with each ``{alias.field}`` replaced by its value."""
        if "{" not in template:
            return template
        facts = self.facts
        return "".join(text if alias is None else str(facts[alias].get(text))
                       for text, alias in _template_parts(template))


@lru_cache(maxsize=1024)
def _template_parts(template: str) -> tuple[tuple[str, str | None], ...]:
    """A template split once into ``(literal, None)`` and ``(field, alias)`` parts (rendering then needs no
    regular expression per decision)."""
    parts: list[tuple[str, str | None]] = []
    end = 0
    for m in PLACEHOLDER.finditer(template):
        parts.append((template[end:m.start()], None))
        parts.append((m.group(2), m.group(1)))
        end = m.end()
    parts.append((template[end:], None))
    return tuple(p for p in parts if p[1] is not None or p[0])


@dataclass(frozen=True, slots=True)
class Effect:
    """What a handler wants done. The host applies retracts, then upserts, then posts, in order."""

    decisions: tuple[AnyDecision, ...] = ()
    upserts: tuple[Fact, ...] = ()
    retracts: tuple[str, ...] = ()
    posts: tuple[Fact, ...] = ()


NOTHING = Effect()


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Handler = Callable[[Activation, Any], Effect]


@dataclass(frozen=True)
class ActionSpec:
    """An action as rule files see it: its name, parameter model and what the loader must check.

    ``aliases`` maps a parameter holding an alias to the fact kind that alias must match (``None``: any);
    ``refs`` names parameters holding field references (or lists of them); ``templates`` names parameters
    holding templates."""

    name: str
    params: type[Params]
    handler: Handler
    summary: str
    aliases: Mapping[str, str | None] = field(default_factory=dict)
    refs: tuple[str, ...] = ()
    templates: tuple[str, ...] = ()


# -- fact builders (controller facts) -------------------------------------------------------------------

def wake_candidate(act: Activation, event: Mapping[str, Any], target: str, cause: str) -> Fact:
    """A proposed wake of ``target`` caused by ``event``; its ``key`` is the wake's idempotency key.
    (The host makes the id unique within the call.)"""
    return {
        "id": f"wc:{act.position}", "kind": "wake_candidate",
        "key": f"ctl:{act.world}:{act.position}:{target}", "seq": act.position, "target": target,
        "cause": cause, "source": event["actor"], "chain": event["chain"], "depth": event["depth"],
        "origin": event["origin"], "now": act.now, "age": act.now - event["origin"], "rule": act.rule,
    }


def woken_fact(chain: str, agent: str, until: int) -> Fact:
    return {"id": f"woken:{chain}:{agent}", "kind": "woken", "key": f"{chain}:{agent}", "chain": chain,
            "agent": agent, "until": until}


def cooldown_fact(agent: str, until: int, *, wake_at: int, wake_key: str, deferrals: int = 0) -> Fact:
    """``agent`` cools down until ``until`` after the wake ``wake_key`` that runs at ``wake_at`` (deferred
    ``deferrals`` times in a row; 0 for a direct wake). Every field is written, so a fact read back from SQL
    equals the one the action wrote."""
    return {"id": f"cooldown:{agent}", "kind": "cooldown", "key": agent, "agent": agent, "until": until,
            "wake_at": wake_at, "deferrals": deferrals, "wake_key": wake_key}


def budget_fact(agent: str, used: int, until: int) -> Fact:
    return {"id": f"budget:{agent}", "kind": "budget", "key": agent, "agent": agent, "used": used,
            "until": until}


# -- wake targeting and the storm ladder -----------------------------------------------------------------

class ProposeWake(Params):
    target: str
    cause: str = Field(min_length=1, max_length=200)
    event: str = "ev"
    skip_actor: bool = True


def propose_wake(act: Activation, p: ProposeWake) -> Effect:
    """Post a wake candidate for the agent named by ``target`` (nothing if it is missing, or is the
    event's own actor and ``skip_actor``)."""
    event = act.facts[p.event]
    target = act.value(p.target)
    if not isinstance(target, str) or not target or (p.skip_actor and target == event["actor"]):
        return NOTHING
    return Effect(posts=(wake_candidate(act, event, target, p.cause),))


class SuppressWake(Params):
    reason: SuppressReason
    detail: str = Field(default="", max_length=1000)
    wake: str = "wake"


def suppress_wake(act: Activation, p: SuppressWake) -> Effect:
    """Decide not to wake the candidate's target, with the guard's reason and the rendered detail."""
    w = act.facts[p.wake]
    return Effect(decisions=(Suppress(
        **act.origin(), agent=w["target"], reason=p.reason,
        detail=act.render(p.detail) or p.reason.value, idempotency_key=w["key"], depth=w["depth"],
        chain=w["chain"], cause=w["cause"]),))


class AllowWake(Params):
    wake: str = "wake"
    budget: str | None = None
    cooldown_us: int = Field(ge=0)
    budget_window_us: int = Field(gt=0)
    dedupe_us: int = Field(gt=0)


def allow_wake(act: Activation, p: AllowWake) -> Effect:
    """Wake the candidate's target and record it: the chain woke the agent (dedupe), the agent cools
    down, and one more wake is spent from its budget (a new window starts when there is none)."""
    w = act.facts[p.wake]
    target, now = w["target"], w["now"]
    spent = act.facts.get(p.budget) if p.budget else None
    used, until = (spent["used"] + 1, spent["until"]) if spent else (1, now + p.budget_window_us)
    upserts = [woken_fact(w["chain"], target, now + p.dedupe_us), budget_fact(target, used, until)]
    if p.cooldown_us:
        upserts.append(cooldown_fact(target, now + p.cooldown_us, wake_at=now, wake_key=w["key"]))
    decision = WakeTarget(
        **act.origin(), agent=target, cause=w["cause"],
        idempotency_key=w["key"], depth=w["depth"], chain=w["chain"], origin_us=w["origin"],
        source=w["source"])
    return Effect(decisions=(decision,), upserts=tuple(upserts))


class DeferOnCooldown(Params):
    wake: str = "wake"
    cooldown: str = "cool"
    budget: str | None = None
    max_deferrals: int = Field(ge=1, le=1000)
    cooldown_us: int = Field(ge=0)
    budget_window_us: int = Field(gt=0)
    dedupe_us: int = Field(gt=0)


def defer_wake(act: Activation, p: DeferOnCooldown) -> Effect:
    """The candidate's target cools down (the ``cooldown`` fact): wake it at the cooldown's end instead of
    dropping the candidate. Three cases, decided from the cooldown fact alone:

    * a wake deferred to this cooldown's end has not run yet (``wake_at`` after now): the candidate
      **joins** it (``DeferWake`` with ``joins`` = that wake's key; no new wake, no budget spent); the
      chain is recorded as woken (dedupe);
    * else, if fewer than ``max_deferrals`` deferrals in a row led to this cooldown: a **deferred wake**
      due at the cooldown's end ``T`` (``DeferWake``, ``deferrals`` one more than the cooldown's); it
      spends one wake from the budget now (once: a deferred wake is never judged again) and records the
      facts an allowed wake does, the cooldown now following the deferred wake (``until`` = T +
      ``cooldown_us``, ``wake_at`` = T);
    * else the candidate is **suppressed** with reason ``cooldown``: deferrals are bounded, so a steady
      stream of candidates cannot push an agent's wakes back forever."""
    w, cool = act.facts[p.wake], act.facts[p.cooldown]
    target, now, until = w["target"], w["now"], cool["until"]
    wake_at, done = int(cool.get("wake_at") or 0), int(cool.get("deferrals") or 0)
    common = {"agent": target, "cause": w["cause"], "depth": w["depth"], "chain": w["chain"]}
    joined = cool.get("wake_key")
    if wake_at > now and isinstance(joined, str):
        return Effect(decisions=(DeferWake(
            **act.origin(), **common, idempotency_key=w["key"], origin_us=w["origin"], source=w["source"],
            not_before_us=wake_at, deferrals=max(done, 1), joins=joined,
            detail=f"joins the wake of {target} deferred by cooldown until {wake_at}"),),
            upserts=(woken_fact(w["chain"], target, now + p.dedupe_us),))
    if done >= p.max_deferrals:
        return Effect(decisions=(Suppress(
            **act.origin(), **common, reason=SuppressReason.COOLDOWN, idempotency_key=w["key"],
            detail=f"{target} cools down until {until} after {done} deferred wakes in a row "
                   f"(the limit is {p.max_deferrals})"),))
    spent = act.facts.get(p.budget) if p.budget else None
    used, window = (spent["used"] + 1, spent["until"]) if spent else (1, now + p.budget_window_us)
    upserts = (woken_fact(w["chain"], target, now + p.dedupe_us), budget_fact(target, used, window),
               cooldown_fact(target, until + p.cooldown_us, wake_at=until, wake_key=w["key"], deferrals=done + 1))
    return Effect(decisions=(DeferWake(
        **act.origin(), **common, idempotency_key=w["key"], origin_us=w["origin"], source=w["source"],
        not_before_us=until, deferrals=done + 1, detail=f"deferred by cooldown until {until}"),),
        upserts=upserts)


# -- topology, conflicts, review, epistemic lease ---------------------------------------------------------

class ProposeTopology(Params):
    op: Literal["isolate", "share"]
    agents: list[str] = Field(min_length=1)
    reason: str = Field(min_length=1, max_length=1000)


def propose_topology(act: Activation, p: ProposeTopology) -> Effect:
    """Propose isolating the named agents, or sharing between them."""
    agents = tuple(dict.fromkeys(str(act.value(ref)) for ref in p.agents))
    return Effect(decisions=(TopologyProposal(
        **act.origin(), op=TopologyOp(p.op), agents=agents,
        reason=act.render(p.reason)),))


class ContestClaims(Params):
    term: str
    claims: list[str] = Field(min_length=2)
    agents: list[str] = Field(min_length=2, max_length=2)
    needs_decision: bool = True
    reason: str = Field(default="contradicting claims", min_length=1, max_length=1000)


def contest_claims(act: Activation, p: ContestClaims) -> Effect:
    """Mark contradicting claims CONTESTED and remember the open contest on the term."""
    term = str(act.value(p.term))
    a, b = (str(act.value(ref)) for ref in p.agents)
    contest = {"id": f"contest:{term}", "kind": "contest", "key": term, "a": a, "b": b, "status": "open",
               "needs_decision": p.needs_decision}
    return Effect(decisions=(Contest(
        **act.origin(), term=term,
        claims=tuple(str(act.value(ref)) for ref in p.claims), agents=tuple(dict.fromkeys((a, b))),
        reason=act.render(p.reason)),), upserts=(contest,))


class OpenConflictRoom(Params):
    contest: str = "contest"
    room_prefix: str = Field(default=CONTROLLER_ROOM_PREFIX, max_length=64)
    reason: str = Field(default="unresolved conflict needs a decision", min_length=1, max_length=1000)

    @field_validator("room_prefix")
    @classmethod
    def _in_the_controllers_namespace(cls, prefix: str) -> str:
        """The room ids the controller opens are in the namespace only its agent may create rooms in."""
        if not prefix.startswith(CONTROLLER_ROOM_PREFIX):
            raise ValueError(f"must start with {CONTROLLER_ROOM_PREFIX!r}: the controller's room ids, which no "
                             "agent may take")
        return prefix


def open_conflict_room(act: Activation, p: OpenConflictRoom) -> Effect:
    """Join the contest's agents in a room for the term, and remember the room."""
    c = act.facts[p.contest]
    room = f"{p.room_prefix}{c['key']}"
    fact = {"id": f"conflict_room:{c['key']}", "kind": "conflict_room", "key": c["key"], "room": room,
            "a": c["a"], "b": c["b"]}
    return Effect(decisions=(TopologyProposal(
        **act.origin(), op=TopologyOp.JOIN,
        agents=tuple(dict.fromkeys((c["a"], c["b"]))), room=room, reason=act.render(p.reason)),),
        upserts=(fact,))


class CloseConflictRoom(Params):
    room: str = "room"
    reason: str = Field(default="conflict resolved", min_length=1, max_length=1000)


def close_conflict_room(act: Activation, p: CloseConflictRoom) -> Effect:
    """The agents leave the conflict's room and it closes; the contest and the room are forgotten
    (the contest first, so no rule sees an open contest without its room)."""
    r = act.facts[p.room]
    return Effect(decisions=(TopologyProposal(
        **act.origin(), op=TopologyOp.LEAVE,
        agents=tuple(dict.fromkeys((r["a"], r["b"]))), room=r["room"], close=True,
        reason=act.render(p.reason)),), retracts=(f"contest:{r['key']}", f"conflict_room:{r['key']}"))


class RouteToReviewer(Params):
    memory: str
    reviewer: str
    event: str = "ev"
    wake: bool = True
    cause: str = Field(default="memory_review", min_length=1, max_length=200)


def route_review(act: Activation, p: RouteToReviewer) -> Effect:
    """Route a memory candidate to a reviewer and propose waking the reviewer."""
    memory, reviewer = str(act.value(p.memory)), str(act.value(p.reviewer))
    event = act.facts[p.event]
    decision = RouteReview(**act.origin(), memory=memory,
                           reviewer=reviewer)
    if not p.wake or reviewer == event["actor"]:
        return Effect(decisions=(decision,))
    return Effect(decisions=(decision,), posts=(wake_candidate(act, event, reviewer, p.cause),))


class RefreshContext(Params):
    agent: str
    reason: str = Field(min_length=1, max_length=1000)


def force_refresh(act: Activation, p: RefreshContext) -> Effect:
    """The agent must refresh its context before acting."""
    return Effect(decisions=(ForceRefresh(
        **act.origin(), agent=str(act.value(p.agent)),
        reason=act.render(p.reason)),))


class WeighWakeSignals(Params):
    enabled: bool = True
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    uncertainty: float | None = Field(default=None, ge=0.0, le=1.0)
    risk: float | None = Field(default=None, ge=0.0, le=1.0)
    novelty: float | None = Field(default=None, ge=0.0, le=1.0)
    by_cause: dict[str, float] = Field(default_factory=dict)
    reason: str = Field(min_length=1, max_length=1000)

    @field_validator("by_cause")
    @classmethod
    def _signal_values(cls, by_cause: dict[str, float]) -> dict[str, float]:
        if any(not 0.0 <= v <= 1.0 for v in by_cause.values()):
            raise ValueError("each importance must be from 0 to 1")
        return by_cause


def weigh_wakes(act: Activation, p: WeighWakeSignals) -> Effect:
    """Weigh the wakes this event causes (layered wake, seed 001 §46): the signals set and why. Nothing when
    not ``enabled``."""
    if not p.enabled:
        return NOTHING
    return Effect(decisions=(WeighWakes(
        **act.origin(), importance=p.importance, uncertainty=p.uncertainty, risk=p.risk, novelty=p.novelty,
        importance_by_cause=dict(p.by_cause), reason=act.render(p.reason)),))


ACTIONS: dict[str, ActionSpec] = {spec.name: spec for spec in (
    ActionSpec("propose_wake", ProposeWake, propose_wake, "post a wake candidate for target",
               aliases={"event": "event"}, refs=("target",)),
    ActionSpec("suppress_wake", SuppressWake, suppress_wake, "stop a wake candidate, with a reason",
               aliases={"wake": "wake_candidate"}, templates=("detail",)),
    ActionSpec("allow_wake", AllowWake, allow_wake, "wake the candidate's target and record it",
               aliases={"wake": "wake_candidate", "budget": "budget"}),
    ActionSpec("defer_wake", DeferOnCooldown, defer_wake,
               "wake the cooling target at the cooldown's end (join a pending deferred wake; bounded)",
               aliases={"wake": "wake_candidate", "cooldown": "cooldown", "budget": "budget"}),
    ActionSpec("propose_topology", ProposeTopology, propose_topology, "propose isolate/share",
               refs=("agents",), templates=("reason",)),
    ActionSpec("contest_claims", ContestClaims, contest_claims, "mark contradicting claims contested",
               refs=("term", "claims", "agents"), templates=("reason",)),
    ActionSpec("open_conflict_room", OpenConflictRoom, open_conflict_room, "join a contest's agents",
               aliases={"contest": "contest"}, templates=("reason",)),
    ActionSpec("close_conflict_room", CloseConflictRoom, close_conflict_room, "leave and close the room",
               aliases={"room": "conflict_room"}, templates=("reason",)),
    ActionSpec("route_review", RouteToReviewer, route_review, "route a memory candidate to a reviewer",
               aliases={"event": "event"}, refs=("memory", "reviewer")),
    ActionSpec("force_refresh", RefreshContext, force_refresh, "force an agent to refresh its context",
               refs=("agent",), templates=("reason",)),
    ActionSpec("weigh_wakes", WeighWakeSignals, weigh_wakes,
               "give the wakes an event causes their layered-wake signals, with a reason",
               templates=("reason",)),
)}

__all__ = [
    "ACTIONS",
    "NOTHING",
    "ActionSpec",
    "Activation",
    "Effect",
    "Handler",
    "Params",
    "budget_fact",
    "cooldown_fact",
    "wake_candidate",
    "woken_fact",
]
