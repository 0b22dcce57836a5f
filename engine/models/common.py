"""Shared field types and limits for every boundary model.

Limits are bytes of canonical JSON (for payloads) or UTF-8 (for text). Ids are caller-chosen or
generated (``<prefix>_<26 hex digits>``); either way they match :data:`ID_PATTERN`.

Every value a boundary model holds is also checked as a whole (:meth:`Model._hardened`, after the fields
validated): integers within signed 64 bits (what both stores hold), floats finite, strings without NUL,
encodable as UTF-8 (no lone surrogates) and at most :data:`MAX_STRING_BYTES` each, dicts and lists nested
at most :data:`MAX_JSON_DEPTH` deep and holding at most :data:`MAX_VALUES` values. JSON payloads
(:data:`Payload`, :data:`JsonValue`) are checked the same way before they are sized, so neither ``json``
nor ``orjson`` ever sees a value it would choke on. The walk is iterative: no input can exhaust the stack.
Each refusal is a ``PydanticCustomError`` that :func:`engine.validation.invalid_from` maps to
``InvalidInput`` naming the field (and the path inside it); the limits are listed in
``docs/input-limits.md``.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic_core import PydanticCustomError

from engine.errors import InvalidInput

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$"
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_TEXT_BYTES = 64 * 1024
MAX_NAME_CHARS = 200
MAX_REFS = 256
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
MAX_JSON_DEPTH = 64  # containers nested inside one another (a flat object is depth 1)
MAX_VALUES = 1_000_000  # values (containers, keys' values, scalars) one model field may hold
MAX_STRING_BYTES = MAX_TEXT_BYTES  # any one string (or key) of a model, in UTF-8 bytes

_PathLink = tuple[Any, Any, bool] | None  # (parent link, key, is a list index): rendered only on refusal


def _render(link: _PathLink) -> str:
    """``a.b[3].c`` for the chain of keys ``link`` ends with."""
    parts: list[str] = []
    while link is not None:
        link, key, index = link
        parts.append(f"[{key}]" if index else f".{_label(key)}")
    return "".join(reversed(parts)).removeprefix(".")


def _label(key: Any) -> str:
    """A dict key for a path: short, and never a conversion that could fail (a huge int, a surrogate)."""
    if isinstance(key, str):
        return key[:64].encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key) if key.bit_length() <= 64 else f"<{key.bit_length()}-bit integer>"
    return f"<{type(key).__name__}>"


def _where(base: str, link: _PathLink) -> str:
    inner = _render(link)
    if not base or not inner:
        return base or inner
    return f"{base}{inner}" if inner.startswith("[") else f"{base}.{inner}"


def string_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text (a NUL character, a lone surrogate), or ``None``."""
    found = _string_refusal(value)
    return found[1] if found is not None else None


def _string_refusal(value: str) -> tuple[str, str, dict[str, Any]] | None:
    """(error type, reason) when ``value`` holds a NUL character or a lone surrogate, or is longer than
    :data:`MAX_STRING_BYTES`."""
    if len(value) > MAX_STRING_BYTES // 4 and (size := len(value.encode("utf-8", "surrogatepass"))) \
            > MAX_STRING_BYTES:
        return ("string_over_limit", f"is {size} bytes of UTF-8; the limit for one string is {MAX_STRING_BYTES}",
                {"size": size, "limit": MAX_STRING_BYTES})
    if "\x00" in value:
        return "string_nul", f"contains a NUL character (\\x00) at position {value.index(chr(0))}", {}
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return "string_not_utf8", f"is not valid UTF-8: a lone surrogate at position {exc.start}", {}
    return None


def _refuse(kind: str, where: str, message: str, **ctx: Any) -> PydanticCustomError:
    """The refusal; ``ctx["field"]`` is the path of the value (cut to 200 characters), not in the message."""
    return PydanticCustomError(kind, message, {"field": where if len(where) <= 200 else where[:197] + "...", **ctx})


def refusal_text(exc: PydanticCustomError) -> str:
    """``path: message`` of a :func:`check_values` refusal (for errors raised outside pydantic)."""
    where = (exc.context or {}).get("field")
    return f"{where}: {exc.message()}" if where else exc.message()


def check_values(value: Any, *, field: str = "", json_only: bool = False, max_values: int = MAX_VALUES) -> None:
    """Raise a ``PydanticCustomError`` for the first value inside ``value`` that no store can hold:

    * ``int_out_of_range``: an integer outside signed 64 bits (``bool`` is fine);
    * ``float_not_finite``: NaN or an infinity;
    * ``string_nul`` / ``string_not_utf8``: a NUL character or a lone surrogate, in a value or a key;
    * ``string_over_limit``: one string (or key) over :data:`MAX_STRING_BYTES` bytes of UTF-8;
    * ``json_too_deep``: dicts/lists nested deeper than :data:`MAX_JSON_DEPTH`;
    * ``json_too_large``: more than ``max_values`` values in all (shared sub-objects count each time);
    * ``json_invalid`` (only with ``json_only``): a value JSON has no type for.

    Without ``json_only`` other objects (nested models, bytes, datetimes) are left alone: they are
    validated by their own types. ``field`` prefixes the path reported (``ctx["field"]``)."""
    stack: list[tuple[Any, int, _PathLink]] = [(value, 0, None)]
    seen = 0
    while stack:
        item, depth, link = stack.pop()
        seen += 1
        if seen > max_values:
            raise _refuse("json_too_large", _where(field, link), "more than {limit} values",
                          limit=max_values)
        if isinstance(item, str):
            if (refused := _string_refusal(item)) is not None:
                raise _refuse(refused[0], _where(field, link), refused[1], **refused[2])
        elif item is None or isinstance(item, bool):
            continue
        elif isinstance(item, int):
            if not INT64_MIN <= item <= INT64_MAX:
                raise _refuse("int_out_of_range", _where(field, link),
                              "an integer of {bits} bits is outside signed 64 bits (-2**63 .. 2**63-1)",
                              bits=item.bit_length())
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise _refuse("float_not_finite", _where(field, link), "{value} is not a finite number",
                              value=str(item))
        elif isinstance(item, dict | list | tuple):
            if depth >= MAX_JSON_DEPTH:
                raise _refuse("json_too_deep", _where(field, link), "nested deeper than {limit} levels",
                              limit=MAX_JSON_DEPTH)
            if isinstance(item, dict):
                for key, child in item.items():
                    key_link = (link, key, False)
                    if isinstance(key, str):
                        if (refused := _string_refusal(key)) is not None:
                            raise _refuse(refused[0], _where(field, link), f"a key {refused[1]}", **refused[2])
                    elif json_only and not (key is None or isinstance(key, int | float)):
                        raise _refuse("json_invalid", _where(field, link),
                                      "a key of type {type} is not JSON", type=type(key).__name__)
                    elif isinstance(key, int | float) and not isinstance(key, bool):
                        stack.append((key, depth + 1, key_link))
                    stack.append((child, depth + 1, key_link))
            else:
                stack.extend((child, depth + 1, (link, i, True)) for i, child in enumerate(item))
        elif json_only:
            raise _refuse("json_invalid", _where(field, link), "a {type} is not a JSON value",
                          type=type(item).__name__)


def canonical_json(value: Any) -> str:
    """The one JSON encoding used for hashing and sizing: sorted keys, no spaces, no NaN/Infinity
    (they are not JSON, and PostgreSQL refuses them). A value :func:`check_values` refuses (beyond 64
    bits, too deep, NUL, lone surrogates, not JSON) is ``InvalidInput`` (field ``json``); the encoder never
    sees it."""
    try:
        check_values(value, json_only=True)
    except PydanticCustomError as exc:
        raise InvalidInput("json", refusal_text(exc)) from None
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput("json", f"not JSON-serialisable: {exc}") from None


def _limit_payload(value: dict[str, Any]) -> dict[str, Any]:
    _check_json(value)
    _limit_size(value)
    return value


def _check_json(value: Any) -> None:
    # Every value costs at least one byte of JSON: more values than bytes allowed is over the limit anyway.
    try:
        check_values(value, json_only=True, max_values=MAX_PAYLOAD_BYTES)
    except PydanticCustomError as exc:
        if exc.type != "json_too_large":
            raise
        raise PydanticCustomError("payload_too_large", "payload is over {limit} bytes (more values than bytes)",
                                  {"size": MAX_PAYLOAD_BYTES + 1, "limit": MAX_PAYLOAD_BYTES}) from None


def _limit_size(value: Any) -> None:
    try:
        size = len(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              allow_nan=False).encode())
    except (TypeError, ValueError) as exc:
        raise PydanticCustomError("json_invalid", "payload is not JSON-serialisable: {err}",
                                  {"err": str(exc)}) from exc
    if size > MAX_PAYLOAD_BYTES:
        raise PydanticCustomError("payload_too_large", "payload is {size} bytes; the limit is {limit}",
                                  {"size": size, "limit": MAX_PAYLOAD_BYTES})


def _limit_text(value: str) -> str:
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_TEXT_BYTES:
        raise PydanticCustomError("payload_too_large", "text is {size} bytes; the limit is {limit}",
                                  {"size": size, "limit": MAX_TEXT_BYTES})
    return _safe_text(value)


def _safe_text(value: str) -> str:
    if (refused := _string_refusal(value)) is not None:
        raise PydanticCustomError(refused[0], f"text {refused[1]}", refused[2])
    return value


def _limit_json_value(value: Any) -> Any:
    _check_json(value)
    _limit_size({"v": value})  # sized as the one-key object it is stored in
    return value


Id = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_CHARS), AfterValidator(_safe_text)]
Text = Annotated[str, StringConstraints(min_length=1), AfterValidator(_limit_text)]
Payload = Annotated[dict[str, Any], AfterValidator(_limit_payload)]
JsonValue = Annotated[Any, AfterValidator(_limit_json_value)]
Refs = Annotated[list[Id], Field(max_length=MAX_REFS)]
Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]
Version = Annotated[int, Field(ge=1, le=INT64_MAX)]
TimeUs = Annotated[int, Field(ge=0, le=INT64_MAX)]
Priority = Annotated[int, Field(ge=-1000, le=1000)]
Confidence = Annotated[float, Field(ge=0.0, le=1.0)]


class Model(BaseModel):
    """Base for every boundary model: strict about unknown fields, immutable once built, and holding
    only values the stores can keep (see the module docstring; floats must be finite)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False, validate_default=True,
                              allow_inf_nan=False)

    @model_validator(mode="after")
    def _hardened(self) -> Self:
        """Every field's value within the store's limits (nested models checked themselves). Plain
        scalars take a fast path; only a suspect string or integer, or a non-empty container, is walked."""
        for name, value in self.__dict__.items():
            if isinstance(value, str):
                if "\x00" in value or not value.isascii() or len(value) > MAX_STRING_BYTES // 4:
                    check_values(value, field=name)
            elif isinstance(value, int):
                if not INT64_MIN <= value <= INT64_MAX:
                    check_values(value, field=name)
            elif isinstance(value, dict | list | tuple):
                if value:
                    check_values(value, field=name)
            elif isinstance(value, float) and not math.isfinite(value):
                check_values(value, field=name)
        return self


__all__ = [
    "ID_PATTERN",
    "INT64_MAX",
    "INT64_MIN",
    "MAX_JSON_DEPTH",
    "MAX_PAYLOAD_BYTES",
    "MAX_STRING_BYTES",
    "MAX_TEXT_BYTES",
    "MAX_VALUES",
    "Confidence",
    "Id",
    "Int64",
    "JsonValue",
    "Model",
    "Name",
    "Payload",
    "Priority",
    "Refs",
    "Text",
    "TimeUs",
    "Version",
    "canonical_json",
    "check_values",
    "refusal_text",
    "string_problem",
]
