"""What the enforcement point asks a PDP: the narrow surface one Cerbos client and a pool of replicas share.

:class:`~engine.policy.cerbos_adapter.CerbosPdp` (one PDP) and
:class:`~engine.policy.pdp_replicas.PdpReplicas` (several, with failover) both satisfy it, so the
authorizer, the runtime's epoch probe and ``explain`` do not care how many PDPs answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from engine.policy.model import Decision, PlanFilter, PrincipalRef, ResourceRef


class DecisionPoint(Protocol):
    """A source of policy decisions. Every method raises ``PolicyUnavailable`` when no answer can be had
    (fail closed), ``PolicyInvalidRequest`` when the PDP's schemas reject the attributes, and ``Closed``
    after :meth:`close`."""

    timeout_s: float

    def check(self, principal: PrincipalRef, resources: Sequence[tuple[ResourceRef, Sequence[str]]]
              ) -> list[Decision]:
        """One decision per resource for the given actions, in order, all from one PDP."""
        ...

    def plan(self, principal: PrincipalRef, kind: str, action: str) -> PlanFilter:
        """The objects of ``kind`` on which ``principal`` may do ``action``, as a filter."""
        ...

    def plans(self, principal: PrincipalRef, asked: Sequence[tuple[str, str]]) -> list[PlanFilter]:
        """One plan per (kind, action), all from one PDP."""
        ...

    def reload(self) -> None:
        """Ask the PDP (every replica) to reload its policy store."""
        ...

    def close(self) -> None:
        """Release the connections; idempotent."""
        ...


__all__ = ["DecisionPoint"]
