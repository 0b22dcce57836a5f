"""Fences: conditions on a lease that the gateway checks in the same transaction as a write (issue 13).

A writer that acts under a lease (the controller leader under its world's lease, a worker under its claim of
a wake) enters :func:`fenced` with the lease's fence; while the block runs, every
:func:`store.gateway.commit` and :func:`store.gateway.commit_many` of THIS thread on THAT database first
checks each active fence inside its write transaction and refuses the whole write with the fence's typed
error (nothing written) when the lease no longer holds:

- :class:`LeaderFence` (``controller_leases``): the world's lease row is still ``holder``'s at
  ``generation`` and has not expired at the writer's clock, else :class:`~engine.errors.NotLeader`;
- :class:`WakeFence` (``wakes``): the wake is still ``claimed`` by ``owner`` with claim ``token`` (its
  ``attempts``) and its lease has not run out, else :class:`~engine.errors.WakeLeaseLost`.

On PostgreSQL the fence's row is read ``FOR SHARE`` (the lease) / ``FOR UPDATE`` (the wake, which the ack
updates anyway): a takeover or a reclaim waits until the fenced write committed or rolled back, and a
fenced write that waited sees the takeover. On SQLite the write transaction is ``BEGIN IMMEDIATE``: nothing
runs between the check and the commit. So a lease holder that was paused or cut off past its lease never
commits after its successor took over.

The fences are per thread and per :class:`~store.database.Database`: another thread, or another store in
the same thread, is not fenced by them. Claims (:func:`store.gateway.claim_wake`) and the lease statements
themselves are never fenced.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from engine.errors import NotLeader, WakeLeaseLost
from store.database import Database, placeholder

NowUs = Callable[[], int]


@dataclass(frozen=True)
class LeaderFence:
    """Commit only while ``holder`` leads world ``world_id`` under lease ``generation`` (``now_us``: the
    writer's clock, read at the check)."""

    world_id: str
    holder: str
    generation: int
    now_us: NowUs

    def check(self, cur: Any, dialect: str) -> None:
        """Raise :class:`NotLeader` unless the lease row still holds (see the module docstring)."""
        lock = " FOR SHARE" if dialect == "postgresql" else ""
        cur.execute(f"SELECT holder, generation, expires_at_us FROM controller_leases "
                    f"WHERE world_id = {placeholder(dialect, 'w')}{lock}", {"w": self.world_id})
        row = cur.fetchone()
        if row is None:
            raise NotLeader(self.world_id, self.holder, self.generation, None, None, "no_lease")
        holder, generation, expires = str(row[0]), int(row[1]), int(row[2])
        if holder != self.holder or generation != self.generation:
            raise NotLeader(self.world_id, self.holder, self.generation, holder, generation, "stale_generation")
        if expires < self.now_us():
            raise NotLeader(self.world_id, self.holder, self.generation, holder, generation, "expired")


@dataclass(frozen=True)
class WakeFence:
    """Commit only while wake ``wake_id`` is claimed by ``owner`` under claim ``token`` (the claim's
    ``attempts``) and its lease runs (``now_us``: the writer's clock, read at the check)."""

    wake_id: str
    owner: str
    token: int
    now_us: NowUs

    def check(self, cur: Any, dialect: str) -> None:
        """Raise :class:`WakeLeaseLost` unless the claim still holds (see the module docstring)."""
        lock = " FOR UPDATE" if dialect == "postgresql" else ""
        cur.execute(f"SELECT status, lease_owner, attempts, lease_until_us FROM wakes "
                    f"WHERE wake_id = {placeholder(dialect, 'w')}{lock}", {"w": self.wake_id})
        row = cur.fetchone()
        if row is None:
            raise WakeLeaseLost(self.wake_id, self.owner, self.token, "not_found")
        status, owner, attempts, until = row
        if status != "claimed":
            raise WakeLeaseLost(self.wake_id, self.owner, self.token, "finished")
        if owner != self.owner or int(attempts) != self.token:
            raise WakeLeaseLost(self.wake_id, self.owner, self.token, "reclaimed")
        if until is None or int(until) < self.now_us():
            raise WakeLeaseLost(self.wake_id, self.owner, self.token, "expired")


class Fence(Protocol):
    """What the gateway checks in a write's transaction: ``check`` raises (nothing written) unless it holds.
    The lease fences above, and ``engine.world.read_set.ReadSetFence`` (a read set still current)."""

    def check(self, cur: Any, dialect: str) -> None: ...

_local = threading.local()


def _active(db: Database) -> list[Fence]:
    by_db: dict[int, list[Fence]] | None = getattr(_local, "by_db", None)
    if by_db is None:
        by_db = _local.by_db = {}
    return by_db.setdefault(id(db), [])


@contextmanager
def fenced(db: Database, fence: Fence) -> Iterator[None]:
    """Within this block, this thread's commits on ``db`` are refused unless ``fence`` holds (checked in each
    commit's own transaction). Blocks nest: every active fence is checked."""
    active = _active(db)
    active.append(fence)
    try:
        yield
    finally:
        active.remove(fence)
        if not active:
            _local.by_db.pop(id(db), None)


def check_fences(db: Database, cur: Any) -> None:
    """Check every fence this thread holds on ``db`` (inside the write transaction on ``cur``)."""
    for fence in tuple(getattr(_local, "by_db", {}).get(id(db), ())):
        fence.check(cur, db.dialect)


__all__ = ["Fence", "LeaderFence", "NowUs", "WakeFence", "check_fences", "fenced"]
