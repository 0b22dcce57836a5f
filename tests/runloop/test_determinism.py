"""Determinism: the same scenario twice (injected clock, seed and ids) gives identical event logs, bit for
bit, through the controller, the worker, the real PDP and the gateway."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.models.agents import Agent
from engine.models.wakes import Wake
from engine.policy.cerbos_adapter import CerbosPdp
from engine.protocol.adapters import AgentDecision, AppendEvent, RuleAgent
from engine.runloop import InProcessRunner
from engine.sources import ManualClock
from engine.world.projection import WorldView
from tests.conftest import add_agent, book_of, close_world, open_pdp_world
from tests.runloop.support import relay


def claimant(value: str) -> RuleAgent:
    """Asserts ``value`` for the term ``design`` when woken about the task; resolves once in a room."""
    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        if view.rooms:
            return AgentDecision(decision="act", effects=[AppendEvent(
                event_type="conflict.resolved", payload={"term": "design", "value": value})])
        return AgentDecision(decision="act", effects=[AppendEvent(
            event_type="claim.asserted", payload={"term": "design", "claim": f"{agent.agent_id}-claim",
                                                  "value": value})])
    return RuleAgent([rule])


def scenario(tmp: Path, pdp: CerbosPdp) -> list[dict[str, Any]]:
    world = open_pdp_world(f"sqlite:///{tmp / 'world.db'}", pdp, tmp / "artifacts", clock=ManualClock(), seed=11)
    for name in ("a", "b", "c"):
        add_agent(world, name, ["state.write", "task.create", "task.work"])
    for i, name in enumerate("abc"):
        world.subscribe(name, f"{'abc'[i - 1]}-out")
    world.create_task("a", "pick a design", task_id="t1")
    world.subscribe("b", "t1")
    runner = InProcessRunner(book_of(world), adapters={"a": relay("a-out"), "b": claimant("blue"), "c": relay("c-out")})
    runner.start()
    world.compare_and_set_state("a", "a-out", 0, 1)
    world.clock.advance(1)  # type: ignore[attr-defined]
    world.append_event("a", "claim.asserted", {"term": "design", "claim": "a-claim", "value": "red"})
    runner.run_until_quiet(max_rounds=100, advance_clock=True)
    runner.close()
    events = book_of(world).store.read.events(0)
    close_world(world)
    return events


def test_the_same_scenario_twice_gives_identical_event_logs(tmp_path: Path, pdp_client: CerbosPdp) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first = scenario(tmp_path / "one", pdp_client)
    second = scenario(tmp_path / "two", pdp_client)
    assert first == second
    kinds = [e["event_type"] for e in first]
    # the run really exercised the controller: wakes, a suppressed storm, a contest and a conflict room
    assert kinds.count("controller.step") >= 3 and "claim.contested" in kinds and "room.opened" in kinds
    steps = [d for e in first if e["event_type"] == "controller.step" for d in e["payload"]["decisions"]]
    assert any(d["kind"] == "suppress" for d in steps) and any(d["kind"] == "contest" for d in steps)
