"""The versioned collaboration topology (not the authority graph): every change is a new version."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from engine.commands.base import Command
from engine.commands.fields import INT64_MAX, Id
from engine.models.common import Model
from engine.models.topology import EdgeType

MAX_SCOPE_CHARS = 200
MAX_WEIGHT = 1_000_000.0
MAX_TOPOLOGY_REASON_CHARS = 500
MAX_EDGE_CHANGES = 500


class EdgeChange(Model):
    """One edge of a topology transaction: add or change it (``active``), or deactivate it."""

    source_agent: Id
    target_agent: Id
    edge_type: EdgeType
    scope: str = Field(default="", max_length=MAX_SCOPE_CHARS)
    weight: float = Field(default=1.0, ge=0.0, le=MAX_WEIGHT)
    active: bool = True


class ChangeTopology(Command):
    """Commit several edge changes as ONE new topology version, or none. Checked before anything is written
    (``invalid_input`` naming the change): no self-edge, no edge changed twice, both ends registered agents,
    and deactivating only an edge that exists. With ``expected_topology_version`` it applies only on that
    version (else ``version_conflict`` with the current one)."""

    name = "change_topology"
    events = ("topology.changed",)
    agent_effect = True

    changes: list[EdgeChange] = Field(min_length=1, max_length=MAX_EDGE_CHANGES)
    expected_topology_version: int | None = Field(default=None, ge=0, le=INT64_MAX)
    reason: str = Field(default="", max_length=MAX_TOPOLOGY_REASON_CHARS)

    def arguments(self) -> dict[str, Any]:
        return {**super().arguments(), "changes": [c.model_dump() for c in self.changes]}

    def ref(self, result: object) -> str | None:
        return f"topology.v{getattr(result, 'version')}"  # noqa: B009 - the result type lives in engine.world


class SetTopologyEdge(Command):
    """Add, change or deactivate one edge, as a new topology version (only on ``expected_topology_version``,
    if given; else ``version_conflict``)."""

    name = "set_topology_edge"
    events = ("topology.changed",)
    agent_effect = True

    source_agent: Id
    target_agent: Id
    edge_type: EdgeType
    scope: str = Field(default="", max_length=MAX_SCOPE_CHARS)
    weight: float = Field(default=1.0, ge=0.0, le=MAX_WEIGHT)
    active: bool = True
    expected_topology_version: int | None = Field(default=None, ge=0, le=INT64_MAX)
    reason: str = Field(default="", max_length=MAX_TOPOLOGY_REASON_CHARS)

    def ref(self, result: object) -> str | None:
        return f"topology.v{getattr(result, 'topology_version')}"  # noqa: B009


__all__ = ["ChangeTopology", "EdgeChange", "SetTopologyEdge"]
