"""Lifecycle state machines: which action moves an object from which statuses to which status, and why
an action is refused.

Each kind declares one :class:`Lifecycle`. The World consults it before writing; the gateway's
compare-and-set on the version makes the check-and-write atomic. :class:`Refusal` names why a call
would be refused (``allowed_actions`` answers with it); :func:`refusal_of` maps the error a call raises
to it, so the answer and the call can be compared.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum

from engine.errors import AlreadyExists, IllegalTransition, LeaseHeld, NotFound, NotPermitted, PolicyDenied


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


class Refusal(StrEnum):
    """Why an action on an object is refused, in the order the World's calls check (the first that holds).

    - ``illegal_transition``: the object's status does not allow the action (its lifecycle forbids it from
      here, or it was already taken: a second blind answer); the call raises ``IllegalTransition`` (or
      ``AlreadyExists``).
    - ``not_assignee``: the World's own party rules: the actor is not the one the action needs (the
      task's owner or assignee, the handoff's target, a reviewer other than the owner, a room member, the
      wake's lease holder, a live agent); the call raises ``NotPermitted`` (``LeaseHeld`` for a wake's
      lease, ``NotFound`` for a membership that never existed).
    - ``policy``: the PDP denies it; the call raises ``PolicyDenied``.
    """

    ILLEGAL_TRANSITION = "illegal_transition"
    NOT_ASSIGNEE = "not_assignee"
    POLICY = "policy"


def refusal_of(error: Exception) -> Refusal | None:
    """The refusal a call's error stands for; ``None`` for errors that are no refusal of the action
    (bad input, a version race, an unavailable store or PDP)."""
    if isinstance(error, PolicyDenied):
        return Refusal.POLICY
    if isinstance(error, IllegalTransition | AlreadyExists):
        return Refusal.ILLEGAL_TRANSITION
    if isinstance(error, NotPermitted | LeaseHeld | NotFound):
        return Refusal.NOT_ASSIGNEE
    return None


__all__ = ["Lifecycle", "Refusal", "Transition", "refusal_of"]
