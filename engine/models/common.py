"""Shared field types and limits for every boundary model.

Limits are bytes of canonical JSON (for payloads) or UTF-8 (for text). Ids are caller-chosen or
generated (``<prefix>_<26 hex digits>``); either way they match :data:`ID_PATTERN`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from pydantic_core import PydanticCustomError

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$"
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_TEXT_BYTES = 64 * 1024
MAX_NAME_CHARS = 200
MAX_REFS = 256


def canonical_json(value: Any) -> str:
    """The one JSON encoding used for hashing and sizing: sorted keys, no spaces, no NaN/Infinity
    (they are not JSON, and PostgreSQL refuses them)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _limit_payload(value: dict[str, Any]) -> dict[str, Any]:
    try:
        size = len(canonical_json(value).encode())
    except (TypeError, ValueError) as exc:
        raise PydanticCustomError("json_invalid", "payload is not JSON-serialisable: {err}",
                                  {"err": str(exc)}) from exc
    if size > MAX_PAYLOAD_BYTES:
        raise PydanticCustomError("payload_too_large", "payload is {size} bytes; the limit is {limit}",
                                  {"size": size, "limit": MAX_PAYLOAD_BYTES})
    return value


def _limit_text(value: str) -> str:
    size = len(value.encode())
    if size > MAX_TEXT_BYTES:
        raise PydanticCustomError("payload_too_large", "text is {size} bytes; the limit is {limit}",
                                  {"size": size, "limit": MAX_TEXT_BYTES})
    return value


def _limit_json_value(value: Any) -> Any:
    _limit_payload({"v": value})
    return value


Id = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_CHARS)]
Text = Annotated[str, StringConstraints(min_length=1), AfterValidator(_limit_text)]
Payload = Annotated[dict[str, Any], AfterValidator(_limit_payload)]
JsonValue = Annotated[Any, AfterValidator(_limit_json_value)]
Refs = Annotated[list[Id], Field(max_length=MAX_REFS)]
Version = Annotated[int, Field(ge=1)]
TimeUs = Annotated[int, Field(ge=0)]
Priority = Annotated[int, Field(ge=-1000, le=1000)]
Confidence = Annotated[float, Field(ge=0.0, le=1.0)]


class Model(BaseModel):
    """Base for every boundary model: strict about unknown fields, immutable once built."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False, validate_default=True)


__all__ = [
    "ID_PATTERN",
    "MAX_PAYLOAD_BYTES",
    "MAX_TEXT_BYTES",
    "Confidence",
    "Id",
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
]
