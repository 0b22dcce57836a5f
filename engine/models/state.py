"""Shared state entries: versioned keys, written only by compare-and-set."""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

from engine.models.common import Id, JsonValue, Model, TimeUs, Version

StateKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_./:\-]{0,255}$")]


class StateEntry(Model):
    key: StateKey
    value: JsonValue
    version: Version
    updated_by: Id
    updated_at_us: TimeUs


class StateRead(StateEntry):
    """An entry as read, with the read token a write computed from it may pass (``engine.world.read_set``)."""

    read_token: str


__all__ = ["StateEntry", "StateKey", "StateRead"]
