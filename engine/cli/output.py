"""Printing results and errors.

``--json``: the pydantic model(s) as JSON (``model_dump(mode="json")``) on stdout, one document per
command; an error as its ``to_dict()`` JSON on stderr. Without ``--json``: a model is a block of aligned
``key: value`` lines (nested models flattened as ``agent.status``, lists of models as tables below it);
a list of models is a table with a few columns per kind; an error is one ``error:`` line on stderr.

Nothing here imports pydantic: a model is recognised by its ``model_dump`` and ``model_fields`` (a pydantic
``BaseModel``'s), so ``pmw --help`` and a client's call stay light.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

import typer

from engine.errors import PMWError

if TYPE_CHECKING:
    from pydantic import BaseModel

MAX_CELL = 60

# Table columns per model class name (the first columns of the model when not listed).
COLUMNS: dict[str, tuple[str, ...]] = {
    "Agent": ("agent_id", "status", "role_id", "display_name"),
    "Session": ("session_id", "agent_id", "term_key", "status"),
    "StateEntry": ("key", "version", "updated_by", "value"),
    "Task": ("task_id", "status", "owner_agent", "assignee", "version", "goal"),
    "Memory": ("memory_id", "status", "scope", "owner", "epistemic_type", "content"),
    "Wake": ("wake_id", "status", "target_agent", "priority", "cause", "idempotency_key"),
    "Receipt": ("receipt_id", "wake_id", "agent_id", "decision", "outcome"),
    "Handoff": ("handoff_id", "status", "source_agent", "target_agent", "task_id"),
    "Event": ("seq", "event_type", "actor_id", "subject_kind", "subject_id"),
    "TopologyEdge": ("source_agent", "target_agent", "edge_type", "active", "weight", "topology_version"),
    "Artifact": ("artifact_id", "artifact_type", "version", "size", "owner"),
    "ArtifactVersion": ("artifact_id", "version", "size", "checksum", "created_by"),
    "Room": ("room_id", "status", "opened_by", "goal"),
}

# Fields that hold lists of models (so an empty one still prints as an empty table).
_MODEL_LISTS: dict[str, tuple[str, ...]] = {
    "Topology": ("edges",),
    "WorldView": ("tasks", "state", "shared_facts", "working_memory", "handoffs", "rooms"),
}


def is_model(value: object) -> TypeGuard[BaseModel]:
    """Whether ``value`` is a model instance (a pydantic ``BaseModel``: ``model_dump`` and ``model_fields``),
    told without importing pydantic."""
    return (not isinstance(value, type) and callable(getattr(value, "model_dump", None))
            and isinstance(getattr(type(value), "model_fields", None), dict))


def to_jsonable(value: Any) -> Any:
    """Models (also inside lists) as their JSON-mode dump; anything else unchanged."""
    if is_model(value):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


def cell(value: Any, limit: int | None = None) -> str:
    """One value as text: ``-`` for None, compact JSON for containers, cut to ``limit`` characters."""
    if value is None:
        text = "-"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, dict | list):
        from engine.models.common import canonical_json

        text = canonical_json(value)
    else:
        text = str(value)
    text = text.replace("\n", " ")
    if limit is not None and len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def table(rows: Sequence[BaseModel], columns: Sequence[str] | None = None) -> list[str]:
    """Rows as an aligned table (header first); ``(none)`` for no rows."""
    if not rows:
        return ["(none)"]
    cols = list(columns or COLUMNS.get(type(rows[0]).__name__) or list(type(rows[0]).model_fields)[:5])
    data = [r.model_dump(mode="json") for r in rows]
    cells = [[cell(d.get(c), MAX_CELL) for c in cols] for d in data]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return lines


def record(model: BaseModel) -> list[str]:
    """A model as aligned ``key: value`` lines; nested models flattened, lists of models as tables."""
    pairs: list[tuple[str, str]] = []
    tables: list[tuple[str, list[BaseModel]]] = []
    _flatten(model, "", pairs, tables)
    width = max((len(k) for k, _ in pairs), default=0) + 1
    lines = [f"{k + ':':<{width}} {v}" for k, v in pairs]
    for name, rows in tables:
        lines += ["", f"{name} ({len(rows)}):", *("  " + line for line in table(rows))]
    return lines


def _flatten(model: BaseModel, prefix: str, pairs: list[tuple[str, str]],
             tables: list[tuple[str, list[BaseModel]]]) -> None:
    dumped = model.model_dump(mode="json")
    for name in type(model).model_fields:
        value = getattr(model, name)
        key = prefix + name
        if is_model(value):
            _flatten(value, key + ".", pairs, tables)
        elif isinstance(value, list) and value and all(is_model(v) for v in value):
            tables.append((key, value))
        elif isinstance(value, list) and not value and name in _MODEL_LISTS.get(type(model).__name__, ()):
            tables.append((key, []))
        else:
            pairs.append((key, cell(dumped[name])))



def human(value: Any, columns: Sequence[str] | None = None) -> list[str]:
    """The human-readable lines for a command's result."""
    if value is None:
        return ["(nothing)"]
    if isinstance(value, list):
        return table(value, columns)
    if is_model(value):
        return record(value)
    return [cell(value)]


def printable(text: str) -> str:
    """``text`` as it can be written to a UTF-8 stream: a lone surrogate (an echo of bad input, e.g. an
    invalid UTF-8 byte of argv) becomes its ``\\udcxx`` escape instead of failing the write."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def emit(value: Any, *, as_json: bool, columns: Sequence[str] | None = None) -> None:
    """Print a command's result on stdout."""
    if as_json:
        typer.echo(printable(json.dumps(to_jsonable(value), ensure_ascii=False)))
    else:
        typer.echo(printable("\n".join(human(value, columns))))


def report_error(exc: PMWError, *, as_json: bool) -> None:
    """Print an error on stderr: its ``to_dict()`` JSON, or ``error: message (code)``."""
    if as_json:
        typer.echo(printable(json.dumps(exc.to_dict(), ensure_ascii=False, default=str)), err=True)
    else:
        typer.echo(printable(f"error: {exc.message} ({exc.code})"), err=True)


__all__ = ["COLUMNS", "cell", "emit", "human", "is_model", "printable", "record", "report_error", "table",
           "to_jsonable"]
