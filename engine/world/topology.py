"""The versioned collaboration topology. Every change makes a new topology version (serialised by the
primary key of ``topology_versions``: two concurrent changes cannot both become version N+1)."""

from __future__ import annotations

from pydantic import Field

from engine.errors import AlreadyExists, VersionConflict
from engine.models.common import Id, Model
from engine.models.topology import EdgeType, Topology, TopologyEdge
from engine.policy.enforcement import Check
from engine.validation import build
from engine.world.core import Cause, Plan, WorldCore
from store import Change, Insert, Update


class SetEdge(Model):
    source_agent: Id
    target_agent: Id
    edge_type: EdgeType
    scope: str = Field(default="", max_length=200)
    weight: float = Field(default=1.0, ge=0.0, le=1_000_000.0)
    active: bool = True
    expected_topology_version: int | None = Field(default=None, ge=0)
    reason: str = Field(default="", max_length=500)


class TopologyCalls(WorldCore):
    def set_topology_edge(self, actor: str, source_agent: str, target_agent: str, edge_type: str, *,
                          scope: str = "", weight: float = 1.0, active: bool = True,
                          expected_topology_version: int | None = None, reason: str = "",
                          op_id: str | None = None, cause: Cause | None = None) -> TopologyEdge:
        """Add, change or deactivate one edge, as a new topology version. With
        ``expected_topology_version`` the change applies only on that version (else ``VersionConflict``)."""
        req = build(SetEdge, source_agent=source_agent, target_agent=target_agent, edge_type=edge_type,
                    scope=scope, weight=weight, active=active,
                    expected_topology_version=expected_topology_version, reason=reason)
        try:
            return self._write("set_topology_edge", actor, req, lambda now: self._plan_edge(actor, req, now),
                               TopologyEdge, op_id=op_id, cause=cause)
        except AlreadyExists as exc:
            if exc.kind != "topology":
                raise
            current = self.store.read.topology_version()
            raise VersionConflict("topology", "world", current - 1, current) from exc

    def _plan_edge(self, actor: str, req: SetEdge, now: int) -> Plan:
        for agent in (req.source_agent, req.target_agent):
            self._row("agents", "agent", agent, agent_id=agent)
        current = self.store.read.topology_version()
        if req.expected_topology_version is not None and req.expected_topology_version != current:
            raise VersionConflict("topology", "world", req.expected_topology_version, current)
        new_version = current + 1
        key = {"source_agent": req.source_agent, "target_agent": req.target_agent,
               "edge_type": req.edge_type.value}
        existing = self.store.read.get("topology_edges", **key)
        values = {"scope": req.scope, "weight": req.weight, "active": req.active,
                  "topology_version": new_version, "updated_at_us": now}
        edge = TopologyEdge(**key, **values, version=existing["version"] + 1 if existing else 1)
        ident = f"{req.source_agent}->{req.target_agent}:{req.edge_type.value}"
        changes: list[Change] = [Insert("topology_versions", {"version": new_version, "created_by": actor,
                                                              "reason": req.reason, "created_at_us": now},
                                        "topology", str(new_version))]
        changes.append(Update("topology_edges", key, existing["version"], values, "topology_edge", ident)
                       if existing else Insert("topology_edges", edge.model_dump(mode="json"), "topology_edge",
                                               ident))
        return Plan("topology.changed", "topology", ident, edge, changes, checks=[Check("topology", "world", "write")],
                    payload={"reason": req.reason, "active": req.active}, base_version=current,
                    resulting_version=new_version, topology_version=new_version)

    def get_topology(self, *, include_inactive: bool = False, actor: str | None = None) -> Topology:
        """The current topology and its version (every run records the version it saw)."""
        self._may_read(actor, "topology", "world", {})
        where = {} if include_inactive else {"active": True}
        edges = [TopologyEdge.model_validate(r) for r in self.store.read.rows("topology_edges", where)]
        return Topology(version=self.store.read.topology_version(), edges=edges)
