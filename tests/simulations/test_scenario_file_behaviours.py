"""A scenario *file* names a behaviour of one's own as ``MODULE:ATTR`` (loaded, validated, run); anything that is
neither a library name nor a module path fails at load with file:line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.settings import Settings
from simulations.errors import ScenarioError
from simulations.run import simulate_file
from simulations.scenario import load_scenario

FILE = """\
name: own-in-file
seed: 3
stop: {at_s: 40}
agents:
  - {id: ada, behaviour: BEHAVIOUR, capabilities: [state.write]}
timeline:
  - {at: 1, kind: wake, target: ada}
  - {at: 10, kind: wake, target: ada}
  - {at: 20, kind: model_replacement, agent: ada, model: m2, behaviour: tests.simulations.own_agents:Tally}
  - {at: 30, kind: wake, target: ada}
"""


def test_a_module_path_behaviour_in_a_scenario_file_runs_as_its_agent(tmp_path: Path, sim_settings: Settings) -> None:
    path = tmp_path / "own.yaml"
    path.write_text(FILE.replace("BEHAVIOUR", "tests.simulations.own_agents:Tally"), encoding="utf-8")
    assert load_scenario(path).agents[0].behaviour == "tests.simulations.own_agents:Tally"
    result = simulate_file(path, tmp_path / "out", settings=sim_settings, plots=False)
    events = [json.loads(line) for line in (result.out / "events.jsonl").read_text().splitlines()]
    writes = [e for e in events if e["event_type"] == "state.set" and e["subject_id"] == "tally:ada"]
    assert [e["actor_id"] for e in writes] == ["ada", "ada", "ada"]  # one per run, decided as ada
    assert result.metrics.counts["acted"] == 3


@pytest.mark.parametrize("bad", ["wizard", "tests.simulations.own_agents", "a:b:c", "1mod:attr"])
def test_a_behaviour_neither_in_the_library_nor_a_module_path_fails_at_load(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(FILE.replace("BEHAVIOUR", bad), encoding="utf-8")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value).startswith(f"{path}:5: agents.0.behaviour: unknown behaviour {bad!r}")
