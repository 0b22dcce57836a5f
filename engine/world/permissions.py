"""What an agent may do: every action on an object in one PDP call, and invoking a capability.

``allowed_actions`` answers "what may I do to X" (and a batch form for many objects); ``invoke`` asks
the PDP before a capability or tool is used and records the use. An S3 (irreversible, external) side
effect additionally needs an approval (``engine.world.approvals``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field

from engine.errors import InvalidInput, NotFound
from engine.models.common import Id, Model, Payload
from engine.policy.enforcement import Check
from engine.policy.model import ACTIONS, KINDS
from engine.validation import build, check_id
from engine.world.approvals import ApprovalCalls
from engine.world.core import Cause, Plan
from store import STATE_TABLE_KEYS

# kind -> (table, key column) for kinds whose objects are rows; the key comes from the schema
OBJECT_TABLES: dict[str, tuple[str, str]] = {
    kind: (table, STATE_TABLE_KEYS[table][0]) for kind, table in {
        "agent": "agents", "state": "state_entries", "task": "tasks", "artifact": "artifacts",
        "memory": "memory", "wake": "wakes", "handoff": "handoffs", "receipt": "receipts", "room": "rooms",
        "message": "deliveries", "approval": "approvals"}.items()
}
SIDE_EFFECTS = ("S0", "S1", "S2", "S3")


class AllowedActions(Model):
    """Every action of the object's kind, allowed or not, under ``policy_epoch``."""

    kind: str
    id: str
    allowed: list[str]
    denied: list[str]
    policy_epoch: str | None
    derived_roles: list[str] = Field(default_factory=list)


class Invocation(Model):
    kind: str
    id: str = Field(min_length=1, max_length=300)
    side_effect: str = Field(default="S0", pattern=r"^S[0-3]$")
    payload: Payload = Field(default_factory=dict)
    approval_id: Id | None = None


class Invoked(Model):
    """A permitted use of a capability, recorded in the log; ``policy_epoch`` names the deciding policy."""

    kind: str
    id: str
    side_effect: str
    policy_epoch: str | None
    approval_id: str | None = None


class PermissionCalls(ApprovalCalls):
    def _object_row(self, kind: str, ident: str) -> dict[str, Any] | None:
        if kind not in KINDS:
            raise InvalidInput("kind", f"{kind!r} is not one of: {', '.join(KINDS)}")
        if kind not in OBJECT_TABLES:
            return None  # topology, channel, tool: no row
        table, key = OBJECT_TABLES[kind]
        return self._row(table, kind, ident, **{key: ident})

    def _object_rows(self, objects: Sequence[tuple[str, str]]) -> list[tuple[str, str, dict[str, Any] | None]]:
        """The rows of many objects: one IN query per kind; ``NotFound`` for the first missing one."""
        wanted: dict[str, set[str]] = {}
        for kind, ident in objects:
            if kind not in KINDS:
                raise InvalidInput("kind", f"{kind!r} is not one of: {', '.join(KINDS)}")
            if kind in OBJECT_TABLES:
                wanted.setdefault(kind, set()).add(ident)
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for kind, idents in wanted.items():
            table, key = OBJECT_TABLES[kind]
            for row in self.store.read.rows(table, {key: sorted(idents)}):
                found[(kind, str(row[key]))] = row
        out: list[tuple[str, str, dict[str, Any] | None]] = []
        for kind, ident in objects:
            if kind in OBJECT_TABLES and (kind, ident) not in found:
                raise NotFound(kind, ident)
            out.append((kind, ident, found.get((kind, ident))))
        return out

    def allowed_actions(self, actor: str, kind: str, ident: str) -> AllowedActions:
        """Every action ``actor`` may or may not take on one object, in one PDP call."""
        return self.allowed_actions_batch(actor, [(kind, ident)])[0]

    def allowed_actions_batch(self, actor: str, objects: Sequence[tuple[str, str]]) -> list[AllowedActions]:
        """``allowed_actions`` for many objects: one PDP request per principal context (objects of a task
        delegated to ``actor`` are decided with its attenuated authority) and per 500 objects."""
        check_id("actor", actor)
        if len(objects) > 10_000:
            raise InvalidInput("objects", f"{len(objects)} objects; at most 10000 per call")
        loaded = self._object_rows([(kind, str(ident)) for kind, ident in objects])
        decisions = self.policy.decide_actions(actor, loaded)
        return [AllowedActions(kind=d.kind, id=d.id, allowed=sorted(a for a, ok in d.actions.items() if ok),
                               denied=sorted(a for a, ok in d.actions.items() if not ok), policy_epoch=d.epoch,
                               derived_roles=d.derived_roles) for d in decisions]

    def invoke(self, actor: str, kind: str, ident: str, *, side_effect: str = "S0",
               payload: dict[str, Any] | None = None, approval_id: str | None = None, op_id: str | None = None,
               cause: Cause | None = None) -> Invoked:
        """Ask the PDP before using a capability (a tool, or memory/state/artifact as an input) and record
        the use. ``S3`` needs an approval bound to exactly this invocation (see ``approvals``)."""
        req = build(Invocation, kind=kind, id=ident, side_effect=side_effect, payload=payload or {},
                    approval_id=approval_id)
        if "invoke" not in ACTIONS.get(req.kind, {}):
            raise InvalidInput("kind", f"{req.kind!r} cannot be invoked; one of: "
                               f"{', '.join(k for k, a in ACTIONS.items() if 'invoke' in a)}")

        def plan(now: int) -> Plan:
            row = self._object_row(req.kind, req.id)
            extra = [self._spend_approval(actor, req.approval_id, req.kind, req.id, req.payload, now)
                     ] if req.side_effect == "S3" else []
            result = Invoked(kind=req.kind, id=req.id, side_effect=req.side_effect, policy_epoch=None,
                             approval_id=req.approval_id)
            return Plan("capability.invoked", req.kind, req.id, result, extra,
                        payload={"side_effect": req.side_effect, "approval_id": req.approval_id},
                        checks=[Check(req.kind, req.id, "invoke", row, req.side_effect)])
        done = self._write("invoke", actor, req, plan, Invoked, op_id=op_id, cause=cause)
        return done.model_copy(update={"policy_epoch": self._current_epoch_name()})

