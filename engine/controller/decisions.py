"""The controller's outputs. A decision is data: the run loop commits it through the write gateway.

Every decision carries the world, the ``position`` (seq) of the event that produced it and its ``index``
among that event's decisions, so ``(world, position, index)`` -- :attr:`DecisionBase.key` -- is unique and
stable: replaying the same event over the same facts and rules yields the same keys, and the gateway's
idempotency turns a replay after a crash into no-ops. ``rule`` names the rule (``file/rule``) that decided.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field

from engine.models.common import Model


class SuppressReason(StrEnum):
    """Why a proposed wake was not issued (the wake-storm guards)."""

    TTL = "ttl"
    DEPTH = "depth"
    DEDUPE = "dedupe"
    COOLDOWN = "cooldown"
    BUDGET = "budget"


class TopologyOp(StrEnum):
    ISOLATE = "isolate"
    SHARE = "share"
    JOIN = "join"
    LEAVE = "leave"


class DecisionBase(Model):
    world: str
    position: int = Field(ge=0)
    index: int = Field(default=0, ge=0)
    rule: str

    @property
    def key(self) -> str:
        """Unique per world and event: the gateway's idempotency key for committing this decision."""
        return f"{self.world}:{self.position}:{self.index}"

    def signature(self) -> dict[str, Any]:
        """What the decision does, without where it came from (rule) or its rank (index): two rule sets
        that decide the same thing for an event have equal signatures."""
        return self.model_dump(mode="json", exclude={"index", "rule"})


class WakeProposal(DecisionBase):
    """What every decision that issues a wake of ``agent`` carries (abstract: a decision is one of its
    kinds): the wake's idempotency key, and the depth, chain and origin its payload carries so the agent's
    resulting events continue the chain."""

    kind: Literal["wake", "defer"]  # each kind's own literal (declared here to keep the field order)
    agent: str
    cause: str
    idempotency_key: str
    depth: int = Field(ge=0)
    chain: str
    origin_us: int = Field(ge=0)
    source: str


class WakeTarget(WakeProposal):
    """Wake ``agent``: enqueue a wake with ``idempotency_key``, due now."""

    kind: Literal["wake"] = "wake"


class Suppress(DecisionBase):
    """A proposed wake of ``agent`` was stopped by a storm guard; ``reason`` and ``detail`` say which and
    why. ``wake_id`` names an already queued wake to cancel, when the suppression is about one."""

    kind: Literal["suppress"] = "suppress"
    agent: str
    reason: SuppressReason
    detail: str
    idempotency_key: str
    depth: int = Field(ge=0)
    chain: str
    cause: str
    wake_id: str | None = None


class DeferWake(WakeProposal):
    """A proposed wake of ``agent`` stopped only by the cooldown ``reason``: it is issued as a wake due at
    ``not_before_us`` (the cooldown's end) instead of being dropped. ``deferrals`` counts the deferrals in a
    row behind this agent's cooldown (1: the cooldown followed a direct wake), bounded by the rules'
    ``max_deferrals``. With ``joins`` the candidate adds nothing to the queue: it joins the deferred wake
    with that idempotency key, which has not run yet (two candidates inside one cooldown, one wake).
    ``detail`` is the text the wake's payload, and so its receipt and trace, carry."""

    kind: Literal["defer"] = "defer"
    reason: SuppressReason = SuppressReason.COOLDOWN
    not_before_us: int = Field(ge=0)
    detail: str
    deferrals: int = Field(ge=1)
    joins: str | None = None


class TopologyProposal(DecisionBase):
    """Propose a topology change (validated and committed as a topology transaction by the gateway):
    isolate agents, share between them, join them in ``room``, or have them leave it (``close``: and
    close the room)."""

    kind: Literal["topology"] = "topology"
    op: TopologyOp
    agents: tuple[str, ...] = Field(min_length=1)
    room: str | None = None
    close: bool = False
    reason: str


class Contest(DecisionBase):
    """Mark the contradicting ``claims`` on ``term`` CONTESTED (none is overwritten)."""

    kind: Literal["contest"] = "contest"
    term: str
    claims: tuple[str, ...] = Field(min_length=2)
    agents: tuple[str, ...] = Field(min_length=1)
    reason: str


class RouteReview(DecisionBase):
    """Route the memory candidate ``memory`` to ``reviewer``."""

    kind: Literal["route_review"] = "route_review"
    memory: str
    reviewer: str


class ForceRefresh(DecisionBase):
    """``agent`` must refresh its context before it may act (epistemic lease)."""

    kind: Literal["force_refresh"] = "force_refresh"
    agent: str
    reason: str


class WeighWakes(DecisionBase):
    """The layered wake's signals (seed 001 §46) the wakes decided for this event carry: each signal this
    weighing sets (``None``: not set), and ``importance_by_cause`` (a wake's importance from its cause). The
    run loop gives each wake of the step the highest value any weighing sets for each signal, and the
    weighings' reasons (``engine.runloop.follower``). ``enabled`` false: it weighs nothing (the rules'
    ``layered_wake`` constant off)."""

    kind: Literal["weigh"] = "weigh"
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    uncertainty: float | None = Field(default=None, ge=0.0, le=1.0)
    risk: float | None = Field(default=None, ge=0.0, le=1.0)
    novelty: float | None = Field(default=None, ge=0.0, le=1.0)
    importance_by_cause: dict[str, float] = Field(default_factory=dict)
    reason: str


Decision = Annotated[
    WakeTarget | Suppress | DeferWake | TopologyProposal | Contest | RouteReview | ForceRefresh | WeighWakes,
    Field(discriminator="kind"),
]
AnyDecision = (WakeTarget | Suppress | DeferWake | TopologyProposal | Contest | RouteReview | ForceRefresh
               | WeighWakes)

__all__ = [
    "AnyDecision",
    "Contest",
    "Decision",
    "DecisionBase",
    "DeferWake",
    "ForceRefresh",
    "RouteReview",
    "Suppress",
    "SuppressReason",
    "TopologyOp",
    "TopologyProposal",
    "WakeProposal",
    "WakeTarget",
    "WeighWakes",
]
