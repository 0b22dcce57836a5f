"""The condition language of rule files, compiled to durable_rules' JSON ruleset format.

A rule's ``when`` is an ordered mapping ``alias -> pattern``; all patterns must match, each a different
fact. ``unless`` (optional) lists patterns no fact may match (negation). A pattern is a mapping
``field -> test``; every pattern names its fact ``kind`` with a literal, and may only test fields that kind
has (a typo is an error, not a rule that silently never fires). ``id`` and ``sid`` are reserved.

Tests::

    field: value               equal
    field: {eq: v}             equal            field: {ne: v}     not equal
    field: {lt: v} {lte: v}    less (or equal)  field: {gt: v} {gte: v}
    field: {in: [v1, v2]}      one of (literals or constants)
    field: {exists: true}      present (false: absent)

Several operators in one mapping all apply (``{gte: 1, lt: 5}``). A value is a literal scalar, ``$name``
(a constant of the file) or ``@alias.field`` (the field of a pattern earlier in ``when``; fields may be
dotted, e.g. ``@ev.payload.term``). Literal strings cannot start with ``$`` or ``@``.

Compilation: a pattern becomes ``{"$and": [tests]}`` (or the single test); ``ne`` -> ``$neq``,
``in`` -> ``$or`` of equalities, ``exists`` -> ``$ex``/``$nex``, a reference -> ``{alias: field}``;
``unless`` patterns become ``alias$not`` entries after the ``when`` entries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.controller.facts import ALL_KINDS, field_allowed, kind_fields

RulePath = tuple[str | int, ...]
RESERVED_FIELDS = frozenset({"id", "sid"})
_COMPARE = {"eq": None, "ne": "$neq", "lt": "$lt", "lte": "$lte", "gt": "$gt", "gte": "$gte"}
OPERATORS = (*_COMPARE, "in", "exists")


class ConditionError(Exception):
    """A problem at ``path`` (relative to the rule) in a rule's conditions."""

    def __init__(self, path: RulePath, reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason


def resolve_constant(raw: Any, constants: Mapping[str, Any], path: RulePath) -> Any:
    """``$name`` -> the file constant ``name``; anything else unchanged."""
    if isinstance(raw, str) and raw.startswith("$"):
        name = raw[1:]
        if name not in constants:
            known = ", ".join(sorted(constants)) or "none"
            raise ConditionError(path, f"unknown constant {raw!r} (constants: {known})")
        return constants[name]
    return raw


def check_field(kind: str, field: str, path: RulePath, what: str = "field") -> None:
    """Raise unless a rule may use ``field`` of a fact of ``kind``."""
    if field in RESERVED_FIELDS:
        raise ConditionError(path, f"{what} {field!r} is reserved by durable_rules; join on 'key' instead")
    if not field_allowed(kind, field):
        fields = ", ".join(sorted(kind_fields(kind) or ()))
        extra = " (or payload.<name>)" if kind == "event" else ""
        raise ConditionError(path, f"fact kind {kind!r} has no {what} {field!r} (fields: {fields}{extra})")


def parse_ref(ref: str, scope: Mapping[str, str], path: RulePath) -> tuple[str, str]:
    """``alias.field`` -> (alias, field), checked against the aliases in ``scope`` (alias -> kind)."""
    alias, dot, field = ref.partition(".")
    if not dot or not field:
        raise ConditionError(path, f"{ref!r} is not a reference of the form alias.field")
    if alias not in scope:
        known = ", ".join(scope) or "none"
        raise ConditionError(path, f"reference {ref!r} names unknown alias {alias!r} (known here: {known})")
    check_field(scope[alias], field, path)
    return alias, field


def _value(raw: Any, ctx: _Context, path: RulePath, *, refs: bool = True) -> Any:
    raw = resolve_constant(raw, ctx.constants, path)
    if isinstance(raw, str) and raw.startswith("@"):
        if not refs:
            raise ConditionError(path, f"a reference ({raw!r}) is not allowed here")
        alias, field = parse_ref(raw[1:], ctx.scope, path)
        return {alias: field}
    if raw is None or not isinstance(raw, str | int | float | bool):
        raise ConditionError(path, f"expected a scalar value, got {type(raw).__name__} {raw!r}")
    return raw


class _Context:
    def __init__(self, constants: Mapping[str, Any], scope: Mapping[str, str]) -> None:
        self.constants = constants
        self.scope = scope


def _operator(field: str, op: Any, raw: Any, ctx: _Context, path: RulePath) -> dict[str, Any]:
    here = (*path, str(op))
    if op in _COMPARE:
        value = _value(raw, ctx, here)
        name = _COMPARE[op]
        return {field: value} if name is None else {name: {field: value}}
    if op == "in":
        raw = resolve_constant(raw, ctx.constants, here)
        if not isinstance(raw, list) or not raw:
            raise ConditionError(here, "'in' needs a non-empty list")
        return {"$or": [{field: _value(v, ctx, (*here, i), refs=False)} for i, v in enumerate(raw)]}
    if op == "exists":
        if not isinstance(raw, bool):
            raise ConditionError(here, "'exists' takes true or false")
        return {"$ex" if raw else "$nex": {field: 1}}
    raise ConditionError(here, f"unknown operator {op!r} (operators: {', '.join(OPERATORS)})")


def pattern_kind(pattern: Any, path: RulePath) -> str:
    """The literal ``kind`` a pattern names (every pattern must name one)."""
    if not isinstance(pattern, Mapping) or not pattern:
        raise ConditionError(path, "a pattern is a non-empty mapping of field -> test")
    kind = pattern.get("kind")
    if not isinstance(kind, str):
        raise ConditionError((*path, "kind"), "every pattern needs a literal 'kind' (e.g. kind: task)")
    if kind_fields(kind) is None:
        raise ConditionError((*path, "kind"), f"unknown fact kind {kind!r} (kinds: {', '.join(ALL_KINDS)})")
    return kind


def compile_pattern(pattern: Mapping[str, Any], kind: str, constants: Mapping[str, Any],
                    scope: Mapping[str, str], path: RulePath) -> dict[str, Any]:
    """One pattern -> durable_rules match expression. ``scope``: the aliases it may refer to."""
    ctx = _Context(constants, scope)
    tests: list[dict[str, Any]] = []
    for field, spec in pattern.items():
        here = (*path, field)
        check_field(kind, str(field), here)
        if isinstance(spec, Mapping):
            if not spec:
                raise ConditionError(here, "an operator mapping needs at least one operator")
            tests.extend(_operator(str(field), op, raw, ctx, here) for op, raw in spec.items())
        else:
            tests.append({str(field): _value(spec, ctx, here)})
    return tests[0] if len(tests) == 1 else {"$and": tests}


def compile_conditions(when: Mapping[str, Any], unless: Mapping[str, Any],
                       constants: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """A rule's ``when``/``unless`` -> the durable ``all`` list and the ``when`` aliases' kinds."""
    scope: dict[str, str] = {}
    entries: list[dict[str, Any]] = []
    for alias, pattern in when.items():
        path: RulePath = ("when", alias)
        kind = pattern_kind(pattern, path)
        entries.append({alias: compile_pattern(pattern, kind, constants, dict(scope), path)})
        scope[alias] = kind
    for alias, pattern in unless.items():
        path = ("unless", alias)
        if alias in scope:
            raise ConditionError(path, f"alias {alias!r} is already used in 'when'")
        kind = pattern_kind(pattern, path)
        entries.append({f"{alias}$not": compile_pattern(pattern, kind, constants, dict(scope), path)})
    return entries, scope


def refs_in(value: Any) -> Sequence[str]:
    """The field references held by an action parameter (a string or a list of strings)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


__all__ = [
    "OPERATORS",
    "RESERVED_FIELDS",
    "ConditionError",
    "RulePath",
    "check_field",
    "compile_conditions",
    "compile_pattern",
    "parse_ref",
    "pattern_kind",
    "refs_in",
    "resolve_constant",
]
