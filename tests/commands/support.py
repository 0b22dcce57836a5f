"""What the command tests share: the World with ``execute`` (until ``World`` itself includes
``ExecuteCalls``), calling a World method with a raw request body, and a world holding the objects some
methods read before they validate."""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any

import pytest
from pydantic import BaseModel

from engine.commands import COMMANDS
from engine.world import World
from engine.world.execute import ExecuteCalls
from tests.conftest import book_of


@pytest.fixture
def world_execute(monkeypatch: pytest.MonkeyPatch) -> None:
    """``World.execute`` for this test: the World's own once it includes ``ExecuteCalls`` (then this does
    nothing), else ``ExecuteCalls.execute`` set on the class for the test's duration."""
    if not issubclass(World, ExecuteCalls):
        monkeypatch.setattr(World, "execute", ExecuteCalls.execute, raising=False)


def _members(hint: Any) -> tuple[Any, ...]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return tuple(m for arg in typing.get_args(hint) for m in _members(arg))
    return (hint,)


def world_kwargs(world: World, name: str, actor: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` (JSON values) as keyword arguments of the World method ``name``, converted only where the
    method's own types need it and never validated: text where it takes bytes is encoded; an object where
    it takes a model is that model built without validation (``model_construct``), as any caller could."""
    method = getattr(world, name)
    hints = typing.get_type_hints(method)
    out: dict[str, Any] = {COMMANDS[name].actor_param: actor}
    for key, raw in body.items():
        members = _members(hints.get(key, Any))
        models = [m for m in members if inspect.isclass(m) and issubclass(m, BaseModel)]
        if bytes in members and isinstance(raw, str):
            out[key] = raw.encode()
        elif models and isinstance(raw, dict):
            out[key] = models[0].model_construct(**raw)
        else:
            out[key] = raw
    return out


def counts(world: World) -> dict[str, Any]:
    """Row counts and version sums of every table (what "nothing written" compares)."""
    return book_of(world).store.read.counts_and_versions()


__all__ = ["counts", "world_execute", "world_kwargs"]
