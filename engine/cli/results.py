"""The models the command line makes of its own (not World results): what ``pmw commands``, ``pmw worker``
and ``pmw rules`` print.

Imported by those commands when they run, never at start-up: this module imports pydantic.
"""

from __future__ import annotations

from engine.models.common import Model


class CommandInfo(Model):
    """What ``pmw commands`` shows of one command."""

    name: str
    effect: bool
    events: list[str]
    description: str


class WorkerReport(Model):
    """What ``pmw worker`` did, once it stops."""

    worker_id: str
    rounds: int
    events: int
    steps: int
    wakes: int
    suppressed: int
    cycles: int
    crashes: int
    unavailable: int
    epoch_changes: int = 0
    outcomes: dict[str, int]


class RulesChecked(Model):
    """A rule directory that ``pmw rules check`` validated and compiled."""

    directory: str
    digest: str
    rules: list[str]


class ShadowReport(Model):
    """What ``pmw rules shadow`` found: the decisions the candidate rules would change."""

    candidate: str
    events: int
    differing: int
    diff: str


__all__ = ["CommandInfo", "RulesChecked", "ShadowReport", "WorkerReport"]
