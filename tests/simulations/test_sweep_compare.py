"""Sweeps and comparisons each produce a table, a plot and an HTML report; results are typed."""

from __future__ import annotations

import json
from pathlib import Path

from engine.settings import Settings
from simulations.results import CompareResult, SweepResult
from simulations.run import compare, sweep
from tests.simulations.conftest import SCENARIOS


def test_sweep_of_deliveries_gives_one_wake_at_each_value(tmp_path: Path, sim_settings: Settings) -> None:
    result = sweep(str(SCENARIOS / "duplicate_wake.yaml"), "timeline.0.deliveries=1,2,5,10", str(tmp_path),
                   settings=sim_settings, run_plots=False)
    assert isinstance(result, SweepResult)
    assert [v.variant.value("timeline.0.deliveries") for v in result.variants] == [1, 2, 5, 10]
    assert [r.result.metrics.counts["deliveries"] for r in result.runs] == [1, 2, 5, 10]
    assert all(r.result.metrics.counts["wakes"] == 1 and r.result.metrics.counts["state_writes"] == 1
               for r in result.runs)
    table = (tmp_path / "sweep.md").read_text()
    # only what varies is a row; what every run shares is listed once below the table
    assert "| deliveries | 1 | 2 | 5 | 10 | +9 |" in table
    assert "Same in every run:" in table and "wakes = 1," in table and "| wakes |" not in table
    assert result.shown == ("deliveries",) and result.constant["wakes"] == 1
    assert (tmp_path / "sweep.png").stat().st_size > 5000
    assert (tmp_path / "sweep.csv").read_text().startswith("variant,timeline.0.deliveries,figure,")
    assert "delta (last - first)" in (tmp_path / "sweep.html").read_text()
    assert (tmp_path / "timeline.0.deliveries=10" / "metrics.json").is_file()


def test_compare_writes_a_table_with_a_delta_and_a_plot(tmp_path: Path, sim_settings: Settings) -> None:
    pair = compare(SCENARIOS / "event_driven.yaml", str(SCENARIOS / "polling.yaml"), tmp_path,
                   settings=sim_settings, run_plots=False)
    assert isinstance(pair, CompareResult)
    a, b = pair
    assert a.scenario.name == "event-driven" and b.scenario.name == "polling"
    table = (tmp_path / "compare.md").read_text()
    assert "| figure | event-driven | polling | delta (last - first) |" in table
    assert "| wake_efficiency | 1 | 0.4 | -0.6 |" in table
    assert "task_quality = 1" in table  # the same in both: listed once, below the table
    body = json.loads((tmp_path / "compare.json").read_text())
    assert set(body["delta"]) == set(pair.shown) and body["plotted"] == list(pair.shown)[:24]
    for name in pair.shown:
        ma, mb = a.figures[name], b.figures[name]
        assert pair.delta(name).value == (None if ma is None or mb is None else round(mb - ma, 9))
    assert (tmp_path / "compare.png").stat().st_size > 5000
    assert "<th>delta (last - first)</th>" in (tmp_path / "compare.html").read_text()
