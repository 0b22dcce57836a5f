"""What the REST headers mean for a World call: ``Idempotency-Key`` is its operation id, ``If-Match`` its
expected version, ``ETag`` the version of what it answered.

- ``Idempotency-Key: <key>`` -> ``op_id=<key>``: the same key with the same request answers the stored
  result and writes nothing; with a different request the World refuses it (409 ``operation_conflict``).
  A command whose World call takes no operation id refuses the header (400).
- ``If-Match: "<version>"`` -> ``expected_version=<version>`` of a compare-and-set command (one strong or
  weak entity tag holding a decimal version; ``*`` and lists are refused, 400). A body that also gives
  ``expected_version`` must give the same number. ``If-None-Match: *`` on a command taking a version means
  "must not exist yet": ``expected_version=0``.
- An answer that is a versioned resource (a model with an integer ``version``) carries ``ETag: "<version>"``.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from engine.commands import Command
from engine.commands.fields import INT64_MAX
from engine.errors import InvalidInput
from engine.models.common import ID_PATTERN

_TAG = re.compile(r'^\s*(?:W/)?"(\d{1,19})"\s*$|^\s*(\d{1,19})\s*$')
VERSION_FIELD = "expected_version"
#: what the OpenAPI document says of each header a command takes
HEADER_DOCS: dict[str, dict[str, Any]] = {
    "Idempotency-Key": {"description": "The call's operation id: the same key with the same request answers "
                                       "the stored result and writes nothing; with another request, 409 "
                                       "`operation_conflict`.", "schema": {"type": "string", "pattern": ID_PATTERN}},
    "If-Match": {"description": 'The version the write expects (`"<version>"`, as an ETag said): stale is 409 '
                                "`version_conflict` with the current version.",
                 "schema": {"type": "string", "pattern": r'^(W/)?"[0-9]{1,18}"$'}},
    "If-None-Match": {"description": "`*`: the object must not exist yet (expected version 0).",
                      "schema": {"type": "string", "enum": ["*"]}},
}


def etag_of(value: object) -> str | None:
    """``"<version>"`` of a versioned answer (``None`` when it has no integer ``version``)."""
    version = getattr(value, "version", None) if isinstance(value, BaseModel) else None
    return f'"{version}"' if isinstance(version, int) and not isinstance(version, bool) else None


def version_of(if_match: str) -> int:
    """The version an ``If-Match`` header names; anything but one entity tag of a version is ``InvalidInput``."""
    found = _TAG.match(if_match)
    number = int(found[1] or found[2]) if found else -1
    if not 0 <= number <= INT64_MAX:
        raise InvalidInput("If-Match", 'must be one entity tag of a version, e.g. "3" (as the ETag was)')
    return number


def apply_headers(command: type[Command], body: dict[str, Any], if_match: str | None,
                  if_none_match: str | None) -> dict[str, Any]:
    """``body`` with ``expected_version`` from ``If-Match`` / ``If-None-Match: *``; refused (``InvalidInput``)
    for a command that takes no version, or when the body says otherwise."""
    if if_match is None and if_none_match is None:
        return body
    if if_match is not None and if_none_match is not None:
        raise InvalidInput("If-None-Match", "give If-Match or If-None-Match, not both")
    header = "If-Match" if if_match is not None else "If-None-Match"
    if VERSION_FIELD not in command.model_fields:
        raise InvalidInput(header, f"{command.name} is not a compare-and-set: it takes no version")
    if if_match is not None:
        expected = version_of(if_match)
    elif if_none_match is not None and if_none_match.strip() == "*":
        expected = 0
    else:
        raise InvalidInput("If-None-Match", 'only "*" (the resource must not exist yet) is understood')
    given = body.get(VERSION_FIELD)
    if given is not None and given != expected:
        raise InvalidInput(VERSION_FIELD, f"the body says {str(given)[:40]}, {header} says {expected}")
    return {**body, VERSION_FIELD: expected}


def op_id_of(command: type[Command], key: str | None) -> dict[str, str]:
    """``{"op_id": key}`` for a command taking an operation id (``{}`` without a key); a key on a command that
    takes none is ``InvalidInput``. The World checks the key itself (length, characters, reserved ids)."""
    if key is None:
        return {}
    if not command.takes_op_id:
        raise InvalidInput("Idempotency-Key", f"{command.name} takes no operation id")
    return {"op_id": key}


__all__ = ["HEADER_DOCS", "apply_headers", "etag_of", "op_id_of", "version_of"]
