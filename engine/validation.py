"""Boundary validation: build a pydantic model or raise the typed :class:`InvalidInput` family."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from engine.errors import InvalidInput, PayloadTooLarge
from engine.models.common import ID_PATTERN

M = TypeVar("M", bound=BaseModel)
_ID = re.compile(ID_PATTERN)


def invalid_from(exc: ValidationError, prefix: str = "") -> InvalidInput:
    """The most useful typed error for the first problem pydantic found."""
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "request"
    if prefix:
        field = f"{prefix}.{field}" if field != "request" else prefix
    ctx = first.get("ctx") or {}
    if first["type"] == "payload_too_large":
        return PayloadTooLarge(field, int(ctx["size"]), int(ctx["limit"]))
    return InvalidInput(field, first["msg"])


def build(model: type[M], **fields: Any) -> M:
    """``model(**fields)`` with validation errors mapped to :class:`InvalidInput`."""
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        raise invalid_from(exc) from exc


def check_id(field: str, value: object) -> str:
    """An identifier argument: a string matching :data:`ID_PATTERN`."""
    if not isinstance(value, str) or not _ID.match(value):
        raise InvalidInput(field, f"{value!r} is not a valid id (letters, digits, _ . : -; at most 128)")
    return value




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


__all__ = ["build", "check_id", "invalid_from", "parse_enum"]
