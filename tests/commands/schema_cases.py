"""Requests generated from a command's JSON schema: a valid minimal body, and for every limit the schema
states (maxLength, minLength, pattern, minimum, maximum, exclusiveMinimum, maxItems, minItems, enum,
x-max-bytes), a value just past it and, where one exists, a value exactly at it.

Nothing here knows a command: every case comes from the schema (nested models and list items included).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from engine.commands.fields import MAX_BYTES_KEYWORD
from engine.models.common import canonical_json
from tests.commands import regex_samples

Path = tuple[str | int, ...]
NOT_IN_ENUM = "zz-not-one-of-them"


@dataclass(frozen=True)
class Case:
    """One limit of one field: the value ``past()`` makes must be refused, the one ``at()`` makes (if any)
    accepted. Values are made on demand (some are 64 MiB)."""

    path: Path
    keyword: str
    past: Callable[[], Any]
    at: Callable[[], Any] | None = None

    @property
    def label(self) -> str:
        where = ".".join(str(p) for p in self.path)
        return f"{where}:{self.keyword}"


class Schema:
    """One command's JSON schema, with its ``$defs`` resolved."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.root = schema
        self.defs: dict[str, Any] = schema.get("$defs", {})

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = {**self.defs[node["$ref"].rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
        return node

    def branches(self, node: dict[str, Any]) -> list[dict[str, Any]]:
        """The non-null alternatives of a property (the property itself if it has none)."""
        node = self.resolve(node)
        if "anyOf" in node:
            return [self.resolve(b) for b in node["anyOf"] if b.get("type") != "null"]
        return [node]

    # -- valid values ------------------------------------------------------------------------------

    def minimal(self, node: dict[str, Any], variant: int = 0) -> Any:
        """A small valid value of ``node`` (``variant`` makes list items differ)."""
        node = self.branches(node)[0]
        if "const" in node:
            return node["const"]
        if "enum" in node:
            return node["enum"][variant % len(node["enum"])]
        kind = node.get("type")
        if kind == "string":
            if "pattern" in node:
                return regex_samples.nth(node["pattern"], variant)
            return "a" * max(node.get("minLength", 1), 1) + (str(variant) if variant else "")
        if kind == "integer":
            low = node.get("minimum", node.get("exclusiveMinimum", -1) + 1)
            return max(low, 0) if node.get("maximum", 1) >= 0 else low
        if kind == "number":
            return float(node.get("minimum", 1.0 if "exclusiveMinimum" in node else 0.0))
        if kind == "boolean":
            return True
        if kind == "array":
            return self.items(node, node.get("minItems", 0))
        if kind == "object":
            props = node.get("properties", {})
            return {name: self.minimal(props[name], variant) for name in node.get("required", [])}
        return None  # any JSON value

    def bases(self) -> Iterator[dict[str, Any]]:
        """The minimal body, then variants meeting rules across fields (a scope that needs an id, a kind that
        needs a recipient): each enum field at each of its values, alone and with every optional field
        filled in minimally."""
        body = self.minimal(self.root)
        props = self.root.get("properties", {})
        full = {**body, **{name: self.minimal(prop) for name, prop in props.items()
                           if name not in body and name != "effect"}}
        yield dict(body)
        yield full
        for name, prop in props.items():
            for value in self.branches(prop)[0].get("enum", []):
                yield {**body, name: value}
                yield {**full, name: value}

    def items(self, node: dict[str, Any], count: int) -> list[Any]:
        item = node.get("items", {})
        branch = self.branches(item)[0]
        if branch.get("type") == "string" and "pattern" in branch:
            return list(regex_samples.distinct(branch["pattern"], count)) if count else []
        return [self.minimal(item, i) for i in range(count)]

    # -- the limits ----------------------------------------------------------------------------------

    def cases(self) -> Iterator[Case]:
        yield from self._object_cases(self.root, ())

    def _object_cases(self, node: dict[str, Any], path: Path) -> Iterator[Case]:
        for name, prop in self.resolve(node).get("properties", {}).items():
            if name == "effect":
                continue
            for branch in self.branches(prop):
                yield from self._value_cases(branch, (*path, name))

    def _value_cases(self, node: dict[str, Any], path: Path) -> Iterator[Case]:
        kind = node.get("type")
        if "enum" in node:
            last = node["enum"][-1]
            yield Case(path, "enum", lambda: NOT_IN_ENUM, lambda: last)
        if kind == "string":
            yield from _string_cases(node, path)
        elif kind in ("integer", "number"):
            yield from _number_cases(node, path, kind == "integer")
        elif kind == "array":
            yield from self._array_cases(node, path)
        elif kind == "object":
            if MAX_BYTES_KEYWORD in node:
                size = node[MAX_BYTES_KEYWORD] - len(canonical_json({"k": ""}))
                yield Case(path, MAX_BYTES_KEYWORD, lambda: {"k": "a" * (size + 1)}, lambda: {"k": "a" * size})
            yield from self._object_cases(node, path)
        elif kind is None and MAX_BYTES_KEYWORD in node:  # any JSON value: a string of that size
            size = node[MAX_BYTES_KEYWORD] - len(canonical_json(""))
            yield Case(path, MAX_BYTES_KEYWORD, lambda: "a" * (size + 1), lambda: "a" * size)

    def _array_cases(self, node: dict[str, Any], path: Path) -> Iterator[Case]:
        if "maxItems" in node:
            most = node["maxItems"]
            yield Case(path, "maxItems", lambda: self.items(node, most + 1), lambda: self.items(node, most))
        if node.get("minItems", 0) > 0:
            least = node["minItems"]
            yield Case(path, "minItems", lambda: self.items(node, least - 1), lambda: self.items(node, least))
        for branch in self.branches(node.get("items", {})):
            yield from self._value_cases(branch, (*path, 0))

    # -- bodies --------------------------------------------------------------------------------------

    def body(self, base: dict[str, Any], case_path: Path, value: Any) -> dict[str, Any]:
        """``base`` with ``value`` at ``case_path`` (containers on the way built minimally)."""
        body = copy.deepcopy(base)
        target: Any = body
        node: dict[str, Any] = self.root
        for step, key in enumerate(case_path[:-1]):
            node = self._child(node, key)
            following = case_path[step + 1]
            if isinstance(key, int):
                while len(target) <= key:
                    target.append(self.minimal(node))
                target = target[key]
                continue
            if key not in target or target[key] is None:
                target[key] = [] if isinstance(following, int) else self.minimal(node)
            target = target[key]
        last = case_path[-1]
        if isinstance(last, int):
            while len(target) <= last:
                target.append(None)
        target[last] = value
        return body

    def _child(self, node: dict[str, Any], key: str | int) -> dict[str, Any]:
        for branch in self.branches(node):
            if isinstance(key, int) and branch.get("type") == "array":
                return self.resolve(branch.get("items", {}))
            if isinstance(key, str) and key in branch.get("properties", {}):
                return branch["properties"][key]
        raise KeyError(key)


def _string_cases(node: dict[str, Any], path: Path) -> Iterator[Case]:
    pattern = node.get("pattern")
    anchored = pattern is not None and pattern.startswith("^") and pattern.endswith("$")

    def fill(n: int) -> str | None:
        if pattern and anchored:
            return regex_samples.sample(pattern, n)
        text = "a" * n  # an unanchored pattern is searched for (JSON Schema, pydantic): a plain filler may do
        return text if not pattern or re.search(pattern, text) else None

    def maybe(value: str | None) -> Callable[[], Any] | None:
        return None if value is None else (lambda: value)

    if "maxLength" in node and not pattern:  # made on demand: a maxLength may be 64 Mi characters
        most = node["maxLength"]
        yield Case(path, "maxLength", lambda: "a" * (most + 1), lambda: "a" * most)
    elif "maxLength" in node:
        most = node["maxLength"]
        past = fill(most + 1) or regex_samples.overlong(pattern) or "a" * (most + 1)
        yield Case(path, "maxLength", lambda: past, maybe(fill(most)))
    if node.get("minLength", 0) > 0:
        least = node["minLength"]
        yield Case(path, "minLength", lambda: "a" * (least - 1), maybe(fill(least)))
    if pattern and not anchored:
        if not re.search(pattern, ""):
            yield Case(path, "pattern-empty", lambda: "", maybe(fill(1)))
    elif pattern:
        too_long = regex_samples.overlong(pattern)
        if too_long is not None:
            yield Case(path, "pattern", lambda: too_long, maybe(regex_samples.longest(pattern)))
        if regex_samples.sample(pattern, 0) is None:
            short = regex_samples.shortest(pattern)
            yield Case(path, "pattern-empty", lambda: "", lambda: short)
    if MAX_BYTES_KEYWORD in node:
        limit = node[MAX_BYTES_KEYWORD]
        yield Case(path, MAX_BYTES_KEYWORD, lambda: "a" * (limit + 1), lambda: "a" * limit)
        # two-byte characters: over in bytes while well under any character count
        yield Case(path, f"{MAX_BYTES_KEYWORD}-utf8", lambda: "\u00e9" * (limit // 2) + "a" * (limit % 2 + 1),
                   lambda: "\u00e9" * (limit // 2) + "a" * (limit % 2))


def _number_cases(node: dict[str, Any], path: Path, integer: bool) -> Iterator[Case]:
    def below(x: float) -> float:
        return x - 1 if integer else math.nextafter(x, -math.inf)

    def above(x: float) -> float:
        return x + 1 if integer else math.nextafter(x, math.inf)

    for keyword, past, at in (("minimum", below, None), ("maximum", above, None),
                              ("exclusiveMinimum", None, above), ("exclusiveMaximum", None, below)):
        if keyword in node:
            bound = node[keyword]
            bad = past(bound) if past else bound
            good = at(bound) if at else bound
            yield Case(path, keyword, lambda bad=bad: bad, lambda good=good: good)


__all__ = ["Case", "Schema"]
