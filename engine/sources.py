"""Injected sources of time and identity.

Anything that must replay (simulations, recorded event logs) takes its clock and id source from here,
never from the wall clock, global ``random`` or a bare ``uuid4()``. Time is integer microseconds since
the Unix epoch, UTC: exact, comparable and the same on every store backend.
"""

from __future__ import annotations

import os
import random
import threading
import time
from typing import Protocol


class Clock(Protocol):
    """A source of the current time in integer microseconds since the epoch (UTC)."""

    def now_us(self) -> int: ...


class SystemClock:
    """The wall clock. Strictly increasing within one process, so two events never share a time."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def now_us(self) -> int:
        with self._lock:
            self._last = max(self._last + 1, time.time_ns() // 1000)
            return self._last


class ManualClock:
    """A clock that moves only when told: for tests and virtual-time simulations."""

    def __init__(self, start_us: int = 1_767_225_600_000_000) -> None:  # 2026-01-01T00:00:00Z
        self._now = start_us

    def now_us(self) -> int:
        return self._now

    def advance(self, seconds: float) -> int:
        """Move forward by ``seconds`` (never backwards) and return the new time."""
        if seconds < 0:
            raise ValueError("a clock never moves backwards")
        self._now += round(seconds * 1_000_000)
        return self._now


class IdSource(Protocol):
    """A source of new identifiers of the form ``<prefix>_<26 lowercase hex digits>`` (104 bits)."""

    def new(self, prefix: str) -> str: ...


class RandomIds:
    """Time-ordered, unpredictable ids: 13 hex digits of wall-clock microseconds, then 52 random bits from
    the OS. New ids sort after old ones, so the unique indexes they key grow at their right edge."""

    def new(self, prefix: str) -> str:
        return f"{prefix}_{time.time_ns() // 1000:013x}{int.from_bytes(os.urandom(7), 'big') >> 4:013x}"


class SeededIds:
    """Deterministic ids from a seed: the same seed gives the same sequence of ids."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def new(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}_{self._random.getrandbits(104):026x}"


__all__ = ["Clock", "IdSource", "ManualClock", "RandomIds", "SeededIds", "SystemClock"]
