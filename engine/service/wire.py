"""What a call's answer looks like on the wire: JSON values only.

Bytes (artifact content) are sent as text when they are UTF-8, and otherwise as the object
``{"$base64": "<standard base64 of the bytes>"}`` (:data:`BASE64_KEY`) in their place: the marker is explicit, so
a client never mistakes base64 for text, and it appears only where the answer's model has a ``bytes`` field.
:func:`revived` rebuilds such an answer's model (bytes decoded back); ``engine.client.http.rebuilt`` should
use it (or the same rule) for a model with ``bytes`` fields.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import typing
from typing import Any, TypeVar

import pydantic_core
from pydantic import BaseModel

#: The key of the object that stands for bytes that are not UTF-8.
BASE64_KEY = "$base64"
M = TypeVar("M", bound=BaseModel)


def bytes_to_wire(data: bytes) -> str | dict[str, str]:
    """``data`` as text when it is UTF-8, else as ``{"$base64": ...}``."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {BASE64_KEY: base64.b64encode(data).decode("ascii")}


def bytes_from_wire(value: Any) -> Any:
    """The bytes a wire value of a ``bytes`` field stands for (text: its UTF-8; the base64 marker: the decoded
    bytes); anything else is answered unchanged (the model's validation then refuses it)."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and set(value) == {BASE64_KEY} and isinstance(value[BASE64_KEY], str):
        try:
            return base64.b64decode(value[BASE64_KEY], validate=True)
        except (binascii.Error, ValueError):
            return value
    return value


def _jsonable(python: Any) -> Any:
    """A python-mode dump as JSON values: bytes as :func:`bytes_to_wire`, other leaves as pydantic makes them
    JSON (datetimes, enums, ...)."""
    if isinstance(python, bytes):
        return bytes_to_wire(python)
    if isinstance(python, dict):
        return {str(k): _jsonable(v) for k, v in python.items()}
    if isinstance(python, list | tuple | set | frozenset):
        return [_jsonable(v) for v in python]
    return pydantic_core.to_jsonable_python(python)


def _model_to_wire(value: BaseModel) -> Any:
    try:
        return value.model_dump(mode="json")
    except (UnicodeDecodeError, pydantic_core.PydanticSerializationError):  # bytes that are not UTF-8
        return _jsonable(value.model_dump(mode="python"))


def to_wire(value: Any) -> Any:
    """``value`` as JSON values: models as their JSON-mode dump (also inside lists, tuples, dicts and
    dataclasses); bytes as :func:`bytes_to_wire` (also inside models); anything else unchanged (str, int,
    float, bool, None)."""
    if isinstance(value, BaseModel):
        return _model_to_wire(value)
    if isinstance(value, bytes):
        return bytes_to_wire(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_wire(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [to_wire(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_wire(v) for k, v in value.items()}
    return value


def _is_bytes(annotation: Any) -> bool:
    return annotation is bytes or (typing.get_origin(annotation) in (typing.Union, type(int | str))
                                   and bytes in typing.get_args(annotation))


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    found = [a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
    return found[0] if len(found) == 1 else None


def _revive_fields(cls: type[BaseModel], value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    revived = dict(value)
    for name, field in cls.model_fields.items():
        key = field.alias or name
        if key not in revived:
            continue
        if _is_bytes(field.annotation):
            revived[key] = bytes_from_wire(revived[key])
        elif (inner := _model_of(field.annotation)) is not None:
            revived[key] = _revive_fields(inner, revived[key])
    return revived


def revived(cls: type[M], value: Any) -> M:
    """``cls`` validated from its wire form (:func:`to_wire`), the ``bytes`` fields (also of nested models)
    decoded from text or the base64 marker; a value that is not the model's is refused by its validation."""
    return cls.model_validate(_revive_fields(cls, value))


def model_name(value: Any) -> str | None:
    """``module:Class`` of a model answer (or of the models of a list answer; None for anything else), so a
    client can rebuild the models it was sent (the CLI prints them exactly as in process)."""
    rows = value if isinstance(value, list) else [value]
    kinds = {type(v) for v in rows}
    if not rows or len(kinds) != 1:
        return None
    kind = kinds.pop()
    return f"{kind.__module__}:{kind.__qualname__}" if issubclass(kind, BaseModel) else None


__all__ = ["BASE64_KEY", "bytes_from_wire", "bytes_to_wire", "model_name", "revived", "to_wire"]
