"""Running the world: the controller follower and a worker, in one process.

:class:`InProcessRunner` is what tests, simulations and ``pmw worker`` use. One *round* lets the controller
observe every new event (committing its steps: wakes, suppressions, topology) and then lets the worker run
every wake that is due. A run is *quiet* when a round finds no new event and no due wake at the current
time. Time is the world's clock: with a :class:`~engine.sources.ManualClock` (tests, simulations) nothing
moves unless the caller advances it, or asks :meth:`run_until_quiet` to jump to the next due time.

:meth:`serve` is the long-running form: rounds until stopped, sleeping on :class:`CommitSignal` (an
in-process signal; ``LISTEN/NOTIFY`` on PostgreSQL) with a bounded fallback poll in between.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine.controller.durable_host import RuleSet
from engine.errors import PolicyEpochChanged, PolicyUnavailable, WakeLeaseLost
from engine.models.wakes import Wake
from engine.protocol.adapters import AgentAdapter
from engine.protocol.worker import Cycle, EpochMoved, SimulatedCrash
from engine.runloop.follower import ControllerLoop, DrainStats, ensure_controller_agent
from engine.runloop.signals import DEFAULT_POLL_S, CommitSignal
from engine.runloop.wake_depth import DepthThresholds
from engine.runloop.worker import EnvelopeWorker
from engine.sources import ManualClock
from engine.world.book import RuntimeBook

DEFAULT_RULES = Path(__file__).resolve().parents[2] / "rules"


@dataclass
class RunStats(DrainStats):
    """What a run did, summed over its rounds: the controller's figures (:class:`DrainStats`) and the
    worker's. ``add`` sums a drain's or another run's figures into this one."""

    rounds: int = 0
    cycles: int = 0
    crashes: int = 0
    unavailable: int = 0
    epoch_changes: int = 0  # writes found decided under an epoch no longer current: the PDP followed the world
    fenced: int = 0  # cycles refused because the wake's claim no longer held (WakeLeaseLost): nothing written
    rooms_closed: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)

    def add_cycle(self, c: Cycle) -> None:
        self.cycles += 1
        self.outcomes[c.receipt.outcome.value] += 1


class InProcessRunner:
    """The controller of ``world_id`` (rules from ``rule_dir``) and one worker with ``adapters``."""

    def __init__(self, book: RuntimeBook, *, adapters: dict[str, AgentAdapter], rule_dir: Path | str = DEFAULT_RULES,
                 governor: str = "gov", worker_id: str = "worker-1", world_id: str = "main",
                 lease_seconds: float = 30.0, controller: bool = True,
                 follow_policy: Callable[[], object] | None = None,
                 wake_thresholds: DepthThresholds | None = None) -> None:
        """``follow_policy``: brings this process's PDP to the world's current epoch when a write finds it
        moved (another process reloaded the policy; :meth:`engine.runtime.Runtime.follow_policy`). Without
        it, such a write's ``PolicyEpochChanged`` ends the run. ``wake_thresholds``: the layered wake's
        classifier (default: ``DepthThresholds()``). The worker honours decision envelopes
        (:mod:`engine.runloop.worker`)."""
        self.book = book
        self.follow_policy = follow_policy
        self.world = book.world
        self.governor = governor
        self.loop = ControllerLoop(book, rule_dir, world_id=world_id) if controller else None
        self.worker = EnvelopeWorker(book, worker_id, adapters, lease_seconds=lease_seconds,
                                     thresholds=wake_thresholds)
        self._signal: CommitSignal | None = None

    @property
    def adapters(self) -> dict[str, AgentAdapter]:
        """The worker's adapters by agent id; replace one to swap an agent's model mid-task."""
        return self.worker.adapters

    def start(self) -> None:
        """Register the controller's agent if needed, then rebuild the controller from SQL."""
        if self.loop is not None:
            self.loop.load()  # a bad rule directory fails before anything is written
            ensure_controller_agent(self.book, self.governor)
            self.loop.start()

    def reload_rules(self, rule_dir: Path | str | None = None) -> RuleSet:
        if self.loop is None:
            raise RuntimeError("this runner has no controller")
        return self.loop.reload_rules(rule_dir)

    def crash_worker_mid_cycle(self, times: int = 1) -> None:
        """The next ``times`` wakes that act are abandoned after their effects, before the ack: the wake
        stays leased until its lease expires, then it is re-run from its recorded decision."""
        self.worker.crash_before_ack += times

    # -- running ----------------------------------------------------------------------------------------------

    def round(self, stats: RunStats, *, max_cycles: int = 1000) -> bool:
        """One round; True if it did anything."""
        stats.rounds += 1
        did = False
        if self.loop is not None:
            try:
                drained = self.loop.drain()
            except PolicyEpochChanged as exc:  # a follow-up decided under a stale epoch: observed again
                self._follow(exc, stats)
                return True
            stats.add(drained)
            did = drained.events > 0
            try:  # zombie rooms: closed by their stop condition (the controller may close what it opened)
                stats.rooms_closed += len(self.world.close_stale_rooms(self.loop.actor))
            except PolicyUnavailable:
                stats.unavailable += 1
                return did
            except PolicyEpochChanged as exc:
                self._follow(exc, stats)
                return True
        for _ in range(max_cycles):
            try:
                cycle = self._cycle(stats)
            except SimulatedCrash:
                stats.crashes += 1
                did = True
                continue
            except WakeLeaseLost:
                stats.fenced += 1  # our lease ran out mid-cycle: the wake is another claim's now (it runs once)
                did = True
                continue
            except PolicyUnavailable:
                stats.unavailable += 1  # fail closed: the wake stays leased; nothing more can be decided now
                return did
            if cycle is None:
                break
            stats.add_cycle(cycle)
            did = True
        return did

    def _follow(self, moved: PolicyEpochChanged, stats: RunStats) -> None:
        """The world's epoch moved under this process: bring the PDP to it (or end the run, without a way to)."""
        stats.epoch_changes += 1
        if self.follow_policy is None:
            raise moved
        self.follow_policy()

    def _cycle(self, stats: RunStats, attempts: int = 3) -> Cycle | None:
        """The worker's next cycle. A write decided under an epoch that moved is decided again once the PDP
        follows the world: a claim is simply made again; a wake this worker holds is run again (bounded: an
        epoch that keeps moving leaves the wake leased, to be claimed again when its lease ends)."""
        held: Wake | None = None
        for _ in range(attempts):
            try:
                return self.worker.run_wake(held) if held is not None else self.worker.run_once()
            except EpochMoved as moved:
                self._follow(moved.cause, stats)
                held = moved.wake or held
        return None

    def run_until_quiet(self, max_rounds: int = 10_000, *, advance_clock: bool = False,
                        horizon_us: int | None = None) -> RunStats:
        """Rounds until a round does nothing (at most ``max_rounds``). With ``advance_clock`` (a
        :class:`ManualClock` only) a quiet world jumps to the next time a wake falls due (a deferred wake,
        an expired lease), up to ``horizon_us``, and goes on."""
        stats = RunStats()
        for _ in range(max_rounds):
            if self.round(stats):
                continue
            if not (advance_clock and self._advance(horizon_us)):
                break
        return stats

    def _advance(self, horizon_us: int | None) -> bool:
        clock = self.world.clock
        if not isinstance(clock, ManualClock):
            raise TypeError("advance_clock needs the world's clock to be a ManualClock")
        now = clock.now_us()
        due = self.next_due_us()
        if due is None or due <= now or (horizon_us is not None and due > horizon_us):
            return False
        clock.advance((due - now) / 1_000_000)
        return True

    def next_due_us(self) -> int | None:
        """The next time a wake falls due: a pending wake's not-before, or a leased wake's lease end (+1 µs)."""
        return self.book.store.read.next_wake_due_us()

    def serve(self, stop: threading.Event, *, poll_s: float = DEFAULT_POLL_S, max_rounds: int | None = None,
              until_idle: bool = False) -> RunStats:
        """Run rounds until ``stop`` is set (or ``max_rounds``; or, with ``until_idle``, the first quiet
        round), sleeping on commits between quiet rounds, never longer than ``poll_s``."""
        stats = RunStats()
        signal = self._signal or CommitSignal(self.book.store)
        self._signal = signal
        limit = max_rounds if max_rounds is not None else 1 << 62
        for _ in range(limit):
            if stop.is_set():
                break
            if self.round(stats):
                continue
            if until_idle:
                break
            signal.wait(poll_s)
        return stats

    def close(self) -> None:
        if self._signal is not None:
            self._signal.close()
            self._signal = None
        if self.loop is not None:
            self.loop.close()


__all__ = ["DEFAULT_RULES", "InProcessRunner", "RunStats"]
