"""The versioned collaboration topology. Every change makes a new topology version (serialised by the
primary key of ``topology_versions``: two concurrent changes cannot both become version N+1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel

from engine.commands.topology import ChangeTopology, EdgeChange, SetTopologyEdge
from engine.errors import AlreadyExists, InvalidInput, VersionConflict
from engine.models.common import Model
from engine.models.topology import Topology, TopologyEdge
from engine.policy.enforcement import Check
from engine.validation import build
from engine.world.core import Cause, Plan, WorldCore
from store import Change, Insert, Update

R = TypeVar("R", bound=BaseModel)


class TopologyCommit(Model):
    version: int
    edges: list[TopologyEdge]


class TopologyCalls(WorldCore):
    def change_topology(self, actor: str, changes: list[dict[str, object]] | list[EdgeChange], *,
                        expected_topology_version: int | None = None, reason: str = "",
                        op_id: str | None = None, cause: Cause | None = None) -> TopologyCommit:
        """Propose, validate and commit several edge changes as ONE new topology version. Invariants,
        checked before anything is written (``InvalidInput`` naming the change): no self-edge, no edge
        changed twice, both ends registered agents that are not unregistered, and deactivating only an
        edge that exists. With ``expected_topology_version`` the transaction applies only on that version
        (else ``VersionConflict`` with the current one)."""
        if not isinstance(changes, list | tuple):
            raise InvalidInput("changes", f"must be a list of edge changes, not {type(changes).__name__}")
        req = build(ChangeTopology, changes=[c.model_dump() if isinstance(c, EdgeChange) else c for c in changes],
                    expected_topology_version=expected_topology_version, reason=reason)
        return self._topology_write("change_topology", actor, req, lambda now: self._plan_topology(actor, req, now),
                                    TopologyCommit, op_id, cause)

    def _plan_topology(self, actor: str, req: ChangeTopology, now: int) -> Plan:
        current = self._store.read.topology_version()
        if req.expected_topology_version is not None and req.expected_topology_version != current:
            raise VersionConflict("topology", "world", req.expected_topology_version, current)
        new_version = current + 1
        seen: set[tuple[str, str, str]] = set()
        out: list[Change] = [Insert("topology_versions", {"version": new_version, "created_by": actor,
                                                          "reason": req.reason, "created_at_us": now},
                                    "topology", str(new_version))]
        edges: list[TopologyEdge] = []
        for n, c in enumerate(req.changes):
            where = f"changes[{n}]"
            key = {"source_agent": c.source_agent, "target_agent": c.target_agent, "edge_type": c.edge_type.value}
            ident = f"{c.source_agent}->{c.target_agent}:{c.edge_type.value}"
            if c.source_agent == c.target_agent:
                raise InvalidInput(where, f"{ident}: an agent has no edge to itself")
            if (triple := (c.source_agent, c.target_agent, c.edge_type.value)) in seen:
                raise InvalidInput(where, f"{ident} is changed twice in one transaction")
            seen.add(triple)
            for agent in (c.source_agent, c.target_agent):
                row = self._row("agents", "agent", agent, agent_id=agent)
                if row.get("unregistered_at_us") or row["status"] == "unregistered":
                    raise InvalidInput(where, f"{agent} is unregistered")
            existing = self._store.read.get("topology_edges", **key)
            if existing is None and not c.active:
                raise InvalidInput(where, f"{ident} does not exist: nothing to deactivate")
            values = {"scope": c.scope, "weight": c.weight, "active": c.active, "topology_version": new_version,
                      "updated_at_us": now}
            edge = TopologyEdge(**key, **values, version=existing["version"] + 1 if existing else 1)
            out.append(Update("topology_edges", key, existing["version"], values, "topology_edge", ident)
                       if existing else Insert("topology_edges", edge.model_dump(mode="json"), "topology_edge", ident))
            edges.append(edge)
        return Plan("topology.changed", "topology", f"v{new_version}", TopologyCommit(version=new_version, edges=edges),
                    out, checks=[Check("topology", "world", "write")],
                    payload={"reason": req.reason, "edges": len(edges)}, base_version=current,
                    resulting_version=new_version, topology_version=new_version)

    def set_topology_edge(self, actor: str, source_agent: str, target_agent: str, edge_type: str, *,
                          scope: str = "", weight: float = 1.0, active: bool = True,
                          expected_topology_version: int | None = None, reason: str = "",
                          op_id: str | None = None, cause: Cause | None = None) -> TopologyEdge:
        """Add, change or deactivate one edge, as a new topology version. With
        ``expected_topology_version`` the change applies only on that version (else ``VersionConflict``)."""
        req = build(SetTopologyEdge, source_agent=source_agent, target_agent=target_agent, edge_type=edge_type,
                    scope=scope, weight=weight, active=active,
                    expected_topology_version=expected_topology_version, reason=reason)
        return self._topology_write("set_topology_edge", actor, req, lambda now: self._plan_edge(actor, req, now),
                                    TopologyEdge, op_id, cause)

    def _topology_write(self, command: str, actor: str, req: Model, plan: Callable[[int], Plan], result: type[R],
                        op_id: str | None, cause: Cause | None) -> R:
        """A topology write: two writers racing for version N+1 collide on ``topology_versions``; the loser
        gets a ``VersionConflict`` carrying the current version."""
        try:
            return self._write(command, actor, req, plan, result, op_id=op_id, cause=cause)
        except AlreadyExists as exc:
            if exc.kind != "topology":
                raise
            current = self._store.read.topology_version()
            raise VersionConflict("topology", "world", current - 1, current) from exc

    def _plan_edge(self, actor: str, req: SetTopologyEdge, now: int) -> Plan:
        for agent in (req.source_agent, req.target_agent):
            self._row("agents", "agent", agent, agent_id=agent)
        current = self._store.read.topology_version()
        if req.expected_topology_version is not None and req.expected_topology_version != current:
            raise VersionConflict("topology", "world", req.expected_topology_version, current)
        new_version = current + 1
        key = {"source_agent": req.source_agent, "target_agent": req.target_agent,
               "edge_type": req.edge_type.value}
        existing = self._store.read.get("topology_edges", **key)
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
        edges = [TopologyEdge.model_validate(r) for r in self._store.read.rows("topology_edges", where)]
        return Topology(version=self._store.read.topology_version(), edges=edges)


__all__ = ["EdgeChange", "TopologyCalls", "TopologyCommit"]
