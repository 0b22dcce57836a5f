"""Policy plans as SQL: a PDP's "which objects may this principal act on" turned into a WHERE clause.

A plan filter (``engine.policy.model``) is a small expression tree over resource attributes
(``request.resource.attr.<name>``, ``request.resource.id``). Each projected kind maps those attributes to
column expressions here, mirroring how ``engine.policy.attributes`` builds them for single checks (the
plan/check agreement tests hold the two together). A tree this module cannot translate raises
:class:`UntranslatablePlan`; the caller then falls back to batched single checks, never to "allow".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import ColumnElement, Integer, and_, case, false, func, literal, not_, or_, true
from sqlalchemy.sql.expression import ColumnElement as Col

from engine.policy.model import PlanExpression, PlanFilter, PlanOperand, PlanValue, PlanVariable
from store.schema import agents, artifacts, handoffs, memory, receipts, rooms, state_entries, tasks, wakes


class UntranslatablePlan(Exception):
    """The plan uses an operator or attribute this module does not map to SQL."""


def _text(col: Any) -> Col[Any]:
    return func.coalesce(col, literal(""))


def _sensitivity(json_col: Any) -> Col[Any]:
    return func.coalesce(json_col["sensitivity"].as_integer(), literal(0, Integer))


# kind -> (table, attribute -> column expression); mirrors engine/policy/attributes.py
COLUMNS: dict[str, tuple[Any, dict[str, Col[Any]]]] = {
    "agent": (agents, {"id": agents.c.agent_id, "owner": agents.c.agent_id, "status": agents.c.status}),
    "state": (state_entries, {"id": state_entries.c.key}),
    "task": (tasks, {"id": tasks.c.task_id, "owner": tasks.c.owner_agent, "assignee": _text(tasks.c.assignee),
                     "task_id": tasks.c.task_id, "status": tasks.c.status,
                     "sensitivity": _sensitivity(tasks.c.constraints)}),
    "artifact": (artifacts, {"id": artifacts.c.artifact_id, "owner": artifacts.c.owner,
                             "task_id": _text(artifacts.c.task_id), "status": artifacts.c.status}),
    "memory": (memory, {"id": memory.c.memory_id, "owner": memory.c.owner, "room": _text(memory.c.room_id),
                        "scope": memory.c.scope, "status": memory.c.status, "reviewer": _text(memory.c.reviewer),
                        "sensitivity": _sensitivity(memory.c.permission_scope)}),
    "wake": (wakes, {"id": wakes.c.wake_id, "owner": wakes.c.target_agent, "status": wakes.c.status,
                     "task_id": _text(wakes.c.payload["task_id"].as_string())}),
    "handoff": (handoffs, {"id": handoffs.c.handoff_id, "owner": handoffs.c.source_agent,
                           "assignee": handoffs.c.target_agent, "task_id": handoffs.c.task_id,
                           "status": handoffs.c.status}),
    "receipt": (receipts, {"id": receipts.c.receipt_id, "owner": receipts.c.agent_id,
                           "task_id": _text(receipts.c.task_id)}),
    "room": (rooms, {"id": rooms.c.room_id, "owner": rooms.c.opened_by, "room": rooms.c.room_id,
                     "status": rooms.c.status}),
}
DEFAULTS: dict[str, Any] = {"owner": "", "assignee": "", "task_id": "", "room": "", "scope": "", "status": "",
                            "reviewer": "", "sensitivity": 0, "side_effect": "S0"}

_COMPARE: dict[str, Callable[[Any, Any], Col[Any]]] = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


def _plain(value: Any) -> Any:
    """Cerbos sends numbers as floats; integral ones compare as integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


class _Translator:
    def __init__(self, kind: str) -> None:
        if kind not in COLUMNS:
            raise UntranslatablePlan(f"no column mapping for kind {kind!r}")
        self.columns = COLUMNS[kind][1]

    def operand(self, node: PlanOperand) -> Any:
        if isinstance(node, PlanValue):
            return literal(_plain(node.value)) if not isinstance(node.value, list) else _plain(node.value)
        if isinstance(node, PlanVariable):
            return self.variable(node.name)
        return self.expression(node)

    def variable(self, name: str) -> Any:
        if name == "request.resource.id":
            return self.columns["id"]
        prefix = "request.resource.attr."
        if not name.startswith(prefix):
            raise UntranslatablePlan(f"variable {name!r}")
        attr = name[len(prefix):]
        if attr in self.columns:
            return self.columns[attr]
        if attr in DEFAULTS:  # an attribute this kind always sends as its default
            return literal(DEFAULTS[attr])
        raise UntranslatablePlan(f"attribute {attr!r}")

    def expression(self, node: PlanExpression) -> Col[Any]:
        op, args = node.operator, node.operands
        if op == "and":
            return and_(*(self.boolean(a) for a in args))
        if op == "or":
            return or_(*(self.boolean(a) for a in args))
        if op == "not" and len(args) == 1:
            return not_(self.boolean(args[0]))
        if op in _COMPARE and len(args) == 2:
            return _COMPARE[op](self.operand(args[0]), self.operand(args[1]))
        if op == "in" and len(args) == 2 and isinstance(args[1], PlanValue) and isinstance(args[1].value, list):
            values = _plain(args[1].value)
            return self.operand(args[0]).in_(values) if values else false()
        raise UntranslatablePlan(f"operator {op!r} with {len(args)} operands")

    def boolean(self, node: PlanOperand) -> Col[Any]:
        if isinstance(node, PlanValue) and isinstance(node.value, bool):
            return true() if node.value else false()
        value = self.operand(node)
        if isinstance(node, PlanVariable):
            return case((value == literal(True), true()), else_=false())
        return value  # type: ignore[no-any-return]


def plan_clause(kind: str, plan: PlanFilter) -> ColumnElement[bool]:
    """The WHERE clause selecting the rows of ``kind`` that ``plan`` allows."""
    if plan.kind == "always_allowed":
        return true()
    if plan.kind == "always_denied" or plan.condition is None:
        return false()
    return _Translator(kind).boolean(plan.condition)


def table_of(kind: str) -> Any:
    return COLUMNS[kind][0]


__all__ = ["COLUMNS", "UntranslatablePlan", "plan_clause", "table_of"]
