"""The invariants the multi-host fault harness checks after each fault (``test_deployment_faults.py``), as
pure functions of what it read (the log, the wakes, the receipts, the lease history it polled), so they can
be shown to fail on doctored histories (``test_invariants.py``). Each returns a list of violations (empty:
the invariant holds), each a sentence naming what broke.

- :func:`step_violations`: no controller step committed twice (one step per log position, positions rising in
  log order), every step carries the generation of a lease that was seen, was committed inside that lease's
  span (taken at or before the step, not expired before it), and no step of an older generation follows one
  of a newer generation in the log (a stale leader never commits after its successor).
- :func:`wake_violations`: every trigger event caused exactly one wake, every wake ended in exactly one
  receipt, and every wake's effect was applied once if its receipt says it acted, else not at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LeaseSpan:
    """Generation ``generation`` of the controller lease as the poller saw it: held by ``holder`` from
    ``acquired_at_us`` until at least ``expires_at_us`` (the latest expiry seen: renewals extend it)."""

    generation: int
    holder: str
    acquired_at_us: int
    expires_at_us: int


@dataclass(frozen=True)
class Step:
    """One ``controller.step`` event: its log position ``seq``, the ``position`` it moved the controller to,
    the ``generation`` in its payload (None: none recorded) and its commit time ``at_us``."""

    seq: int
    position: int
    generation: int | None
    at_us: int


def record_lease(history: dict[int, LeaseSpan], generation: int, holder: str, acquired_at_us: int,
                 expires_at_us: int) -> None:
    """Fold one observation of the lease row into ``history`` (a generation's latest expiry is kept)."""
    seen = history.get(generation)
    if seen is None or expires_at_us > seen.expires_at_us:
        history[generation] = LeaseSpan(generation, holder, acquired_at_us, expires_at_us)


def steps_of(events: Iterable[Mapping[str, object]]) -> list[Step]:
    """The ``controller.step`` events of ``events`` (rows of the log), in log order."""
    steps = []
    for e in events:
        if e["event_type"] != "controller.step":
            continue
        payload = e["payload"]
        assert isinstance(payload, Mapping)
        generation = payload.get("generation")
        steps.append(Step(int(e["seq"]), int(payload["position"]),  # type: ignore[call-overload]
                          int(generation) if isinstance(generation, int) else None,
                          int(e["created_at_us"])))  # type: ignore[call-overload]
    return sorted(steps, key=lambda s: s.seq)


def step_violations(steps: Sequence[Step], leases: Mapping[int, LeaseSpan]) -> list[str]:
    """See the module docstring."""
    out: list[str] = []
    for position, n in Counter(s.position for s in steps).items():
        if n > 1:
            out.append(f"position {position} committed {n} times")
    newest: Step | None = None
    last_position = -1
    for s in steps:
        if s.position <= last_position:
            out.append(f"step at seq {s.seq} moved the controller back or in place ({last_position} -> {s.position})")
        last_position = max(last_position, s.position)
        if s.generation is None:
            out.append(f"step at seq {s.seq} records no generation")
            continue
        lease = leases.get(s.generation)
        if lease is None:
            out.append(f"step at seq {s.seq} under generation {s.generation}, never seen in the lease history")
        elif not lease.acquired_at_us <= s.at_us <= lease.expires_at_us:
            out.append(f"step at seq {s.seq} at {s.at_us} outside generation {s.generation}'s lease "
                       f"[{lease.acquired_at_us}, {lease.expires_at_us}]")
        if newest is not None and newest.generation is not None and s.generation < newest.generation:
            out.append(f"step at seq {s.seq} by stale generation {s.generation} after generation "
                       f"{newest.generation}'s step at seq {newest.seq}")
        if newest is None or newest.generation is None or s.generation > newest.generation:
            newest = s
    return out


def wake_violations(triggers: Sequence[str], wake_causes: Mapping[str, str | None],
                    receipts: Sequence[tuple[str, str]], effects: Sequence[str]) -> list[str]:
    """``triggers``: the event ids that must each cause one wake; ``wake_causes``: every wake id with the event
    that caused it; ``receipts``: (wake id, outcome) of every receipt; ``effects``: the wake id of every
    applied effect (each wake's agent writes one key): one for a wake receipted ``acted``, none otherwise (a
    decision refused as a whole, e.g. its read set moved on, applies nothing)."""
    out: list[str] = []
    caused = Counter(c for c in wake_causes.values() if c is not None)
    for t in triggers:
        if caused[t] != 1:
            out.append(f"trigger {t} caused {caused[t]} wakes")
    for cause in set(caused) - set(triggers):
        out.append(f"wakes caused by {cause}, which is no trigger")
    counted = Counter(w for w, _ in receipts)
    acted = {w for w, outcome in receipts if outcome == "acted"}
    applied = Counter(effects)
    for w in wake_causes:
        if counted[w] != 1:
            out.append(f"wake {w} has {counted[w]} receipts")
        if applied[w] != (1 if w in acted else 0):
            out.append(f"wake {w} ({'acted' if w in acted else 'not acted'}) has {applied[w]} effects applied")
    for w in (set(counted) | set(applied)) - set(wake_causes):
        out.append(f"a receipt or effect of unknown wake {w}")
    return out


__all__ = ["LeaseSpan", "Step", "record_lease", "step_violations", "steps_of", "wake_violations"]
