"""Behaviours of one's own (``MODULE:ATTR`` or a Python object, the ``pmw worker --agent`` contract) run in a
scenario through the PDP and the gateway; a bad one fails before anything runs, with a typed error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.errors import BehaviourInvalid, BehaviourUnavailable
from engine.models.receipts import Decision
from engine.protocol.adapters import AgentDecision
from engine.settings import Settings
from simulations.driver import simulate
from simulations.scenario import Scenario, parse_scenario
from tests.simulations.own_agents import Tally

SCENARIO = """
name: own-behaviours
seed: 3
stop: {at_s: 60}
agents:
  - {id: ada, behaviour: worker, capabilities: [state.write]}
  - {id: bo, behaviour: worker, capabilities: [state.write]}
timeline:
  - {at: 1, kind: wake, target: ada, cause: first}
  - {at: 5, kind: wake, target: bo, cause: look}
  - {at: 10, kind: wake, target: ada, cause: second}
  - {at: 20, kind: conversation_replacement, agent: ada}
  - {at: 30, kind: wake, target: ada, cause: third}
"""


def with_behaviour(agent: str, behaviour: str) -> Scenario:
    """The scenario with ``agent`` on ``behaviour``. (The scenario file's ``behaviour`` field takes only the
    library's names until ``simulations/scenario.py`` accepts ``MODULE:ATTR``: the driver resolves either.)"""
    s = parse_scenario(SCENARIO)
    agents = [a.model_copy(update={"behaviour": behaviour}) if a.id == agent else a for a in s.agents]
    return s.model_copy(update={"agents": agents})


def run_events(scenario: Scenario, out: Path, settings: Settings, **kw: Any) -> list[dict[str, Any]]:
    _, runtime = simulate(scenario, out, settings=settings, **kw)
    try:
        return list(runtime.store.read.events(0, 10_000))
    finally:
        runtime.close()


def receipts(events: list[dict[str, Any]], agent: str) -> list[dict[str, Any]]:
    return [c["values"] for e in events if e["event_type"] == "wake.ack" for c in e["changes"]
            if c.get("table") == "receipts" and c["values"]["agent_id"] == agent]


def test_a_module_path_behaviour_runs_in_a_scenario_as_its_agent(tmp_path: Path, sim_settings: Settings) -> None:
    events = run_events(with_behaviour("ada", "tests.simulations.own_agents:Tally"), tmp_path, sim_settings)
    writes = [e for e in events if e["event_type"] == "state.set" and e["subject_id"] == "tally:ada"]
    assert [e["actor_id"] for e in writes] == ["ada", "ada", "ada"]  # decided by the PDP as ada, one per run
    values = [c["values"]["value"]["n"] for e in writes for c in e["changes"] if c.get("table") == "state_entries"]
    assert values == [1, 2, 3]  # the count lives in the world: the new conversation continues from it
    reasons = [e["payload"]["reason"] for e in events if e["event_type"] == "wake.ack" and e["actor_id"] == "ada"]
    assert [r.split("(")[1] for r in reasons] == [  # ... while the factory made a fresh adapter for the new one
        "run 1 of this conversation)", "run 2 of this conversation)", "run 1 of this conversation)"]
    assert [r["outcome"] for r in receipts(events, "ada")] == ["acted"] * 3
    assert [r["outcome"] for r in receipts(events, "bo")] == ["no_action"]  # bo stays on the library's worker


def test_a_decision_function_is_wrapped_as_an_llm_backed_agent(tmp_path: Path, sim_settings: Settings) -> None:
    events = run_events(with_behaviour("bo", "tests.simulations.own_agents:decide"), tmp_path, sim_settings)
    noted = [e for e in events if e["event_type"] == "own.noted"]
    assert [(e["actor_id"], e["payload"]["cause"]) for e in noted] == [("bo", "look")]
    assert [r["outcome"] for r in receipts(events, "bo")] == ["acted"]


def test_a_python_object_gives_one_agent_its_own_behaviour(tmp_path: Path, sim_settings: Settings) -> None:
    seen: list[str] = []

    def watcher(context: dict[str, Any]) -> dict[str, Any]:
        seen.append(context["wake"]["cause"])
        return AgentDecision(decision=Decision.NO_ACTION, reason="only watching").model_dump(mode="json")

    events = run_events(parse_scenario(SCENARIO), tmp_path, sim_settings, behaviours={"ada": watcher})
    assert seen == ["first", "second", "third"]
    assert [r["outcome"] for r in receipts(events, "ada")] == ["no_action"] * 3


@pytest.mark.parametrize(("path", "error", "says"), [
    ("tests.simulations.no_such_module:Tally", BehaviourUnavailable, "does not import"),
    ("tests.simulations.own_agents:Missing", BehaviourUnavailable, "has no attribute 'Missing'"),
    ("tests.simulations.own_agents:NOT_AN_ADAPTER", BehaviourInvalid, "is a int"),
    ("tests.simulations.own_agents:two_arguments", BehaviourInvalid, "2 required arguments"),
    ("tests.simulations.own_agents:make_nothing", BehaviourInvalid, "returned a object"),
])
def test_a_bad_behaviour_fails_with_a_typed_error_before_the_world_opens(
        path: str, error: type[Exception], says: str, tmp_path: Path, sim_settings: Settings) -> None:
    with pytest.raises(error) as caught:
        run_events(with_behaviour("bo", path), tmp_path, sim_settings)
    assert says in str(caught.value)
    assert caught.value.details()["field"] == "agents.1.behaviour"  # type: ignore[attr-defined]
    if error is BehaviourUnavailable or "returned" not in says:
        assert not (tmp_path / "world.db").exists()  # nothing was opened, nothing written


def test_behaviours_for_an_agent_the_scenario_does_not_declare_are_refused(tmp_path: Path,
                                                                           sim_settings: Settings) -> None:
    from engine.errors import InvalidInput

    with pytest.raises(InvalidInput, match="carol"):
        run_events(parse_scenario(SCENARIO), tmp_path, sim_settings, behaviours={"carol": Tally})
    assert not (tmp_path / "world.db").exists()
