"""The JSON Schema subset an action contract may use for its input and output, and its validator.

A contract is data that governance edits; what it can name is deliberately small, so that loading or
applying one can neither run code nor reach anything outside the value checked: no ``$ref`` (so no
retrieval of other documents), no ``pattern`` or ``format`` (no regular expressions to backtrack on), no
``default`` (a schema never writes into the value). The keywords:

* ``type``: ``object``, ``array``, ``string``, ``integer``, ``number``, ``boolean``, ``null`` (one name);
* objects: ``properties`` (name -> schema), ``required`` (names), ``additionalProperties`` (a boolean);
* arrays: ``items`` (a schema), ``maxItems``;
* strings: ``minLength``, ``maxLength``; numbers: ``minimum``, ``maximum``;
* any: ``enum`` (a list of values), ``description``.

:func:`check_schema` refuses anything else (the loader turns that into ``file:line: field`` errors);
:func:`violations` lists what a value breaks, each as (dotted path, reason). The walk is bounded by the
schema's depth (itself bounded by the YAML loader's depth limit), and values are already bounded by the
models that carry them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")
KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items", "maxItems", "minLength",
                      "maxLength", "minimum", "maximum", "enum", "description"})
_COUNTS = ("maxItems", "minLength", "maxLength")


class SchemaProblem(ValueError):
    """A schema that uses what the subset does not allow: ``path`` (keys inside the schema), ``reason``."""

    def __init__(self, path: tuple[str | int, ...], reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason


def check_schema(schema: Any, path: tuple[str | int, ...] = ()) -> None:
    """Raise :class:`SchemaProblem` unless ``schema`` is a schema of the subset (see the module docstring)."""
    if not isinstance(schema, dict):
        raise SchemaProblem(path, "a schema is a mapping")
    for key in schema:
        if key not in KEYWORDS:
            raise SchemaProblem((*path, str(key)), f"keyword {key!r} is not allowed in a contract schema "
                                                   f"(allowed: {', '.join(sorted(KEYWORDS))})")
    if "type" in schema and schema["type"] not in TYPES:
        raise SchemaProblem((*path, "type"), f"one of {', '.join(TYPES)}")
    for key in _COUNTS:
        if key in schema and (isinstance(schema[key], bool) or not isinstance(schema[key], int) or schema[key] < 0):
            raise SchemaProblem((*path, key), "a whole number >= 0")
    for key in ("minimum", "maximum"):
        if key in schema and (isinstance(schema[key], bool) or not isinstance(schema[key], int | float)):
            raise SchemaProblem((*path, key), "a number")
    _check_object_keywords(schema, path)
    if "items" in schema:
        check_schema(schema["items"], (*path, "items"))
    if "enum" in schema and not isinstance(schema["enum"], list):
        raise SchemaProblem((*path, "enum"), "a list of values")
    if "description" in schema and not isinstance(schema["description"], str):
        raise SchemaProblem((*path, "description"), "text")


def _check_object_keywords(schema: dict[str, Any], path: tuple[str | int, ...]) -> None:
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        raise SchemaProblem((*path, "properties"), "a mapping of property name to schema")
    for name, sub in props.items():
        check_schema(sub, (*path, "properties", str(name)))
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise SchemaProblem((*path, "required"), "a list of property names")
    if "additionalProperties" in schema and not isinstance(schema["additionalProperties"], bool):
        raise SchemaProblem((*path, "additionalProperties"), "true or false")


def violations(schema: dict[str, Any], value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every (path, reason) where ``value`` breaks ``schema`` (a schema :func:`check_schema` accepted)."""
    kind = schema.get("type")
    if kind is not None and not _is_type(kind, value):
        yield path, f"must be of type {kind}"
        return
    if "enum" in schema and value not in schema["enum"]:
        yield path, f"must be one of {schema['enum']!r}"[:300]
    if isinstance(value, dict):
        yield from _object_violations(schema, value, path)
    elif isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            yield path, f"at most {schema['maxItems']} items"
        if "items" in schema:
            for i, item in enumerate(value):
                yield from violations(schema["items"], item, f"{path}[{i}]")
    elif isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            yield path, f"at least {schema['minLength']} characters"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            yield path, f"at most {schema['maxLength']} characters"
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            yield path, f"at least {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            yield path, f"at most {schema['maximum']}"


def _object_violations(schema: dict[str, Any], value: dict[str, Any], path: str) -> Iterator[tuple[str, str]]:
    props: dict[str, Any] = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in value:
            yield _join(path, name), "is required"
    for name, item in value.items():
        if name in props:
            yield from violations(props[name], item, _join(path, str(name)))
        elif schema.get("additionalProperties", True) is False:
            yield _join(path, str(name)), "is not a property this contract accepts"


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _is_type(kind: str, value: Any) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    expected: dict[str, type | tuple[type, ...]] = {"object": dict, "array": list, "string": str,
                                                    "boolean": bool, "null": type(None)}
    return isinstance(value, expected[kind])


__all__ = ["KEYWORDS", "TYPES", "SchemaProblem", "check_schema", "violations"]
