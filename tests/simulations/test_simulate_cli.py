"""``pmw simulate`` for studies, grids and their bad input: a study runs by one command and prints its
answer; a bad metric, seeds spec or combination is refused (exit 3) before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.settings import Settings
from tests.cli_support import invoke
from tests.simulations.conftest import SCENARIOS

STUDIES = Path(__file__).resolve().parents[2] / "simulations" / "studies"


def pdp_env(settings: Settings) -> dict[str, str | None]:
    return {"PMW_PDP_ADDRESS": settings.pdp_address, "PMW_PDP_ADMIN_USER": settings.pdp_admin_user,
            "PMW_PDP_ADMIN_PASSWORD": settings.pdp_admin_password, "CERBOS_NO_TELEMETRY": "1"}


def test_a_study_runs_by_one_command_and_prints_its_answer(tmp_path: Path, sim_settings: Settings) -> None:
    out = tmp_path / "h1"
    done = invoke(None, "simulate", "--study", str(STUDIES / "h1"), "--ci", "--out", str(out),
                  env=pdp_env(sim_settings))
    assert done.exit_code == 0, done.output
    assert "h1-sparse-continuity: supported: continuation fidelity stays at or above 0.95" in done.output
    assert "h1-sparse-continuity: supported: every task is completed" in done.output
    answers = json.loads((out / "answer.json").read_text())["answers"]
    assert [a["verdict"] for a in answers] == ["supported", "supported"] and answers[0]["claim"]["value"] == 0.95
    crashed = [json.loads(p.read_text())["metrics"]["counts"]["wakes_run_twice"] for p in out.rglob("metrics.json")]
    assert crashed == [1, 1]  # the fault the continuity is measured across did happen in both runs
    assert (out / "study.html").is_file() and (out / "answer.json").is_file()
    assert (out / "runs" / "interval_s=600" / "metrics.json").is_file()


@pytest.mark.parametrize(("args", "needle"), [
    (["--sweep", "timeline.0.deliveries=1,2", "--metrics", "wakes,no_such_figure"], "unknown figure 'no_such_figure'"),
    (["--seeds", "0"], "between 1 and 1000 seeds"),
    (["--sweep", "timeline.0.deliveries=1,2", "--sweep", "timeline.0.deliveries=3"], "swept twice"),
    (["--sweep", "timeline.0.deliveries=1,0"], "timeline.0.deliveries"),
    (["--sweep", "timeline.0.deliveries=1", "--compare", str(SCENARIOS / "polling.yaml")], "do not combine"),
    (["--seed", "3", "--seeds", "2"], "not both"),
])
def test_bad_grid_input_is_refused_before_any_output(tmp_path: Path, args: list[str], needle: str) -> None:
    out = tmp_path / "out"
    done = invoke(None, "simulate", str(SCENARIOS / "duplicate_wake.yaml"), "--out", str(out), *args)
    assert done.exit_code == 3, done.output
    assert needle in done.output
    assert not out.exists()


def test_a_study_with_a_file_is_refused(tmp_path: Path) -> None:
    done = invoke(None, "simulate", str(SCENARIOS / "duplicate_wake.yaml"), "--study", str(STUDIES / "h3"),
                  "--out", str(tmp_path / "out"))
    assert done.exit_code == 3 and "not both" in done.output
