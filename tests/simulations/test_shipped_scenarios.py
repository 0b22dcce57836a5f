"""Every shipped scenario runs at its small size and gives the figures the seeds expect."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.settings import Settings
from simulations.run import Result, simulate_file
from tests.simulations.conftest import SCENARIOS

SHIPPED = sorted(p.name for p in SCENARIOS.glob("*.yaml"))


def run(name: str, tmp_path: Path, settings: Settings, *, plots: bool = False) -> Result:
    return simulate_file(SCENARIOS / name, tmp_path / name, settings=settings, plots=plots)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenario_meets_its_expectations(name: str, tmp_path: Path, sim_settings: Settings) -> None:
    result = run(name, tmp_path, sim_settings)
    assert result.scenario.expect, f"{name} states no expectation"
    assert result.expectations == dict.fromkeys(result.scenario.expect, True)
    assert result.metrics.checks == dict.fromkeys(result.metrics.checks, True)
    assert result.metrics.unauthorized_action_rate == 0.0
    assert result.metrics.counts["wakes_with_two_receipts"] == 0


def test_flagship_isolates_shares_joins_resolves_and_leaves(tmp_path: Path, sim_settings: Settings) -> None:
    result = run("flagship.yaml", tmp_path, sim_settings, plots=True)
    m = result.metrics
    assert m.task_quality == 1.0
    assert m.counts["conflicts_opened"] == 1 and m.counts["conflicts_resolved"] == 1
    assert m.coordination_latency_s is not None and m.coordination_latency_s > 0
    assert m.checks["blind_answers_hidden_until_all_committed"]
    kinds = [line.split('"event_type":"')[1].split('"')[0] for line in
             (tmp_path / "flagship.yaml" / "events.jsonl").read_text().splitlines()]
    shared, opened, closed = kinds.index("topology.changed"), kinds.index("room.opened"), kinds.index("room.closed")
    assert shared < kinds.index("claim.contested") < opened < kinds.index("room.answered") < closed
    for png in ("topology", "wakes", "conflicts", "duplicates"):
        assert (tmp_path / "flagship.yaml" / f"{png}.png").stat().st_size > 5000
    assert "topology.png" in (tmp_path / "flagship.yaml" / "report.html").read_text()


def test_duplicate_wake_at_ten_deliveries_gives_one_wake_and_one_effect(tmp_path: Path,
                                                                         sim_settings: Settings) -> None:
    m = run("duplicate_wake.yaml", tmp_path, sim_settings).metrics
    assert m.counts["deliveries"] == 10
    assert m.counts["wakes"] == 1 and m.counts["receipts"] == 1
    assert m.counts["state_writes"] == 1 and m.duplicate_side_effect_rate == 0.0


def test_wake_storm_is_suppressed_within_depth(tmp_path: Path, sim_settings: Settings) -> None:
    m = run("wake_storm.yaml", tmp_path, sim_settings).metrics
    assert m.counts["suppressed_depth"] >= 1
    assert m.counts["wakes"] == 3  # depths 0, 1, 2 of A -> B -> C; the hop back to A is suppressed


def test_crashed_wake_is_rerun_once_without_repeating_its_effects(tmp_path: Path, sim_settings: Settings) -> None:
    m = run("crash_recovery.yaml", tmp_path, sim_settings).metrics
    assert m.counts["wakes_run_twice"] == 1
    assert m.counts["receipts"] == m.counts["wakes"]
    assert m.counts["state_writes"] == 2  # two steps, each written once although one wake ran twice
    assert m.recovery_success == 1.0
