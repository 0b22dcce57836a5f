"""The query parameters of a REST read, derived from the World read's own signature.

A read route (``engine.service.rest_routes``) takes as query parameters every keyword parameter of its
World read that a query string can carry (text, integers, numbers, booleans, or optional ones of these; a
parameter that also takes a model, such as a target, is taken as its text form), minus the principal
(``actor``: the token's agent) and the parameters its path fills. Parameters a query cannot carry (a
mapping of weights, a list of pairs) are not offered over REST; their defaults apply. Integers are bounded
to what the store keeps (64 bits), so an out-of-range number is a 400 naming the parameter.
"""

from __future__ import annotations

import inspect
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Query

from engine.commands.fields import INT64_MAX

SIMPLE: tuple[type, ...] = (bool, int, float, str)


@dataclass(frozen=True)
class QueryParam:
    """One query parameter of a read: its name, type, and default (``required`` when it has none)."""

    name: str
    kind: type
    default: Any
    required: bool

    def parameter(self) -> inspect.Parameter:
        """The parameter as a FastAPI endpoint declares it (FastAPI validates it and documents it)."""
        bounds: dict[str, Any] = {"ge": -INT64_MAX - 1, "le": INT64_MAX} if self.kind is int else {}
        if self.required:
            return inspect.Parameter(self.name, inspect.Parameter.KEYWORD_ONLY,
                                     annotation=Annotated[self.kind, Query(**bounds)])
        # optional, and never null: a query string cannot say null (an absent parameter takes the default)
        return inspect.Parameter(self.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                 annotation=Annotated[self.kind, Query(**bounds)])


def _simple(annotation: Any) -> type | None:
    """The query type of ``annotation`` (``None`` when a query string cannot carry it)."""
    if annotation in SIMPLE:
        return typing.cast(type, annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if str in members:
            return str
        if len(members) == 1 and members[0] in SIMPLE:
            return typing.cast(type, members[0])
    return None


def query_params(world: type, call: str, skip: set[str]) -> tuple[QueryParam, ...]:
    """The query parameters of ``world.<call>`` (without ``actor`` and ``skip``). ``RuntimeError`` when a
    parameter without a default cannot be carried by a query (the route table must fill it)."""
    method = getattr(world, call)
    hints = typing.get_type_hints(method)
    found = []
    for name, param in inspect.signature(method).parameters.items():
        if name in ("self", "actor") or name in skip:
            continue
        kind = _simple(hints.get(name))
        required = param.default is inspect.Parameter.empty
        if kind is None:
            if required:
                raise RuntimeError(f"{call}: parameter {name!r} cannot be a query parameter")
            continue
        found.append(QueryParam(name, kind, None if required else param.default, required))
    return tuple(found)


__all__ = ["QueryParam", "query_params"]
