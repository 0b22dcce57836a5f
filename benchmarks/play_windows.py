"""Windows of a long play, each measured against a baseline taken inside it: does a cost grow with history?

A baseline timed once before a long run and once after it cannot tell a cost that grows with the world from
a machine whose speed drifts (on shared hosts it does: a decided write measured 2.95 ms before a 13,500-wake
play and 1.67 ms after it, on the same code, at a load average near 0). :class:`PlayWindows` is the driver's
progress callback: every ``window_s`` of wall time it closes a window (log events written, wall time spent)
and times ``probe_writes`` decided writes on a world of its own (:func:`benchmarks.simulation_bench.baseline_write_s`'s
kind of write, on a book kept open). Each window's cost per event is then also given in decided writes *of
that window*, and :func:`growth` compares the late windows to the early ones on that ratio. The probes' own
time is kept apart (``probe_s``), so a caller can take it out of the play's wall time.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Window:
    """One closed window: the log events written in it, the wall time it spent playing (probes excluded),
    and the decided write timed at its end."""

    events: int
    play_s: float
    write_s: float

    @property
    def per_event_ms(self) -> float:
        return 1000 * self.play_s / max(1, self.events)

    @property
    def per_event_in_writes(self) -> float:
        return self.play_s / max(1, self.events) / self.write_s


@dataclass
class PlayWindows:
    """A progress callback (``ScenarioDriver(progress=...)``) that closes a window every ``window_s``.

    ``log_position`` reads how many events the world's log holds; ``probe`` performs one decided write on a
    world of its own (never the simulated one: the probe must not change what the play does)."""

    log_position: Callable[[], int]
    probe: Callable[[], None]
    window_s: float = 60.0
    probe_writes: int = 30
    clock: Callable[[], float] = time.perf_counter
    windows: list[Window] = field(default_factory=list)
    probe_s: float = 0.0
    _opened: float | None = None
    _events_at_open: int = 0

    def __post_init__(self) -> None:
        if self.window_s <= 0 or self.probe_writes < 1:
            raise ValueError("a window needs a positive length and at least one probe write")

    def start(self) -> None:
        """Open the first window (call it as the play begins; otherwise the first progress call opens it)."""
        self._open(self.clock())

    def __call__(self, _fraction: float) -> None:
        now = self.clock()
        if self._opened is None:
            self._open(now)
            return
        if now - self._opened >= self.window_s:
            self.close(now)

    def close(self, now: float | None = None) -> None:
        """Close the open window (at the play's end too: a last, shorter window), probe, open the next."""
        now = self.clock() if now is None else now
        if self._opened is None:
            return
        played = now - self._opened
        events = self.log_position() - self._events_at_open
        t0 = self.clock()
        for _ in range(self.probe_writes):
            self.probe()
        spent = self.clock() - t0
        self.probe_s += spent
        self.windows.append(Window(events, played, spent / self.probe_writes))
        self._open(self.clock())

    def _open(self, now: float) -> None:
        self._opened = now
        self._events_at_open = self.log_position()

    def as_dicts(self) -> list[dict[str, Any]]:
        """Each window with its end (seconds into the play, probes excluded) and its costs per event."""
        ends = itertools.accumulate(w.play_s for w in self.windows)
        return [{**asdict(w), "end_s": round(end, 3), "per_event_ms": w.per_event_ms,
                 "per_event_in_writes": w.per_event_in_writes} for w, end in zip(self.windows, ends, strict=True)]


def growth(windows: list[Window], *, skip: int = 1, share: float = 0.25) -> dict[str, float] | None:
    """The cost per event of the late windows against the early ones, raw (ms) and in each window's own
    decided writes: the median of the last ``share`` of the windows over the median of the first ``share``,
    after ``skip`` warm-up windows (cold plans and first reads), counting only windows that wrote events.
    ``None`` when fewer than two such windows remain."""
    kept = [w for w in windows[skip:] if w.events > 0]
    if len(kept) < 2:
        return None
    n = max(1, round(len(kept) * share))
    early, late = kept[:n], kept[-n:]

    def ratio(value: Callable[[Window], float]) -> float:
        return statistics.median(value(w) for w in late) / statistics.median(value(w) for w in early)

    return {"windows": float(len(kept)), "compared": float(n),
            "raw": ratio(lambda w: w.per_event_ms), "in_writes": ratio(lambda w: w.per_event_in_writes),
            "write_drift": ratio(lambda w: w.write_s)}
