"""One controller leader per world, elected through the store, fenced by its lease's generation (issue 13).

:class:`ControllerLeadership` is one process's candidacy for leading world ``world_id`` (contract:
``docs/scaleout.md``). The lease is a row of the store (``controller_leases``): :meth:`acquire` takes it when
it is free or expired (ONE conditional statement; the generation, which is the fencing token, is bumped on
every takeover) or renews it when this candidate holds it; :meth:`renew` extends it while it holds;
:meth:`release` gives it up. :meth:`fenced` makes every store commit of the calling thread conditional on
the lease, checked by the gateway in the commit's own transaction (:mod:`store.fences`): a leader that was
paused or cut off past its lease never commits after its successor took over (:class:`~engine.errors.NotLeader`,
nothing written).

Time is the clock given (the runtime's injected clock): expiry is judged by each writer's clock, so hosts need
roughly synchronised clocks and ``lease_s`` well above their skew.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from engine.errors import InvalidInput, NotLeader
from engine.sources import Clock, SystemClock
from engine.validation import check_id
from store import LeaderFence, Lease, Store

MAX_HOLDER = 200
MAX_LEASE_S = 3600.0


class ControllerLeadership:
    """``holder``'s candidacy for leading world ``world_id`` with leases of ``lease_s`` seconds.

    ``holder`` must be unique per process (e.g. ``host:pid:random``): two processes with one name would
    renew each other's lease. Bad input (``world_id``, ``holder``, ``lease_s``) is ``InvalidInput``. Not
    thread-safe: one thread drives a candidacy (fenced commits may run in that thread only)."""

    def __init__(self, store: Store, world_id: str, holder: str, lease_s: float, *,
                 clock: Clock | None = None) -> None:
        self.world_id = check_id("world_id", world_id)
        if not isinstance(holder, str) or not 0 < len(holder) <= MAX_HOLDER or not holder.isprintable():
            raise InvalidInput("holder", f"a printable name of 1 to {MAX_HOLDER} characters")
        if isinstance(lease_s, bool) or not isinstance(lease_s, int | float) or not 0 < lease_s <= MAX_LEASE_S:
            raise InvalidInput("lease_s", f"seconds, more than 0 and at most {MAX_LEASE_S:g}")
        self.holder = holder
        self.lease_s = float(lease_s)
        self.clock: Clock = clock or SystemClock()
        self._store = store
        self._lease: Lease | None = None

    @property
    def lease(self) -> Lease | None:
        """The lease this candidate holds, as last taken or renewed (``None``: not leading)."""
        return self._lease

    @property
    def fencing_token(self) -> int | None:
        """The generation of the lease this candidate holds (``None``: not leading)."""
        return self._lease.generation if self._lease is not None else None

    @property
    def is_leader(self) -> bool:
        """Whether this candidate holds a lease that has not expired by its own clock (a local view: only the
        gateway's fence, checked at commit, is authoritative)."""
        return self._lease is not None and self._lease.expires_at_us >= self.clock.now_us()

    def _span(self) -> tuple[int, int]:
        now = self.clock.now_us()
        return now, now + round(self.lease_s * 1_000_000)

    def acquire(self) -> bool:
        """Lead, if possible: renew the lease this candidate holds, else take the world's lease when it is
        free or expired (a takeover: generation + 1). False when another holder's lease is live (stand by
        and try again later). Raises ``StoreUnavailable``."""
        if self._lease is not None and self.renew():
            return True
        now, until = self._span()
        self._lease = self._store.take_lease(self.world_id, self.holder, now, until)
        return self._lease is not None

    def renew(self) -> bool:
        """Extend the lease by ``lease_s`` from now if it still holds; False (and no longer leading) when it
        was lost: another holder took over, or it expired. Raises ``StoreUnavailable``."""
        if self._lease is None:
            return False
        now, until = self._span()
        self._lease = self._store.renew_lease(self._lease, now, until)
        return self._lease is not None

    def release(self) -> None:
        """Give the lease up (it expires now; a standby may take over at once). Nothing if not leading."""
        lease, self._lease = self._lease, None
        if lease is not None:
            self._store.release_lease(lease, self.clock.now_us())

    def lost(self) -> None:
        """Forget the lease (a fenced write found it lost): this candidate no longer leads."""
        self._lease = None

    def fence(self) -> LeaderFence:
        """The fence of the lease held now; ``NotLeader`` (reason ``no_lease``) when not leading."""
        if self._lease is None:
            current = self._store.lease(self.world_id)
            raise NotLeader(self.world_id, self.holder, None, current.holder if current else None,
                            current.generation if current else None, "no_lease")
        return LeaderFence(self.world_id, self.holder, self._lease.generation, self.clock.now_us)

    def fenced(self) -> AbstractContextManager[None]:
        """Within this block, every commit of this thread on the store is refused (``NotLeader``, nothing
        written) unless this lease still holds at that commit. ``NotLeader`` at once when not leading."""
        return self._store.fenced(self.fence())


__all__ = ["MAX_HOLDER", "MAX_LEASE_S", "ControllerLeadership"]
