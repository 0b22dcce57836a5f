"""The scale benchmark's CI-sized variant (``benchmarks/simulation_scale.py``): every phase is timed, the
play's self time is split by area and adds up, and the run it measured is a sound one."""

from __future__ import annotations

import pytest

from benchmarks.simulation_scale import AREAS, OTHER, area_of, measure, report
from engine.settings import Settings


def test_the_scale_benchmark_times_every_phase_and_splits_the_play_by_area(sim_settings: Settings) -> None:
    result = measure(agents=6, wakes=12, seed=3, settings=sim_settings)
    assert result["events"] > 12 and result["runs"] >= 12 and result["checks_hold"]
    for phase in ("setup_s", "play_s", "metrics_s", "report_s"):
        assert result[phase] > 0
    by_area = result["play_by_area_s"]
    assert set(by_area) <= {a for a, _ in AREAS} | {OTHER}
    assert sum(by_area.values()) == pytest.approx(result["play_s"], rel=0.5)  # self times cover the play
    text = report(result)
    assert "| play |" in text and "where the play's self time goes" in text


def test_areas_are_named_by_the_first_matching_path() -> None:
    assert area_of("/work/main/simulations/driver.py", "play").startswith("simulator")
    assert area_of("/x/engine/world/projection.py", "project_world").startswith("projection")
    assert area_of("/x/engine/world/core.py", "_write").startswith("world commands")
    assert area_of("~", "<method 'execute' of 'sqlite3.Cursor' objects>").startswith("store")
    assert area_of("/usr/lib/python3.11/os.py", "stat") == OTHER
