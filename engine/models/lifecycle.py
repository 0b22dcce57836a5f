"""Lifecycle state machines: which action moves an object from which statuses to which status.

Each kind declares one :class:`Lifecycle`. The World consults it before writing; the gateway's
compare-and-set on the version makes the check-and-write atomic.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum

from engine.errors import IllegalTransition


@dataclass(frozen=True)
class Transition:
    sources: frozenset[str]
    target: str


class Lifecycle:
    """A named set of transitions ``action: sources -> target`` for one kind of object."""

    def __init__(self, kind: str, transitions: Mapping[str, tuple[Collection[StrEnum], StrEnum]]) -> None:
        self.kind = kind
        self._transitions = {
            action: Transition(frozenset(s.value for s in sources), target.value)
            for action, (sources, target) in transitions.items()
        }

    @property
    def actions(self) -> tuple[str, ...]:
        return tuple(self._transitions)

    def allows(self, status: str, action: str) -> bool:
        transition = self._transitions.get(action)
        return transition is not None and status in transition.sources

    def target(self, object_id: str, status: str, action: str) -> str:
        """The status after ``action``; raises :class:`IllegalTransition` if not allowed from ``status``."""
        transition = self._transitions.get(action)
        if transition is None or status not in transition.sources:
            raise IllegalTransition(self.kind, object_id, status, action)
        return transition.target


__all__ = ["Lifecycle", "Transition"]
