"""What a call's answer looks like on the wire: JSON values only."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel


def to_wire(value: Any) -> Any:
    """``value`` as JSON values: models as their JSON-mode dump (also inside lists, tuples, dicts and
    dataclasses); anything else unchanged (str, int, float, bool, None)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_wire(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [to_wire(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_wire(v) for k, v in value.items()}
    return value


def model_name(value: Any) -> str | None:
    """``module:Class`` of a model answer (or of the models of a list answer; None for anything else), so a
    client can rebuild the models it was sent (the CLI prints them exactly as in process)."""
    rows = value if isinstance(value, list) else [value]
    kinds = {type(v) for v in rows}
    if not rows or len(kinds) != 1:
        return None
    kind = kinds.pop()
    return f"{kind.__module__}:{kind.__qualname__}" if issubclass(kind, BaseModel) else None


__all__ = ["model_name", "to_wire"]
