"""The same scenario file and seed give the same metrics.json and the same event log."""

from __future__ import annotations

from pathlib import Path

from engine.settings import Settings
from simulations.run import simulate_file
from tests.simulations.conftest import SCENARIOS


def test_same_file_and_seed_give_identical_metrics_and_event_log(tmp_path: Path, sim_settings: Settings) -> None:
    for run in ("one", "two"):
        simulate_file(SCENARIOS / "flagship.yaml", tmp_path / run, settings=sim_settings, plots=False)
    for name in ("metrics.json", "events.jsonl", "timeseries.csv", "report.md"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
    assert len((tmp_path / "one" / "events.jsonl").read_text().splitlines()) > 100


def test_another_seed_gives_another_event_log(tmp_path: Path, sim_settings: Settings) -> None:
    simulate_file(SCENARIOS / "duplicate_wake.yaml", tmp_path / "a", settings=sim_settings, plots=False)
    simulate_file(SCENARIOS / "duplicate_wake.yaml", tmp_path / "b", seed=5, settings=sim_settings, plots=False)
    assert (tmp_path / "a" / "events.jsonl").read_text() != (tmp_path / "b" / "events.jsonl").read_text()
