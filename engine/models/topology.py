"""The layered, versioned collaboration topology (which is not the authority graph)."""

from __future__ import annotations

from pydantic import Field

from engine.models.common import Id, Model, TimeUs, Version
from engine.models.enums import EdgeType


class TopologyEdge(Model):
    source_agent: Id
    target_agent: Id
    edge_type: EdgeType
    scope: str = Field(default="", max_length=200)
    weight: float = Field(default=1.0, ge=0.0, le=1_000_000.0)
    active: bool
    topology_version: int = Field(ge=1)
    updated_at_us: TimeUs
    version: Version


class Topology(Model):
    """The topology at one version: every run records the ``version`` it saw."""

    version: int = Field(ge=0)
    edges: list[TopologyEdge]


__all__ = ["EdgeType", "Topology", "TopologyEdge"]
