"""The shipped studies (seed 001 H2-H4, and h5: layered wake; H1 through the CLI in test_simulate_cli.py) run
in their CI-sized variant and their reports state the measured answer; a bad study file fails at load with file:line."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from engine.settings import Settings
from simulations.errors import ScenarioError
from simulations.study import StudyResult, load_study, run_study

STUDIES = Path(__file__).resolve().parents[2] / "simulations" / "studies"


def run_ci(name: str, tmp_path: Path, settings: Settings) -> StudyResult:
    result = run_study(str(STUDIES / name), tmp_path / name, ci=True, settings=settings)
    page = (tmp_path / name / "study.html").read_text()
    answers = json.loads((tmp_path / name / "answer.json").read_text())["answers"]
    assert [a["verdict"] for a in answers] == [j.verdict for j in result.judgements]
    for j in result.judgements:
        assert f"Answer ({j.verdict}): " in (tmp_path / name / "study.md").read_text()
        assert html.escape(j.text) in page
    assert (tmp_path / name / "study.png").stat().st_size > 5000
    return result


def test_h2_pointer_handoff_costs_less_and_the_gap_grows_with_history(tmp_path: Path, sim_settings: Settings) -> None:
    """The representation's share (the packet) is isolated from the projection's: it separates by far more than
    the whole context does, and the report says why the total barely moves."""
    result = run_ci("h2", tmp_path, sim_settings)
    assert [j.verdict for j in result.judgements] == ["supported"] * 4
    def mean(figure: str, representation: str, history: int) -> float:
        got = result.batch.variant(f"representation={representation},history={history}").mean(figure)
        assert got is not None
        return got
    packet = {h: mean("handoff_packet_bytes", "transcript", h) - mean("handoff_packet_bytes", "pointers", h)
              for h in (2, 10)}
    assert 0 < packet[2] < packet[10]  # what the verdicts rest on, read from the runs
    assert mean("handoff_projection_bytes", "transcript", 10) > 10 * mean("handoff_packet_bytes", "pointers", 10)
    relative_total = 1 - mean("context_cost_bytes", "pointers", 10) / mean("context_cost_bytes", "transcript", 10)
    relative_packet = 1 - mean("handoff_packet_bytes", "pointers", 10) / mean("handoff_packet_bytes", "transcript", 10)
    assert relative_total < 0.2 < 0.5 < relative_packet
    assert "projection dominates" in (tmp_path / "h2" / "study.md").read_text()


def test_h3_event_driven_costs_less_at_equal_quality_with_intervals(tmp_path: Path, sim_settings: Settings) -> None:
    result = run_ci("h3", tmp_path, sim_settings)
    assert [j.verdict for j in result.judgements] == ["supported", "supported", "supported"]
    polling = result.batch.variant("polling").summaries["context_cost_bytes"]
    assert polling.n == 2 and polling.ci_low is not None and polling.ci_low < polling.mean < polling.ci_high  # type: ignore[operator]
    assert "[" in result.judgements[0].text  # the interval is stated


def test_h4_quality_tracks_fidelity_more_than_the_text_shown(tmp_path: Path, sim_settings: Settings) -> None:
    result = run_ci("h4", tmp_path, sim_settings)
    correlation, pointers = result.judgements
    assert correlation.verdict in ("supported", "not separated")
    assert "r(task_quality, continuation_fidelity) = +1.000" in correlation.text
    assert "r(task_quality, handoff_packet_bytes) = +0.000" in correlation.text  # transcript or pointers alike
    key = "agents.0.params.handoff.representation"
    packets = {r.variant.value(key): r.result.metrics.counts["handoff_packet_bytes"] for r in result.batch.runs}
    assert packets["transcript"] > packets["pointers"] > 0  # the retained text did vary
    assert pointers.verdict == "supported"


def test_h5_layered_wakes_cost_less_at_equal_quality_and_an_underweighted_change_is_missed(
        tmp_path: Path, sim_settings: Settings) -> None:
    """The controller's rules weigh each wake (rules/wake_signals.yaml), the worker routes it by depth: the
    chatter is only logged, the news goes to Bo's check and stops there, his review wakes pass it, the S2
    changes always run in full; a followed key's change weighed under the floor never reaches him."""
    result = run_ci("h5", tmp_path, sim_settings)
    assert [j.verdict for j in result.judgements] == ["supported"] * 4

    def mean(variant: str, figure: str) -> float:
        got = result.batch.variant(variant).mean(figure)
        assert got is not None
        return got
    assert mean("always-full", "full_runs") == mean("always-full", "wakes")  # every wake a full run
    assert mean("always-full", "monitored_wakes") == mean("always-full", "checks_run") == 0
    # layered: Ada's 5 scenario wakes (no signals), Bo's 5 reviews (his check says yes), the 2 S2 changes
    assert mean("layered", "full_runs") == 5 + 5 + 2
    assert mean("layered", "monitored_wakes") > 0 and mean("layered", "stopped_at_check") > 0
    assert mean("layered", "checks_run") == mean("layered", "stopped_at_check") + 5
    assert mean("layered", "wakes") == mean("always-full", "wakes")  # the same wakes, routed differently
    assert (mean("layered", "task_quality"), mean("underweighted", "task_quality")) == (1.0, 0.5)


def test_a_study_naming_an_unknown_figure_fails_at_load_with_its_line(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "a.yaml").write_text((STUDIES / "h3" / "event_driven.yaml").read_text())
    (folder / "study.yaml").write_text("name: s\nhypothesis: h\nfamily:\n  - {label: a, file: a.yaml}\nclaims:\n"
                                       "  - {kind: at_least, metric: task_qualty, value: 1}\n")
    with pytest.raises(ScenarioError) as caught:
        load_study(folder)
    assert str(caught.value).startswith(f"{folder / 'study.yaml'}:6: claims.0.metric: unknown figure 'task_qualty'")


def test_a_study_axis_value_that_breaks_a_member_fails_at_load(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "a.yaml").write_text((STUDIES / "h3" / "event_driven.yaml").read_text())
    (folder / "study.yaml").write_text("name: s\nhypothesis: h\nfamily:\n  - {label: a, file: a.yaml}\n"
                                       "sweep:\n  - {name: steps, key: world.tasks.0.steps, values: [3, 0]}\n"
                                       "claims:\n  - {kind: at_least, metric: task_quality, value: 1}\n")
    with pytest.raises(ScenarioError) as caught:
        load_study(folder)
    assert "world.tasks.0.steps" in str(caught.value)
