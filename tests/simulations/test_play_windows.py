"""The play's windows (``benchmarks/play_windows.py``): each window counts the events written in it and the
wall time it played, probes the decided write at its end without counting the probe as play, and the growth
compares late windows to early ones in each window's own decided writes."""

from __future__ import annotations

import pytest

from benchmarks.play_windows import PlayWindows, Window, growth
from benchmarks.simulation_scale import measure, report
from engine.settings import Settings


class Ticks:
    """A wall clock the test moves: the play's steps and each probe write take the time the test says."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_window_closes_after_its_length_and_its_probe_is_not_play() -> None:
    clock, log = Ticks(), [0]

    def probe() -> None:
        clock.now += 0.5  # every probe write takes half a second

    windows = PlayWindows(lambda: log[0], probe, window_s=10.0, probe_writes=2, clock=clock)
    windows.start()  # opens the first window at t=0
    for step in range(1, 4):  # 3 steps of 4 s, 100 events each: closes once, at t=12
        clock.now += 4.0
        log[0] += 100
        windows(step / 10)
    assert len(windows.windows) == 1
    first = windows.windows[0]
    assert (first.events, first.play_s, first.write_s) == (300, 12.0, 0.5)
    assert windows.probe_s == 1.0
    clock.now += 3.0
    log[0] += 30
    windows.close()  # the play's end: a last, shorter window
    last = windows.windows[1]
    # the probes' second is not play: the last window ends 15 s into the play
    assert (last.events, last.play_s, windows.as_dicts()[1]["end_s"]) == (30, 3.0, 15.0)
    assert last.per_event_ms == pytest.approx(100.0)
    assert last.per_event_in_writes == pytest.approx(0.2)


def test_growth_is_measured_in_each_windows_own_writes() -> None:
    # the machine slows 2x late in the play: raw cost doubles, the cost in that window's writes does not
    early = [Window(100, 1.0, 0.001) for _ in range(4)]
    late = [Window(100, 2.0, 0.002) for _ in range(4)]
    g = growth([Window(10, 5.0, 0.001), *early, *late], skip=1, share=0.25)
    assert g is not None
    assert g["raw"] == pytest.approx(2.0) and g["in_writes"] == pytest.approx(1.0)
    assert g["write_drift"] == pytest.approx(2.0)
    # a cost that does grow with history shows in writes too
    grown = [Window(100, 3.0, 0.001) for _ in range(4)]
    g2 = growth([*early, *grown], skip=0, share=0.5)
    assert g2 is not None and g2["in_writes"] == pytest.approx(3.0)


def test_growth_needs_two_windows_that_wrote_events() -> None:
    assert growth([Window(100, 1.0, 0.001)], skip=0) is None
    assert growth([Window(100, 1.0, 0.001), Window(0, 1.0, 0.001)], skip=0) is None


def test_bad_windows_are_refused() -> None:
    with pytest.raises(ValueError, match="positive length"):
        PlayWindows(lambda: 0, lambda: None, window_s=0)
    with pytest.raises(ValueError, match="one probe write"):
        PlayWindows(lambda: 0, lambda: None, probe_writes=0)


def test_the_scale_benchmark_reports_its_windows(sim_settings: Settings) -> None:
    result = measure(agents=6, wakes=12, seed=3, settings=sim_settings, profile=False, window_s=1e-6,
                     probe_writes=2)
    assert result["checks_hold"]
    windows = result["windows"]
    assert windows and all(w["write_s"] > 0 for w in windows)
    assert sum(w["events"] for w in windows) <= result["events"]  # the setup's events are not in a window
    assert result["probe_s"] > 0 and result["play_s"] > 0
    assert "| window ends (s) |" in report(result)


def test_without_a_start_the_first_progress_call_opens_the_window() -> None:
    clock, log = Ticks(), [0]
    windows = PlayWindows(lambda: log[0], lambda: None, window_s=1.0, probe_writes=1, clock=clock)
    log[0] = 50  # written before the window opened: not counted
    windows(0.0)
    clock.now, log[0] = 2.0, 70
    windows(0.5)
    assert [(w.events, w.play_s) for w in windows.windows] == [(20, 2.0)]
