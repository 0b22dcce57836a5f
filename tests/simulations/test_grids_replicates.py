"""Grids, replicates and what their reports show (issue 15): an effect outside any fixed subset of figures is
shown, a 2 x 3 grid with 3 seeds is 18 runs with intervals, the job count changes no byte of metrics.json,
and a typo in an ``expect`` key fails at load with file:line."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.settings import Settings
from simulations.errors import ScenarioError
from simulations.results import expectation_status
from simulations.run import simulate_file, sweep
from simulations.scenario import load_scenario
from simulations.stats import delta, summarize, t975

REPO = Path(__file__).resolve().parents[2]

SMALL = """\
name: grid-small
seed: 1
clock: {bucket_s: 30}
stop: {at_s: 160}
agents:
  - {id: ada, behaviour: worker, capabilities: [state.write, task.create, task.work], params: {forward_to: bo}}
  - {id: bo, behaviour: worker, capabilities: [state.write, task.create, task.work], params: {follows: t1}}
world:
  tasks:
    - {id: t1, goal: the work, owner: ada, assignee: ada, steps: 3}
    - {id: t2, goal: review the work, owner: bo, assignee: bo, steps: 3}
  subscriptions: [{agent: bo, subject: "progress:t1"}]
timeline:
  - {at: 1, kind: wake, target: ada, task: t1, every_s: 40, count: 3, jitter_s: 35}
  - {at: 5, kind: wake, target: bo, task: t2, every_s: 40, count: 3, jitter_s: 35}
"""

OUTAGE = """\
name: outage
seed: 3
clock: {bucket_s: 15}
stop: {at_s: 120}
agents:
  - {id: ada, behaviour: worker, capabilities: [state.write, task.create, task.work]}
world:
  tasks: [{id: t1, goal: steady work, owner: ada, assignee: ada, steps: 8}]
timeline:
  - {at: 1, kind: wake, target: ada, task: t1, every_s: 10, count: 10}
  - {at: 21, kind: pdp_outage, duration_s: 2}   # right when the third wake is queued
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# -- load-time checks and statistics (no run) ------------------------------------------------------------

def test_an_unknown_expect_key_fails_at_load_with_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "typo.yaml", SMALL + "expect:\n  task_quality: 1\n  task_qualty: 1\n")
    with pytest.raises(ScenarioError) as caught:
        simulate_file(str(path), str(tmp_path / "out"))  # fails before anything is written
    err = caught.value
    assert (err.line, err.field) == (SMALL.count("\n") + 3, "expect.task_qualty")
    assert str(err).startswith(f"{path}:{err.line}: expect.task_qualty: unknown figure")
    assert "did you mean task_quality" in str(err)
    assert not (tmp_path / "out").exists()


def test_known_expect_keys_load(tmp_path: Path) -> None:
    text = SMALL + "expect:\n  task_quality: 1\n  wakes: {min: 1}\n  suppressed_depth: 0\n  no_unauthorized_action: 1\n"
    assert set(load_scenario(write(tmp_path, "ok.yaml", text)).expect) == {
        "task_quality", "wakes", "suppressed_depth", "no_unauthorized_action"}


def test_a_bad_sweep_or_seeds_fails_before_any_run(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", SMALL)
    for specs, seeds in ((["stop.at_s=100", "stop.at_s=120"], None), (["novalue="], None), ([], "0"),
                         (["world.tasks.0.steps=0,3"], None)):
        with pytest.raises(ScenarioError):
            sweep(path, specs, tmp_path / "out", seeds=seeds)
    assert not (tmp_path / "out").exists()


def test_summary_is_mean_sample_std_and_student_t_interval() -> None:
    s = summarize([1.0, 2.0, 4.0])
    assert s.mean == pytest.approx(7 / 3) and s.std == pytest.approx(math.sqrt(7 / 3))
    half = 4.303 * math.sqrt(7 / 3) / math.sqrt(3)
    assert (s.ci_low, s.ci_high) == (pytest.approx(7 / 3 - half), pytest.approx(7 / 3 + half))
    assert t975(1) == 12.706 and t975(60) == pytest.approx(2.000, abs=2e-3)
    assert t975(1000) == pytest.approx(1.962, abs=1e-3)


def test_not_applicable_is_missing_never_zero() -> None:
    s = summarize([None, 1.0, 3.0])
    assert (s.n, s.missing, s.mean) == (2, 1, 2.0)
    assert summarize([None, None]).mean is None
    assert delta(summarize([None]), summarize([1.0])).value is None


def test_recovery_success_with_nothing_injected_is_not_applicable(tmp_path: Path, sim_settings: Settings) -> None:
    path = write(tmp_path, "noinj.yaml", SMALL + "expect:\n  recovery_success: 1\n  tasks_completed: {min: 1}\n")
    result = simulate_file(path, tmp_path / "out", settings=sim_settings, plots=False)
    assert result.metrics.recovery_success is None
    assert expectation_status(result.scenario, result.metrics) == {"recovery_success": "n/a",
                                                                    "tasks_completed": "met"}
    assert result.ok
    written = json.loads((tmp_path / "out" / "metrics.json").read_text())["expectations"]
    assert written == {"recovery_success": None, "tasks_completed": True}  # the run's own report agrees
    assert "- recovery_success: n/a" in (tmp_path / "out" / "report.md").read_text()


# -- runs ---------------------------------------------------------------------------------------------------

def test_grid_of_two_by_three_with_three_seeds_is_eighteen_runs_with_intervals(tmp_path: Path,
                                                                                sim_settings: Settings) -> None:
    batch = sweep(write(tmp_path, "grid.yaml", SMALL),
                  ["agents.0.params.steps_per_wake=1,2", "world.tasks.0.steps=2,3,4"], tmp_path / "out",
                  seeds=3, settings=sim_settings, run_plots=False)
    assert len(batch.runs) == 18 and len(batch.variants) == 6 and batch.seeds == (1, 2, 3)
    assert [v.variant.point for v in batch.variants][:2] == [
        (("agents.0.params.steps_per_wake", 1), ("world.tasks.0.steps", 2)),
        (("agents.0.params.steps_per_wake", 1), ("world.tasks.0.steps", 3))]
    assert all(v.seeds == (1, 2, 3) for v in batch.variants)
    # the seeds move the jittered wakes: the context shown varies, and has a real interval
    first = batch.variants[0].summaries["context_cost_bytes"]
    values = [r.result.metrics.context_cost_bytes for r in batch.runs[:3]]
    assert first.n == 3 and first.mean == pytest.approx(sum(values) / 3)
    assert first.ci_low is not None and first.ci_high is not None and first.ci_low < first.mean < first.ci_high
    table = (tmp_path / "out" / "sweep.md").read_text()
    assert "x 3 seeds (1, 2, 3) = 18 runs" in table and " ± " in table
    assert "| context_cost_bytes |" in table
    assert (tmp_path / "out" / "sweep.png").stat().st_size > 5000
    tidy = (tmp_path / "out" / "sweep_runs.csv").read_text().splitlines()
    assert len(tidy) == 19 and tidy[0].startswith("variant,agents.0.params.steps_per_wake,world.tasks.0.steps,seed,")
    assert (tmp_path / "out" / "agents.0.params.steps_per_wake=2,world.tasks.0.steps=4" / "seed=3"
            / "metrics.json").is_file()
    frame = batch.to_frame()
    assert frame.shape[0] == 18 and frame["continuation_fidelity"].isna().all()  # n/a is NaN, not 0


def test_jobs_one_and_two_write_byte_identical_metrics(tmp_path: Path, sim_settings: Settings) -> None:
    """The same sweep in this process and through ``pmw simulate --jobs 2`` (two worker processes; the figures
    of both runs differ, so a swapped result would show)."""
    path = write(tmp_path, "grid.yaml", SMALL)
    specs = ["world.tasks.0.steps=2,3"]
    sweep(path, specs, tmp_path / "one", jobs=1, settings=sim_settings, plots=False)
    env = {**os.environ, "PMW_PDP_ADDRESS": str(sim_settings.pdp_address),
           "PMW_PDP_ADMIN_USER": str(sim_settings.pdp_admin_user),
           "PMW_PDP_ADMIN_PASSWORD": str(sim_settings.pdp_admin_password), "CERBOS_NO_TELEMETRY": "1"}
    done = subprocess.run([sys.executable, "-m", "engine.cli", "simulate", str(path), "--out", str(tmp_path / "two"),
                           "--sweep", specs[0], "--jobs", "2"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    one = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one").rglob("metrics.json"))
    two = sorted(p.relative_to(tmp_path / "two") for p in (tmp_path / "two").rglob("metrics.json"))
    assert len(one) == 2 and one == two
    for rel in one:
        assert (tmp_path / "one" / rel).read_bytes() == (tmp_path / "two" / rel).read_bytes(), rel
    assert json.loads((tmp_path / "one" / "sweep.json").read_text())["variants"] == \
        json.loads((tmp_path / "two" / "sweep.json").read_text())["variants"]


def test_outage_sweep_shows_the_refused_runs_in_table_and_plot(tmp_path: Path, sim_settings: Settings) -> None:
    """The effect of a longer outage lives in the PDP counts: the default selection (every figure that varies)
    puts them in the table and the plot."""
    batch = sweep(write(tmp_path, "outage.yaml", OUTAGE), "timeline.1.duration_s=2,30", tmp_path / "out",
                  settings=sim_settings, run_plots=False)
    refused = [r.result.metrics.counts["runs_refused_by_pdp_outage"] for r in batch.runs]
    assert refused[0] < refused[1]
    assert "runs_refused_by_pdp_outage" in batch.shown
    table = (tmp_path / "out" / "sweep.md").read_text()
    assert f"| runs_refused_by_pdp_outage | {refused[0]} | {refused[1]} | +{refused[1] - refused[0]} |" in table
    assert "runs_refused_by_pdp_outage" in json.loads((tmp_path / "out" / "sweep.json").read_text())["plotted"]
    assert "<td>runs_refused_by_pdp_outage</td>" in (tmp_path / "out" / "sweep.html").read_text()
