"""The controller of a world served only while this process leads it (issue 13; ``docs/scaleout.md``).

:class:`LeaderRunner` drives a :class:`~engine.runloop.follower.ControllerLoop` built with a
:class:`~engine.controller.leadership.ControllerLeadership`. Each :meth:`LeaderRunner.round`:

1. when not leading, or when the lease is due for renewal (every ``lease_s / 3`` by the candidacy's clock),
   :meth:`~ControllerLeadership.acquire` (renews a held lease, else takes a free or expired one). A standby
   that cannot lead does nothing else;
2. on every takeover (a new generation) the controller is rebuilt from SQL: it never carries memory from a
   time it did not lead into a generation of its own;
3. drains at most ``batch`` events and closes zombie rooms, every write inside the lease's fence. A write
   refused with ``NotLeader`` (the lease was lost: paused or cut off past it) ends leadership at once:
   nothing of it was written, and the next round stands by. No answer from the PDP
   (``PolicyUnavailable``) fails closed: counted, the lease kept, tried again next round.

:func:`serve_while_leader` runs rounds until stopped (the entry point for ``pmw serve --role controller``):
standing by, it polls every ``lease_s / 3``; leading and idle, it sleeps on commits (never past the next
renewal); on stop it releases the lease so that a standby takes over at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from engine.controller.leadership import ControllerLeadership
from engine.errors import NotLeader, PolicyEpochChanged, PolicyUnavailable
from engine.runloop.follower import ControllerLoop, DrainStats, ensure_controller_agent
from engine.runloop.signals import DEFAULT_POLL_S, CommitSignal

DEFAULT_BATCH = 256


@dataclass
class LeaderStats(DrainStats):
    """What a leader's rounds did: the drains' figures plus its takeovers, losses and standby rounds."""

    rounds: int = 0
    takeovers: int = 0
    lost: int = 0
    standby: int = 0
    unavailable: int = 0  # rounds cut short by no policy answer (fail closed; the lease is kept, retried)
    rooms_closed: int = 0


class LeaderRunner:
    """Serves ``loop`` (built with a leadership) as its world's controller only while that lease holds.

    ``governor``: on each takeover the controller's own agent is registered and granted if needed
    (:func:`~engine.runloop.follower.ensure_controller_agent`). ``follow_policy``: brings this process's PDP
    to the world's epoch when a follow-up finds it moved (without it, ``PolicyEpochChanged`` is raised)."""

    def __init__(self, loop: ControllerLoop, *, governor: str | None = None, batch: int = DEFAULT_BATCH,
                 follow_policy: Callable[[], object] | None = None) -> None:
        if loop.leadership is None:
            raise ValueError("a leader runner needs a loop built with a leadership")  # a programming error
        self.loop = loop
        self.leadership: ControllerLeadership = loop.leadership
        self.governor = governor
        self.batch = batch
        self.follow_policy = follow_policy
        self._generation: int | None = None
        self._renewed_at: int | None = None

    @property
    def renew_every_us(self) -> int:
        return round(self.leadership.lease_s * 1_000_000 / 3)

    def _lead(self, stats: LeaderStats) -> bool:
        """Acquire or renew when due; rebuild on a takeover. Whether this process leads now."""
        lead, now = self.leadership, self.leadership.clock.now_us()
        due = self._renewed_at is None or now - self._renewed_at >= self.renew_every_us
        if lead.is_leader and not due:
            return True
        self.loop.load()  # compiled before leading (once): a takeover's lease is not spent compiling rules
        if not lead.acquire():
            if self._generation is not None:
                stats.lost += 1
            self._generation = self._renewed_at = None
            return False
        self._renewed_at = now
        if lead.fencing_token != self._generation:  # a takeover: this generation starts from SQL
            if self.governor is not None:
                ensure_controller_agent(self.loop.book, self.governor)
            self.loop.start()
            self._generation = lead.fencing_token
            stats.takeovers += 1
            # the start (registration, rebuild from SQL) took time out of the lease just taken: renew it
            # before the round's steps, so a slow start on a loaded host does not lose it at the first step
            if not lead.renew():
                self._generation = self._renewed_at = None
                stats.lost += 1
                return False
            self._renewed_at = lead.clock.now_us()
        return True

    def round(self, stats: LeaderStats) -> bool:
        """One round (see the module docstring); True if it observed any event."""
        stats.rounds += 1
        if not self._lead(stats):
            stats.standby += 1
            return False
        try:
            with self.leadership.fenced():
                drained = self.loop.drain(self.batch)
                # zombie rooms: closed by their stop condition (the controller may close what it opened)
                stats.rooms_closed += len(self.loop.world.close_stale_rooms(self.loop.actor))
        except PolicyUnavailable:
            stats.unavailable += 1  # nothing undecided was written; the next round tries again
            return False
        except NotLeader:
            self.leadership.lost()  # nothing of the refused step was written; stand by from the next round
            self._generation = self._renewed_at = None
            stats.lost += 1
            return False
        except PolicyEpochChanged:
            if self.follow_policy is None:
                raise
            self.follow_policy()
            return True
        stats.add(drained)
        return drained.events > 0

    def step_down(self) -> None:
        """Release the lease (a standby may take over at once)."""
        self.leadership.release()
        self._generation = self._renewed_at = None


def serve_while_leader(runner: LeaderRunner, stop: threading.Event, *, poll_s: float = DEFAULT_POLL_S,
                       max_rounds: int | None = None) -> LeaderStats:
    """Run ``runner``'s rounds until ``stop`` is set (or ``max_rounds``), then release the lease. Standing
    by, wait ``lease_s / 3`` between tries; leading and idle, sleep on commits for at most ``poll_s`` and
    never past the next renewal."""
    stats = LeaderStats()
    signal = CommitSignal(runner.loop.book.store)
    renew_s = runner.leadership.lease_s / 3
    limit = max_rounds if max_rounds is not None else 1 << 62
    try:
        for _ in range(limit):
            if stop.is_set():
                break
            if runner.round(stats):
                continue
            if runner.leadership.is_leader:
                signal.wait(min(poll_s, renew_s))
            else:
                stop.wait(renew_s)
    finally:
        signal.close()
        runner.step_down()
    return stats


__all__ = ["DEFAULT_BATCH", "LeaderRunner", "LeaderStats", "serve_while_leader"]
