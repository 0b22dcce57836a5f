"""Policy plans as SQL: a PDP's "which objects may this principal act on" turned into a WHERE clause.

A plan filter (``engine.policy.model``) is a small expression tree over resource attributes
(``request.resource.attr.<name>``, ``request.resource.id``). Each projected kind maps those attributes to
column expressions here, mirroring how ``engine.policy.attributes`` builds them for single checks (the
plan/check agreement tests hold the two together). A tree this module cannot translate raises
:class:`UntranslatablePlan`; the caller then falls back to batched single checks, never to "allow".

Two agents' plans often differ only by their values (``owner = 'a00001'`` against ``owner = 'a00002'``).
:func:`plan_binding` splits a plan into its *form* (operators, attributes, the type of each value, every
constant the SQL depends on) and its values in order, and :func:`plan_clause` with ``bound=True`` turns
those values into named bind parameters (``pv0``, ``pv1``, ...): one compiled statement then serves
every plan of that form, each call binding its own values (``store.reads`` compiles once per form).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from sqlalchemy import ColumnElement, Integer, and_, bindparam, case, false, func, literal, not_, or_, true
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
    """A plan's condition as SQL. ``bound``: each scalar value becomes the bind parameter ``pv<n>`` (``n`` in
    the order :func:`plan_binding` lists the values), else a literal."""

    def __init__(self, kind: str, *, bound: bool = False) -> None:
        if kind not in COLUMNS:
            raise UntranslatablePlan(f"no column mapping for kind {kind!r}")
        self.columns = COLUMNS[kind][1]
        self.bound = bound
        self.values: list[Any] = []

    def value(self, value: Any, type_: Any = None) -> Any:
        """A scalar plan value (already :func:`_plain`) in the statement; ``type_``: the type it is bound as
        (an IN list's elements take their column's, as SQLAlchemy gives a list; else the value's own)."""
        if not self.bound:
            return literal(value, type_)
        self.values.append(value)
        return bindparam(f"pv{len(self.values) - 1}", value, type_=type_)

    def operand(self, node: PlanOperand) -> Any:
        if isinstance(node, PlanValue):
            return self.value(_plain(node.value)) if not isinstance(node.value, list) else _plain(node.value)
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
            if not values:
                return false()
            column = self.operand(args[0])
            # each element as its column's type, literal or bound alike: a bare list would take the type of its
            # first element, and a list of mixed types (``[2.5, "alice"]``) then fails to bind
            return column.in_([self.value(v, column.type) for v in values])  # type: ignore[no-any-return]
        raise UntranslatablePlan(f"operator {op!r} with {len(args)} operands")

    def boolean(self, node: PlanOperand) -> Col[Any]:
        if isinstance(node, PlanValue) and isinstance(node.value, bool):
            return true() if node.value else false()
        value = self.operand(node)
        if isinstance(node, PlanVariable):
            return case((value == literal(True), true()), else_=false())
        return value  # type: ignore[no-any-return]


def plan_clause(kind: str, plan: PlanFilter, *, bound: bool = False) -> ColumnElement[bool]:
    """The WHERE clause selecting the rows of ``kind`` that ``plan`` allows. ``bound``: its values are the
    bind parameters ``pv0``, ``pv1``, ... that :func:`plan_binding` gives (the clause then serves every plan
    of the same form)."""
    if plan.kind == "always_allowed":
        return true()
    if plan.kind == "always_denied" or plan.condition is None:
        return false()
    translator = _Translator(kind, bound=bound)
    clause = translator.boolean(plan.condition)
    if bound and translator.values != plan_binding(kind, plan)[1]:
        raise AssertionError("plan_binding and the translator disagree")  # a programming error
    return clause


def plan_binding(kind: str, plan: PlanFilter) -> tuple[tuple[Any, ...], list[Any]]:
    """(the plan's form, its values): the values in the order ``plan_clause(kind, plan, bound=True)`` binds
    them as ``pv0``, ``pv1``, ...; the form holds everything else the statement depends on (the plan's kind,
    operators, variables, each bound value's type, every value written into the SQL as a constant). Two plans
    of one form give the same SQL text. A plan that is not SQL raises :class:`UntranslatablePlan` as
    :func:`plan_clause` would (only once it is compiled: the form of an untranslatable plan is still a form).

    Remembered for the plan object itself (the plan memo hands out one object per remembered plan, and a
    ``PlanFilter`` is immutable): the walk runs once per plan, not once per query."""
    key = (kind, id(plan))
    with _BINDINGS_LOCK:
        known = _BINDINGS.get(key)
        if known is not None and known[0] is plan:
            _BINDINGS.move_to_end(key)
            return known[1], list(known[2])
    form, values = _binding(kind, plan)
    with _BINDINGS_LOCK:
        _BINDINGS[key] = (plan, form, tuple(values))  # the plan kept: its id is not reused while it is here
        while len(_BINDINGS) > _BINDINGS_CAPACITY:
            _BINDINGS.popitem(last=False)
    return form, values


_BINDINGS: OrderedDict[tuple[str, int], tuple[PlanFilter, tuple[Any, ...], tuple[Any, ...]]] = OrderedDict()
_BINDINGS_CAPACITY = 8192
_BINDINGS_LOCK = threading.Lock()


def _binding(kind: str, plan: PlanFilter) -> tuple[tuple[Any, ...], list[Any]]:
    values: list[Any] = []
    if plan.kind in ("always_allowed", "always_denied") or plan.condition is None:
        return (plan.kind, plan.condition is None), values
    return (plan.kind, kind, _form(plan.condition, values, boolean=True)), values


def _form(node: PlanOperand, values: list[Any], *, boolean: bool = False) -> tuple[Any, ...]:
    """The form of ``node`` as :class:`_Translator` turns it into SQL (``boolean``: in a boolean position),
    appending its bound values to ``values`` in the order the translator binds them."""
    if isinstance(node, PlanValue):
        if boolean and isinstance(node.value, bool):
            return ("const", node.value)  # true() / false()
        if isinstance(node.value, list):
            return ("const", _constant(node.value))  # passed to SQLAlchemy as it is, as before
        value = _plain(node.value)
        values.append(value)
        return ("value", type(value).__name__)
    if isinstance(node, PlanVariable):
        return ("var", node.name, boolean)
    op, args = node.operator, node.operands
    if op in ("and", "or") or (op == "not" and len(args) == 1):
        return (op, *(_form(a, values, boolean=True) for a in args))
    if op == "in" and len(args) == 2 and isinstance(args[1], PlanValue) and isinstance(args[1].value, list):
        listed = _plain(args[1].value)
        if not listed:
            return ("in", ())  # false(): the first operand is not translated
        first = _form(args[0], values)
        values.extend(listed)
        return ("in", first, tuple(type(v).__name__ for v in listed))
    return (op, boolean, *(_form(a, values) for a in args))


def _constant(value: Any) -> Any:
    """A plan value as a hashable constant of a form (lists as tuples, types kept apart: 1, 1.0, True)."""
    if isinstance(value, list):
        return ("list", tuple(_constant(v) for v in value))
    return (type(value).__name__, value)


def table_of(kind: str) -> Any:
    return COLUMNS[kind][0]


__all__ = ["COLUMNS", "UntranslatablePlan", "plan_binding", "plan_clause", "table_of"]
