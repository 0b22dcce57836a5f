"""Events fold to state: ``S_t = Fold(E_0..t)``.

Every event records the post-image of each row it wrote (``changes``). Applying those in log order to
empty tables, or to a snapshot taken at position ``n`` and then the events after ``n``, rebuilds every
state table exactly. Tests compare the result with the live tables (``fold(events) == state``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from store import STATE_TABLE_KEYS

StateImage = dict[str, list[dict[str, Any]]]
_Tables = dict[str, dict[tuple[Any, ...], dict[str, Any]]]


class FoldError(Exception):
    """The log cannot be folded (an update of a missing row, an insert of an existing one)."""


def _index(image: Mapping[str, list[dict[str, Any]]] | None) -> _Tables:
    tables: _Tables = {name: {} for name in STATE_TABLE_KEYS}
    for name, rows in (image or {}).items():
        keys = STATE_TABLE_KEYS[name]
        tables[name] = {tuple(r[k] for k in keys): dict(r) for r in rows}
    return tables


def apply_event(tables: _Tables, event: Mapping[str, Any]) -> None:
    """Apply one event's row changes to ``tables`` in place."""
    for change in event["changes"]:
        table = change["table"]
        if table not in tables:
            continue  # not a state table (e.g. snapshots)
        key = tuple(change["key"][k] for k in STATE_TABLE_KEYS[table])
        if change["op"] == "insert":
            if key in tables[table]:
                raise FoldError(f"event {event['event_id']}: insert of existing {table} row {key}")
            tables[table][key] = dict(change["values"])
        else:
            if key not in tables[table]:
                raise FoldError(f"event {event['event_id']}: update of missing {table} row {key}")
            tables[table][key].update(change["values"])


def fold(events: Iterable[Mapping[str, Any]], snapshot: Mapping[str, list[dict[str, Any]]] | None = None
         ) -> StateImage:
    """The state image after applying ``events`` (in log order) to ``snapshot`` (or to nothing)."""
    tables = _index(snapshot)
    for event in events:
        apply_event(tables, event)
    return {name: [rows[k] for k in sorted(rows, key=_sort_key)] for name, rows in tables.items()}


def _sort_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((0, v) if isinstance(v, int) else (1, str(v)) for v in key)


def normalise(image: Mapping[str, list[dict[str, Any]]]) -> StateImage:
    """Order rows by primary key (the way :func:`fold` does), for comparing images."""
    return fold((), image)


__all__ = ["FoldError", "StateImage", "apply_event", "fold", "normalise"]
