"""Helpers for the end-to-end MVP tests (seed 000 §103-117): a runner over the real PDP, scripted agents,
and the checks every MVP test repeats (one receipt per wake, a trace per run)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from engine.models.agents import Agent
from engine.models.events import Event
from engine.models.receipts import Receipt
from engine.models.wakes import Wake
from engine.protocol.adapters import AgentAdapter, AgentDecision, AppendEvent, Effect, RuleAgent
from engine.runloop import InProcessRunner
from engine.sources import ManualClock
from engine.world import World
from engine.world.list_limits import MAX_EVENTS
from engine.world.projection import WorldView
from tests.conftest import book_of

GOV = "gov"
Rule = Callable[[Agent, WorldView, Wake], AgentDecision | None]


def runner_for(world: World, adapters: dict[str, AgentAdapter], **kwargs: Any) -> InProcessRunner:
    """The controller (``rules/``) and one worker over ``world``; the governor never acts through it
    (it gets a silent adapter, so a wake it receives as a task owner ends in a NO_ACTION receipt)."""
    runner = InProcessRunner(book_of(world), adapters={GOV: RuleAgent([]), **adapters}, **kwargs)
    runner.start()
    return runner


def act(*effects: Effect, reason: str | None = None) -> AgentDecision:
    return AgentDecision(decision="act", effects=list(effects), reason=reason)


def once(rule: Rule) -> Rule:
    """A rule that fires at most once (later wakes fall through to the next rule)."""
    fired: list[bool] = []

    def wrapped(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        if fired:
            return None
        decided = rule(agent, view, wake)
        if decided is not None:
            fired.append(True)
        return decided
    return wrapped


def clock(world: World) -> ManualClock:
    assert isinstance(world.clock, ManualClock)
    return world.clock


def all_events(world: World) -> list[Event]:
    out: list[Event] = []
    while True:
        batch = world.events(out[-1].seq if out else 0, 1000, actor=GOV)
        if not batch:
            return out
        out += batch


def events_of(world: World, event_type: str, *, actor: str | None = None) -> list[Event]:
    return [e for e in all_events(world) if e.event_type == event_type and (actor is None or e.actor_id == actor)]


def controller_decisions(world: World, kind: str | None = None) -> list[dict[str, Any]]:
    """The decisions the controller committed (in its ``controller.step`` events), in log order."""
    return [d for e in events_of(world, "controller.step") for d in e.payload["decisions"]
            if kind is None or d["kind"] == kind]


def wakes_of(world: World, agent: str | None = None) -> list[Wake]:
    return world.list_wakes(target_agent=agent, actor=GOV)


def receipts_by_wake(world: World, wakes: list[Wake]) -> dict[str, Receipt]:
    """Check that every wake ended with exactly one receipt (and a trace of its run, if it ran) and
    return the receipts by wake id."""
    counts = Counter(r.wake_id for r in world.list_receipts(actor=GOV) if r.wake_id is not None)
    out: dict[str, Receipt] = {}
    for w in wakes:
        current = world.get_wake(w.wake_id, actor=GOV)
        assert current.status.value in ("acked", "cancelled"), f"{w.wake_id} still {current.status.value}"
        assert counts[w.wake_id] == 1, f"{w.wake_id} has {counts[w.wake_id]} receipts"
        receipt = world.receipt_for_wake(w.wake_id, actor=GOV)
        if current.status.value == "acked":
            trace = world.get_trace(w.wake_id, actor=GOV)
            assert (trace.trace_id, trace.agent_id, trace.outcome) == (w.wake_id, w.target_agent,
                                                                      receipt.outcome.value)
        out[w.wake_id] = receipt
    return out


def assert_every_wake_has_one_receipt(world: World) -> dict[str, Receipt]:
    """Every wake of the world ended with exactly one receipt, and every run left its trace."""
    wakes = wakes_of(world)
    assert wakes, "the scenario woke nobody"
    return receipts_by_wake(world, wakes)


def wakes_as_ended(world: World, agent: str) -> list[Wake]:
    """``agent``'s wakes in the order they ended (the log position of each wake's last transition). Not list
    order: wakes enqueued at one instant of a manual clock list (and are claimed) in the order of their ids."""
    ended: dict[str, int] = {}
    after = 0
    for _ in range(1_000):  # bounded: 1,000 pages of the log
        page = world.events(after, limit=MAX_EVENTS, actor=GOV)
        ended.update((e.subject_id, e.seq) for e in page if e.subject_kind == "wake")
        if len(page) < MAX_EVENTS:
            break
        after = page[-1].seq
    return sorted(wakes_of(world, agent), key=lambda w: ended[w.wake_id])


def outcomes(world: World, agent: str) -> list[str]:
    """The outcomes of ``agent``'s wakes in the order they ended (:func:`wakes_as_ended`)."""
    wakes = wakes_as_ended(world, agent)
    receipts = receipts_by_wake(world, wakes)
    return [receipts[w.wake_id].outcome.value for w in wakes]


def claim(term: str, value: str) -> Rule:
    """A rule that asserts once, as its agent, that ``term`` is ``value`` (``claim.asserted``: the controller
    contests two agents' different claims on one term)."""
    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision:
        return act(AppendEvent(event_type="claim.asserted",
                               payload={"term": term, "claim": f"{agent.agent_id}-says", "value": value}))
    return once(rule)

