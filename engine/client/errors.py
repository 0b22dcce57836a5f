"""A server's error answer as the very error the World would have raised in process.

The server answers a refusal as an RFC 9457 problem document with PMW's stable ``code`` and the error's
fields (``engine.service.http_app.problem``); :class:`~engine.client.http.ServerClient` raises it as
:class:`~engine.client.http.RemoteError`. :func:`typed_error` rebuilds from it the class of
``engine.errors`` that has that ``code`` (``VersionConflict`` with ``.current``, ``NotPermitted``,
``NotFound``, ...), its constructor given the fields the document carries, and its message the server's.
The rebuilt error is used only when every field it carries is the one sent; otherwise (an unknown code, a
field missing, a class whose message is not rebuilt from its fields) the ``RemoteError`` itself is the
answer: it has the same code, exit code and fields. The fields are the document's ``fields`` object (so an
error's own ``status``, ``IllegalTransition``'s, is never confused with the HTTP status); a document without
it (an older server) has them as its other members (``RemoteError.fields``). Stdlib only.
"""

from __future__ import annotations

import inspect
from functools import lru_cache
from typing import Any

from engine import errors
from engine.client.http import RemoteError
from engine.errors import PMWError


@lru_cache(maxsize=1)
def error_classes() -> dict[str, type[PMWError]]:
    """Every error class of ``engine.errors`` by its stable code (the most derived class per code)."""
    found: dict[str, type[PMWError]] = {}
    for value in vars(errors).values():
        if isinstance(value, type) and issubclass(value, PMWError) and value is not RemoteError:
            code = value.__dict__.get("code")
            if isinstance(code, str):
                found[code] = value
    return found


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def typed_error(remote: RemoteError) -> PMWError:
    """The ``engine.errors`` class named by ``remote.code``, rebuilt from its fields (see the module
    docstring); ``remote`` itself when it cannot be rebuilt faithfully."""
    cls = error_classes().get(remote.code)
    if cls is None:
        return remote
    fields = dict(remote.fields)
    try:
        params = [p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"]
    except (TypeError, ValueError):
        return remote
    kwargs: dict[str, Any] = {}
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            return remote
        if param.name in fields:
            kwargs[param.name] = fields[param.name]
        elif param.default is param.empty:
            return remote
    try:
        rebuilt = cls(**kwargs)
        details = rebuilt.details()
    except (TypeError, ValueError, KeyError, AttributeError):  # fields of the wrong shape: not rebuilt
        return remote
    if not all(k in fields and _same(v, fields[k]) for k, v in details.items()):
        return remote
    rebuilt.message = remote.message
    rebuilt.args = (remote.message,)
    return rebuilt


__all__ = ["error_classes", "typed_error"]
