"""Scripted agents and a team for run-loop tests."""

from __future__ import annotations

from engine.models.agents import Agent
from engine.models.wakes import Wake
from engine.protocol.adapters import AgentDecision, RuleAgent, SetState
from engine.runloop import InProcessRunner
from engine.world import World
from engine.world.projection import WorldView
from tests.conftest import add_agent, book_of


def relay(out_key: str) -> RuleAgent:
    """An agent that, whenever woken, bumps ``out_key`` (whoever follows that key is woken next). Its decision
    rests on ``out_key`` alone (``reads``): another agent's writes landing meanwhile do not refuse it."""
    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        entry = next((s for s in view.state if s.key == out_key), None)
        version, value = (entry.version, entry.value) if entry else (0, 0)
        return AgentDecision(decision="act", reads=[out_key] if entry else [],
                             effects=[SetState(key=out_key, expected_version=version, value=int(value) + 1)])
    return RuleAgent([rule])


def ring(world: World, names: list[str]) -> InProcessRunner:
    """Agents in a ring: each follows the previous one's output key and writes its own."""
    for name in names:
        add_agent(world, name, ["state.write"])
    for i, name in enumerate(names):
        world.subscribe(name, f"{names[i - 1]}-out")
    runner = InProcessRunner(book_of(world), adapters={n: relay(f"{n}-out") for n in names})
    runner.start()
    return runner
