"""How much one read may answer: the bound on ``limit`` of the World's list reads.

A read that takes a ``limit`` answers at most that many rows, and ``limit`` is a whole number from 1 to the
read's bound: anything else (0, a negative number, which SQLite's ``LIMIT`` takes as "no limit", or a
number past the bound) is ``InvalidInput`` naming ``limit``, before anything is read. Larger answers are
paged (``events(after_seq=...)``). The bounds are listed in ``docs/input-limits.md``.
"""

from __future__ import annotations

from engine.errors import InvalidInput
from engine.validation import check_int64

#: ``events``: positions of the log in one answer (page on with ``after_seq``).
MAX_EVENTS = 100_000
#: ``list_tasks``, ``list_wakes``, ``list_receipts``, ``list_handoffs``, ``list_artifacts``.
MAX_LISTED = 100_000


def check_limit(limit: int, top: int) -> int:
    """``limit`` if it is a whole number from 1 to ``top``; ``InvalidInput`` naming ``limit`` otherwise."""
    if not 1 <= check_int64("limit", limit) <= top:
        raise InvalidInput("limit", f"{limit!r} is not a whole number from 1 to {top}")
    return limit


__all__ = ["MAX_EVENTS", "MAX_LISTED", "check_limit"]
