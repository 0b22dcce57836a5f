"""Rows of the world's own store as models, without validating them a second time.

Every value in the store was validated on its way in: the write gateway takes validated models only, and its
plans are built from them. A row read back is turned into its model by :func:`trusted`: each field takes the
row's value as validation would leave it (an enum field its member, a float field a float; strings,
integers, booleans, JSON lists and objects as they are), through ``model_construct``, so the model is equal,
field for field and type for type, to ``model.model_validate(row)`` (``tests/projection_speed``). A row that
does not fit (a column the model lacks or an extra one, ``None`` where the model has no ``None``, a value of
another type, an enum value the enum does not know) is validated instead, so it fails exactly as it would
have. A model with a field of any other type (a nested model, a tuple, a datetime ...) is always validated.

Only for rows of the store and for dicts built from models already validated, never for a caller's input:
the constraints of a field (patterns, lengths, ranges, the store limits of :class:`~engine.models.common.Model`)
are not checked again.
"""

from __future__ import annotations

import threading
import types
import typing
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, TypeVar

from pydantic import BaseModel

R = TypeVar("R", bound=BaseModel)
Row = Mapping[str, Any]

_UNTRUSTED = object()  # a field type trusted() does not rebuild: the model is validated
_BUILDERS: dict[type[Any], Callable[[Row], Any]] = {}
_BUILDERS_LOCK = threading.Lock()


def trusted(model: type[R]) -> Callable[[Row], R]:
    """How a row of the world's own store becomes ``model`` without validating it again: each field takes
    the row's value as validation would leave it (an enum field its member, a float field a float; strings,
    integers, booleans, JSON lists and objects as they are), through ``model_construct``, so the model is
    equal, field for field and type for type, to ``model.model_validate(row)`` (tested on every kind the
    projection shows). A row whose columns are not exactly the model's fields, or whose enum value the
    enum does not know, is validated instead (and fails as it would have). A model with a field of any
    other type (a nested model, a tuple, a datetime ...) is always validated."""
    found = _BUILDERS.get(model)
    if found is None:
        found = _builder(model)
        with _BUILDERS_LOCK:
            _BUILDERS[model] = found
    return found


def _builder(model: type[R]) -> Callable[[Row], R]:
    """See :func:`trusted`: every field's value is checked for its type (or converted) and ``None`` passes
    only where the model allows it; anything else is validated (and refused, as before)."""
    fields: list[tuple[str, type | None, Callable[[Any], Any] | None, bool]] = []
    for name, field in model.model_fields.items():
        convert = _converter(field.annotation)
        if convert is _UNTRUSTED:
            return model.model_validate
        exact = convert if convert in _EXACT else None
        fields.append((name, exact, None if exact is not None else convert, _allows_none(field.annotation)))
    names = frozenset(model.model_fields)
    validate = model.model_validate
    construct = _constructor(model)

    def build(row: Row) -> R:
        if row.keys() != names:
            return validate(row)
        values: dict[str, Any] = {}
        for name, exact, convert, optional in fields:
            value = row[name]
            if value is None:
                if not optional:
                    return validate(row)
            elif exact is not None:
                if type(value) is not exact:
                    return validate(row)
            elif convert is not None:
                try:
                    value = convert(value)
                except (ValueError, TypeError):
                    return validate(row)
            values[name] = value
        return construct(values)
    return build


def _constructor(model: type[R]) -> Callable[[dict[str, Any]], R]:
    """``model_construct`` for a complete set of field values in field order: what it leaves (the values as
    ``__dict__``, every field set, no extra, no private state), without its per-field alias and default
    search (~20 µs a row, most of a projection's row building). A model with aliases, private attributes,
    a post-init hook or a root goes through ``model_construct`` itself."""
    plain = (not model.__pydantic_root_model__ and not model.__pydantic_post_init__
             and not model.__private_attributes__ and model.model_config.get("extra") != "allow"
             and all(f.alias is None and f.validation_alias is None for f in model.model_fields.values()))
    if not plain:
        def constructed(values: dict[str, Any]) -> R:
            return model.model_construct(**values)
        return constructed
    new, set_attr, every = model.__new__, object.__setattr__, frozenset(model.model_fields)

    def construct(values: dict[str, Any]) -> R:
        m = new(model)
        set_attr(m, "__dict__", values)
        set_attr(m, "__pydantic_fields_set__", set(every))
        set_attr(m, "__pydantic_extra__", None)
        set_attr(m, "__pydantic_private__", None)
        return m
    return construct


_EXACT = (str, int, bool, list, dict)  # a value of exactly this type is kept as it is (a bool is no int)


def _converter(annotation: Any) -> Any:
    """``None`` (any value stays as it is), a type of :data:`_EXACT` (a value of exactly that type stays), a
    converter (an enum, :func:`_as_float`), or :data:`_UNTRUSTED`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _converter(args[0])
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return _converter(rest[0]) if len(rest) == 1 and len(args) == 2 else _UNTRUSTED
    if annotation is Any:
        return None
    if annotation in (str, int, bool):
        return annotation  # kept if exactly of this type
    if annotation is float:
        return _as_float
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return annotation
    if origin is list and len(args) == 1 and (_plain_type(args[0], str) or _converter(args[0]) is dict):
        return list  # of strings, or of JSON objects
    if origin is dict and len(args) == 2 and _plain_type(args[0], str) and _converter(args[1]) is None:
        return dict  # a JSON object (its values ``Any`` or ``JsonValue``)
    return _UNTRUSTED


def _allows_none(annotation: Any) -> bool:
    return annotation is Any or (typing.get_origin(annotation) in (typing.Union, types.UnionType)
                                 and type(None) in typing.get_args(annotation))


def _plain_type(annotation: Any, wanted: type) -> bool:
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation is wanted


def _as_float(value: Any) -> Any:
    """A float field's value as validation leaves it: an integer becomes a float (a bool would not be one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(type(value).__name__)
    return float(value)


__all__ = ["trusted"]
