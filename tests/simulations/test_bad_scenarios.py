"""A bad scenario file fails fast, names the file, the line and the field, and writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.cli.app import app
from engine.cli.simulate import register
from simulations.errors import ScenarioError, ScenarioTimelineError
from simulations.run import simulate_file

GOOD = """\
name: tiny
stop: {at_s: 100}
agents:
  - id: ada
    behaviour: worker
    capabilities: [task.create, task.work, state.write]
world:
  tasks: [{id: t1, goal: work, owner: ada, steps: 2}]
timeline:
  - {at: 1, kind: wake, target: ada, task: t1}
  - {at: 50, kind: wake, target: ada, task: t1}
"""

CASES = [
    # (what, replace, with, error class, line, field, words in the reason)
    ("unknown behaviour", "behaviour: worker", "behaviour: wizard", ScenarioError, 5, "agents.0.behaviour",
     "unknown behaviour 'wizard'"),
    ("bad field", "    capabilities:", "    capabilites:", ScenarioError, 6, "agents.0.capabilites", "unknown field"),
    ("wrong type", "steps: 2", "steps: two", ScenarioError, 8, "world.tasks.0.steps", "valid integer"),
    ("unknown timeline kind", "kind: wake, target: ada, task: t1}\n  - {at: 50", "kind: nap, target: ada}\n  - {at: 50",
     ScenarioError, 10, "timeline.0", "unknown timeline kind 'nap'"),
    ("undeclared agent", "{at: 50, kind: wake, target: ada", "{at: 50, kind: wake, target: bob", ScenarioTimelineError,
     11, "timeline.1.target", "'bob', which is not declared"),
    ("times out of order", "{at: 50,", "{at: 0.5,", ScenarioTimelineError, 11, "timeline.1.at", "before the previous"),
    ("past the stop", "{at: 50,", "{at: 150,", ScenarioTimelineError, 11, "timeline.1.at", "past the stop"),
    ("event of an undeclared agent", "{at: 50, kind: wake, target: ada, task: t1}",
     "{at: 50, kind: event, agent: bob, type: note.posted, subject: plan}", ScenarioTimelineError, 11,
     "timeline.1.agent", "not declared"),
    ("event type", "{at: 50, kind: wake, target: ada, task: t1}",
     "{at: 50, kind: event, agent: ada, type: Note Posted, subject: plan}", ScenarioError, 11, "timeline.1.event.type",
     "pattern"),
    ("repeated event past the stop", "{at: 50, kind: wake, target: ada, task: t1}",
     "{at: 50, kind: event, agent: ada, type: note.posted, subject: plan, every_s: 30, count: 3}",
     ScenarioTimelineError, 11, "timeline.1.at", "past the stop"),
    ("event count without every_s", "{at: 50, kind: wake, target: ada, task: t1}",
     "{at: 50, kind: event, agent: ada, type: note.posted, subject: plan, count: 3}", ScenarioTimelineError, 11,
     "timeline.1.count", "needs every_s"),
    ("undeclared task", "{at: 50, kind: wake, target: ada, task: t1", "{at: 50, kind: wake, target: ada, task: t9",
     ScenarioTimelineError, 11, "timeline.1.task", "'t9'"),
    ("duplicate key", "stop: {at_s: 100}", "stop: {at_s: 100}\nstop: {at_s: 200}", ScenarioError, 3, "stop",
     "duplicate key"),
    ("unknown rule constant", "stop: {at_s: 100}", "stop: {at_s: 100}\nrules: {constants: {max_dept: 2}}",
     ScenarioError, 3, "rules.constants.max_dept", "declares constant 'max_dept'"),
    ("YAML syntax", "[task.create, task.work, state.write]", "[task.create, task.work", ScenarioError, 7, "",
     "YAML syntax"),
]


@pytest.mark.parametrize(("what", "old", "new", "cls", "line", "field", "reason"), CASES, ids=[c[0] for c in CASES])
def test_bad_scenario_names_file_line_and_field_and_writes_nothing(
        tmp_path: Path, what: str, old: str, new: str, cls: type[ScenarioError], line: int, field: str,
        reason: str) -> None:
    assert old in GOOD, what
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD.replace(old, new, 1))
    out = tmp_path / "out"
    with pytest.raises(cls) as caught:
        simulate_file(path, out)  # no PDP is needed: the file fails before anything opens
    err = caught.value
    assert (err.file, err.line, err.field) == (str(path), line, field)
    assert reason in err.reason
    assert err.message.startswith(f"{path}:{line}: ")
    assert not out.exists()


def test_cli_reports_a_bad_scenario_with_exit_code_3_and_the_line(tmp_path: Path) -> None:
    if not any(c.name == "simulate" for c in app.registered_commands):
        register(app)  # until engine/cli/app.py registers it
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD.replace("behaviour: worker", "behaviour: wizard"))
    result = CliRunner().invoke(app, ["simulate", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 3
    assert f"{path}:5: agents.0.behaviour: unknown behaviour 'wizard'" in result.output
    assert not (tmp_path / "out").exists()
