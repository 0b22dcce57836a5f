"""Boundary models of the permission layer: what PMW asks the PDP and what it answers.

A plan filter is a small expression tree, independent of Cerbos' wire types, that ``store/`` turns into
SQL (``store.plan_sql``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from engine.models.common import Model
from engine.policy.vocabulary import ACTIONS, KINDS, CapabilityClass

GOVERNOR_ROLE = "governor"
# Event types that change the controller's decisions -> the workspace roles that may append them. The policy
# decides who may append (``policies/_authority/authority.yaml``, constant ``decision_events``: the same
# table); the controller's inputs check it again (``engine.controller.facts``), so a decision event from
# anyone else is ignored even if it reached the log.
DECISION_EVENTS: Mapping[str, frozenset[str]] = {
    "conflict.resolved": frozenset({GOVERNOR_ROLE, "moderator"}),
    "review.done": frozenset({GOVERNOR_ROLE, "reviewer"}),
    "review.requested": frozenset({GOVERNOR_ROLE, "reviewer"}),  # an independent review isolates its reviewer
}
# The room ids the controller opens (its conflict rooms: ``<prefix><term>``). The prefix of every rule's
# ``open_conflict_room`` must start with it (``engine.controller.actions``), and the World refuses an agent's
# ``create_room`` with an id in it (only the controller's agent opens those), so nobody can take a conflict
# room before the controller convenes it.
CONTROLLER_ROOM_PREFIX = "conflict-"
# The payload field in which ``append_event`` records the appender's workspace role on a decision event
# (set by the runtime from the agent's row; an agent that supplies it is refused).
ACTOR_ROLE_FIELD = "actor_role"


class PrincipalRef(Model):
    id: str = Field(min_length=1)
    roles: list[str] = Field(min_length=1)
    attr: dict[str, Any]


class ResourceRef(Model):
    kind: str
    id: str = Field(min_length=1)
    attr: dict[str, Any]


class Decision(Model):
    """The PDP's answer for one resource: allow/deny per action, under ``epoch``."""

    kind: str
    id: str
    actions: dict[str, bool]
    epoch: str | None
    derived_roles: list[str] = Field(default_factory=list)

    def allowed(self, action: str) -> bool:
        return self.actions.get(action, False)


class PlanValue(Model):
    value: Any


class PlanVariable(Model):
    name: str  # e.g. "request.resource.attr.owner"


class PlanExpression(Model):
    operator: str
    operands: list[PlanExpression | PlanVariable | PlanValue]


PlanOperand = PlanExpression | PlanVariable | PlanValue


class PlanFilter(Model):
    """Which objects of a kind a principal may act on: all, none, or those matching ``condition``."""

    kind: Literal["always_allowed", "always_denied", "conditional"]
    condition: PlanOperand | None = None
    epoch: str | None = None


__all__ = ["ACTIONS", "ACTOR_ROLE_FIELD", "CONTROLLER_ROOM_PREFIX", "DECISION_EVENTS", "GOVERNOR_ROLE", "KINDS",
           "CapabilityClass", "Decision", "PlanExpression", "PlanFilter", "PlanOperand", "PlanValue", "PlanVariable",
           "PrincipalRef", "ResourceRef"]
