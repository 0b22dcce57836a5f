"""The controller's lease of a world, as the store holds it (``controller_leases``, migration 9).

A :class:`Lease` is one row: ``holder`` leads world ``world_id`` until ``expires_at_us`` under
``generation``, the fencing token (bumped by every takeover). The statements that take, renew and release
a lease are the gateway's (:func:`store.gateway.take_lease`, :func:`~store.gateway.renew_lease`,
:func:`~store.gateway.release_lease`), each one conditional statement; this module reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import DatabaseError

from engine.errors import StoreUnavailable
from store.database import Database, placeholder


@dataclass(frozen=True)
class Lease:
    """``holder`` leads ``world_id`` under ``generation`` until ``expires_at_us`` (taken at ``acquired_at_us``)."""

    world_id: str
    holder: str
    generation: int
    acquired_at_us: int
    expires_at_us: int

    @classmethod
    def of(cls, world_id: str, row: Any) -> Lease:
        """The lease of ``world_id`` from a driver row ``(holder, generation, acquired_at_us, expires_at_us)``."""
        return cls(world_id, str(row[0]), int(row[1]), int(row[2]), int(row[3]))


LEASE_COLUMNS = "holder, generation, acquired_at_us, expires_at_us"


def read_lease(db: Database, world_id: str) -> Lease | None:
    """The lease row of ``world_id`` as committed (``None``: never taken). Raises ``StoreUnavailable``."""
    try:
        with db.read_cursor() as cur:
            cur.execute(f"SELECT {LEASE_COLUMNS} FROM controller_leases WHERE world_id = "
                        f"{placeholder(db.dialect, 'w')}", {"w": world_id})
            row = cur.fetchone()
    except (db.database_error, DatabaseError) as exc:
        raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from exc
    return Lease.of(world_id, row) if row is not None else None


__all__ = ["LEASE_COLUMNS", "Lease", "read_lease"]
