"""Retention: expire memory and artifacts past their TTL or their type's retention (seed 000 §122-124)."""

from __future__ import annotations

from pydantic import Field

from engine.commands.base import Command

MAX_SWEEP = 1000


class SweepRetention(Command):
    """Expire what is past its time (a memory's TTL, or its type's retention in `contracts/retention.yaml`;
    an artifact's type's retention), each in its own write with a `memory.expired` or `artifact.expired`
    event, and invalidate memory derived from it through provenance (the path in the event). Governors only;
    at most `limit` objects per sweep."""

    name = "sweep_retention"
    events = ("memory.expired", "artifact.expired")
    takes_op_id = False
    cause_param = None

    limit: int = Field(default=MAX_SWEEP, ge=1, le=MAX_SWEEP)


__all__ = ["MAX_SWEEP", "SweepRetention"]
