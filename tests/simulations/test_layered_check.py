"""The simulations' lightweight check (``params.check``, the layered wake's layer 2): told only what triggered a
wake, it finds it worth a full run when it is about a subject (or of a type) the agent's spec names; a wake that
names no trigger always is; the check never runs the agent."""

from __future__ import annotations

from typing import Any

from engine.models.agents import Agent
from engine.models.wakes import Wake, WakeStatus
from engine.protocol.adapters import AgentDecision
from engine.runloop.worker import CheckingAdapter
from engine.world.projection import WorldView
from simulations.behaviours import Checked
from simulations.scenario import CheckSpec


class Never:
    def run(self, agent_state: Agent, world_view: WorldView, event: Wake) -> AgentDecision:
        raise AssertionError("a check never runs the agent")


def wake(payload: dict[str, Any]) -> Wake:
    return Wake.model_construct(wake_id="wak_1", target_agent="bo", cause="subscriber", status=WakeStatus.PENDING,
                                payload=payload)  # the check reads the payload only


def trigger(kind: str, subject: str) -> dict[str, Any]:
    return {"trigger": {"type": kind, "subject_kind": "state", "subject_id": subject}}


def test_the_check_judges_by_the_trigger_alone() -> None:
    checked = Checked(Never(), CheckSpec(subjects=["progress:t-a"], types=["ops.change"]))
    assert isinstance(checked, CheckingAdapter)
    agent = Agent.model_construct(agent_id="bo")  # the check reads the wake only
    assert checked.check(agent, wake(trigger("state.set", "progress:t-a"))).worth_acting
    assert checked.check(agent, wake(trigger("ops.change", "anything"))).worth_acting
    verdict = checked.check(agent, wake(trigger("state.set", "weather")))
    assert not verdict.worth_acting and "weather" in verdict.reason
    assert checked.check(agent, wake({})).worth_acting  # nothing to judge by: the full run decides
    assert checked.check(agent, wake({"trigger": "not a mapping"})).worth_acting
