"""Sweeps and comparisons each produce a table and a plot."""

from __future__ import annotations

from pathlib import Path

from engine.settings import Settings
from simulations.run import compare, sweep
from tests.simulations.conftest import SCENARIOS


def test_sweep_of_deliveries_gives_one_wake_at_each_value(tmp_path: Path, sim_settings: Settings) -> None:
    results = sweep(SCENARIOS / "duplicate_wake.yaml", "timeline.0.deliveries=1,2,5,10", tmp_path,
                    settings=sim_settings)
    assert [v for v, _ in results] == [1, 2, 5, 10]
    assert [r.metrics.counts["deliveries"] for _, r in results] == [1, 2, 5, 10]
    assert all(r.metrics.counts["wakes"] == 1 and r.metrics.counts["state_writes"] == 1 for _, r in results)
    table = (tmp_path / "sweep.md").read_text()
    assert "timeline.0.deliveries=10" in table and "| wakes | 1 | 1 | 1 | 1 |" in table
    assert (tmp_path / "sweep.png").stat().st_size > 5000
    assert (tmp_path / "sweep.csv").read_text().startswith("figure,")


def test_compare_writes_a_table_and_a_plot(tmp_path: Path, sim_settings: Settings) -> None:
    a, b = compare(SCENARIOS / "model_replacement.yaml", SCENARIOS / "conversation_replacement.yaml", tmp_path,
                   settings=sim_settings)
    assert a.scenario.name == "model-replacement" and b.scenario.name == "conversation-replacement"
    table = (tmp_path / "compare.md").read_text()
    assert "| figure | model-replacement | conversation-replacement |" in table
    assert "| task_quality | 1 | 1 |" in table
    assert (tmp_path / "compare.png").stat().st_size > 5000
