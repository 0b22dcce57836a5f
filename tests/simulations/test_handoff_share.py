"""H2's knob: what a handoff's receiver is shown splits into the representation's own share
(``handoff_packet_bytes``) and the projection's (``handoff_projection_bytes``), so representations are
compared on what differs between them rather than drowned in the projection they share."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.settings import Settings
from simulations.run import run_scenario_file
from simulations.scenario import load_scenario
from tests.simulations.conftest import SCENARIOS


def shares(tmp: Path, settings: Settings, representation: str, after_steps: int) -> dict[str, int]:
    scenario = load_scenario(SCENARIOS / "handoff.yaml", {  # handoff.yaml, shortened: 6 steps
        "agents.0.params.handoff.representation": representation, "agents.0.params.handoff.after_steps": after_steps,
        "world.tasks.0.steps": 6, "timeline.0.count": 5, "timeline.1.count": 3, "stop.all_tasks_done": True})
    result = run_scenario_file(scenario, tmp / f"{representation}-{after_steps}", settings=settings, plots=False)
    assert result.metrics.task_quality == 1
    return result.metrics.counts


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, sim_settings: Settings) -> dict[tuple[str, int], dict[str, int]]:
    tmp = tmp_path_factory.mktemp("h2")
    return {(r, n): shares(tmp, sim_settings, r, n) for r, n in (("transcript", 1), ("transcript", 5),
                                                                   ("pointers", 5))}


def test_the_receivers_view_is_the_packet_plus_the_projection(runs: dict[tuple[str, int], dict[str, int]]) -> None:
    for counts in runs.values():
        assert counts["handoffs"] == 1
        assert counts["handoff_receiver_context_bytes"] == counts["handoff_packet_bytes"] + \
            counts["handoff_projection_bytes"]
        assert counts["handoff_projection_bytes"] > counts["handoff_packet_bytes"]  # the share that hid H2


def test_a_transcript_packet_grows_with_history_and_pointers_stay_small(
        runs: dict[tuple[str, int], dict[str, int]]) -> None:
    short, long, pointers = runs[("transcript", 1)], runs[("transcript", 5)], runs[("pointers", 5)]
    assert long["handoff_packet_bytes"] > 2 * short["handoff_packet_bytes"]
    assert pointers["handoff_packet_bytes"] * 4 < long["handoff_packet_bytes"]
    # ... while the projection's share is the same whatever the representation (within 2 %)
    assert abs(long["handoff_projection_bytes"] - pointers["handoff_projection_bytes"]) <= \
        0.02 * pointers["handoff_projection_bytes"]
