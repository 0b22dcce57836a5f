"""Boundary validation: build a pydantic model or raise the typed :class:`InvalidInput` family."""

from __future__ import annotations

import json
import re
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError

from engine.errors import InvalidInput, PayloadTooLarge
from engine.models.common import ID_PATTERN, INT64_MAX, INT64_MIN, MAX_JSON_DEPTH, check_values, refusal_text

M = TypeVar("M", bound=BaseModel)
_ID = re.compile(ID_PATTERN)


def invalid_from(exc: ValidationError, prefix: str = "") -> InvalidInput:
    """The most useful typed error for the first problem pydantic found. A refusal of
    :func:`engine.models.common.check_values` names the path inside the field (``ctx["field"]``)."""
    first = exc.errors()[0]
    ctx = first.get("ctx") or {}
    field = ".".join(_loc_part(p) for p in first["loc"])
    inner = ctx.get("field")
    if isinstance(inner, str) and inner:
        field = f"{field}{inner}" if inner.startswith("[") or not field else f"{field}.{inner}"
    field = field or "request"
    if prefix:
        field = f"{prefix}.{field}" if field != "request" else prefix
    if first["type"] in ("payload_too_large", "string_over_limit"):
        return PayloadTooLarge(field, int(ctx["size"]), int(ctx["limit"]))
    return InvalidInput(field, first["msg"])


def _loc_part(part: object) -> str:
    """One part of a pydantic error location, printable whatever the input was (a dict key can be a huge
    integer, whose ``str`` fails, or a string with lone surrogates)."""
    if isinstance(part, int) and not isinstance(part, bool) and part.bit_length() > 64:
        return f"<{part.bit_length()}-bit integer>"
    return str(part)[:64].encode("utf-8", "backslashreplace").decode("utf-8")


def build(model: type[M], **fields: Any) -> M:
    """``model(**fields)`` with validation errors mapped to :class:`InvalidInput`."""
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        raise invalid_from(exc) from exc


def check_id(field: str, value: object) -> str:
    """An identifier argument: a string matching :data:`ID_PATTERN` in full (a trailing newline, NUL or
    lone surrogate is refused like any other character outside the pattern)."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        shown = repr(value)[:200] if isinstance(value, str) else type(value).__name__
        raise InvalidInput(field, f"{shown} is not a valid id (letters, digits, _ . : -; at most 128)")
    return value


def check_int64(field: str, value: object) -> int:
    """An integer argument that reaches the store (a limit, a position, a time): within signed 64 bits."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, f"must be an integer, not {type(value).__name__}")
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidInput(field, f"an integer of {value.bit_length()} bits is outside signed 64 bits "
                                  "(-2**63 .. 2**63-1)")
    return value


def parse_json_text(field: str, text: str) -> Any:
    """``json.loads(text)`` for text from outside (a CLI argument, a file), refused as ``InvalidInput``
    naming ``field`` when it is not JSON, uses ``NaN``/``Infinity``, nests deeper than
    :data:`~engine.models.common.MAX_JSON_DEPTH` (checked by an iterative scan before the recursive
    parser runs, so it never hits Python's recursion limit) or holds a value no store can keep
    (:func:`~engine.models.common.check_values`)."""
    brackets = text.count("[") + text.count("{")
    if brackets > MAX_JSON_DEPTH and _bracket_depth(text) > MAX_JSON_DEPTH:
        raise InvalidInput(field, f"not accepted JSON: nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:  # RecursionError: only if the scan were wrong; still typed
        raise InvalidInput(field, f"not valid JSON: {exc}") from None
    try:
        check_values(value, json_only=True)
    except PydanticCustomError as exc:
        raise InvalidInput(field, refusal_text(exc)) from None
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _bracket_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` outside strings (an upper bound on the JSON's depth)."""
    deepest = depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


E = TypeVar("E", bound=StrEnum)


def parse_enum(field: str, enum: type[E], value: object) -> E:
    """``enum(value)`` or :class:`InvalidInput` listing the allowed values."""
    allowed = ", ".join(m.value for m in enum)
    if not isinstance(value, str):
        raise InvalidInput(field, f"{value!r} is not one of: {allowed}")
    try:
        return enum(value)
    except ValueError:
        raise InvalidInput(field, f"{value!r} is not one of: {allowed}") from None


__all__ = ["build", "check_id", "check_int64", "invalid_from", "parse_enum", "parse_json_text"]
