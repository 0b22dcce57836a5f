"""Generated scenarios: valid, the same for the same seed, O(agents) lines whatever the number of events,
and a small one runs with every wake receipted once."""

from __future__ import annotations

from pathlib import Path

from engine.settings import Settings
from simulations.generator import dump, main, sleep_wake, workload
from simulations.run import run_scenario_file
from simulations.scenario import WakeEntry, parse_scenario


def test_workload_is_valid_deterministic_and_compact() -> None:
    small, big = workload(50, 500, seed=3), workload(50, 100_000, seed=3)
    assert dump(small) == dump(workload(50, 500, seed=3)) != dump(workload(50, 500, seed=4))
    s = parse_scenario(dump(big))
    assert len(s.agents) == 50 and len(s.world.tasks) == 50
    assert sum(e.count for e in s.timeline if isinstance(e, WakeEntry)) == 100_000
    assert len(s.timeline) == 50                              # one repeated entry per agent
    assert [sub.agent for sub in s.world.subscriptions] == ["a00010", "a00020", "a00030", "a00040"]
    assert all(e.at + (e.count - 1) * (e.every_s or 0) + e.jitter_s <= s.stop.at_s for e in s.timeline
               if isinstance(e, WakeEntry))


def test_sleep_wake_at_a_hundred_tasks_is_valid(tmp_path: Path) -> None:
    assert main(["sleep-wake", "--tasks", "100", "--out", str(tmp_path / "sw.yaml")]) == 0
    s = parse_scenario((tmp_path / "sw.yaml").read_text())
    assert len(s.world.tasks) == 100 and len(s.agents) == 50
    assert sum(e.kind == "conversation_replacement" for e in s.timeline) == 25
    assert s.expect["tasks_completed"] == 100 and dump(sleep_wake(100)) == (tmp_path / "sw.yaml").read_text()


def test_a_small_generated_workload_runs_clean(tmp_path: Path, sim_settings: Settings) -> None:
    s = parse_scenario(dump(workload(12, 36, seed=5)))
    m = run_scenario_file(s, tmp_path, settings=sim_settings, plots=False).metrics
    assert m.counts["wakes"] >= 36 and m.counts["receipts"] == m.counts["wakes"]
    assert m.counts["acted"] == 36 and m.task_quality == 1.0  # 3 steps each, one per scheduled wake
    assert m.checks == dict.fromkeys(m.checks, True)
