"""Boundary models of the permission layer: what PMW asks the PDP and what it answers.

A plan filter is a small expression tree, independent of Cerbos' wire types, that ``store/`` turns into
SQL (``store.plan_sql``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field

from engine.models.common import Model

KINDS = ("agent", "state", "task", "artifact", "memory", "wake", "handoff", "receipt", "room", "topology",
         "channel", "message", "approval", "tool")


class CapabilityClass(StrEnum):
    READ = "read"
    INVOKE = "invoke"
    MUTATE = "mutate"


# Every action of every kind, by capability class (docs/policy-contract.md).
_MUTATIONS: dict[str, tuple[str, ...]] = {
    "agent": ("register", "update", "grant", "unregister", "subscribe"),
    "state": ("write",),
    "task": ("create", "assign", "claim", "complete", "fail", "release", "abort"),
    "artifact": ("create", "version"),
    "memory": ("create", "propose", "review", "promote", "reject", "archive", "reopen", "supersede", "revoke"),
    "wake": ("enqueue", "claim", "ack", "cancel"),
    "handoff": ("create", "accept", "complete", "reject"),
    "receipt": ("create",),
    "room": ("create", "join", "leave", "close", "discuss", "answer", "distill"),
    "topology": ("write",),
    "channel": ("send",),
    "message": ("claim", "ack"),
    "approval": ("request", "approve"),
    "tool": (),
}
_INVOKABLE = frozenset({"state", "artifact", "memory", "tool"})

ACTIONS: dict[str, dict[str, CapabilityClass]] = {
    kind: {**({} if kind == "tool" else {"read": CapabilityClass.READ}),
           **({"invoke": CapabilityClass.INVOKE} if kind in _INVOKABLE else {}),
           **dict.fromkeys(mutations, CapabilityClass.MUTATE)}
    for kind, mutations in _MUTATIONS.items()
}


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


__all__ = ["ACTIONS", "KINDS", "CapabilityClass", "Decision", "PlanExpression", "PlanFilter", "PlanOperand",
           "PlanValue", "PlanVariable", "PrincipalRef", "ResourceRef"]
