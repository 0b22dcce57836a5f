"""Field types the commands share: the World's own types (``engine.models.common``), with every limit
also stated in the JSON schema.

Byte limits cannot be said in standard JSON Schema, so they are stated with the extension keyword
``x-max-bytes``: bytes of UTF-8 for text, bytes of canonical JSON (``canonical_json``) for payloads and
JSON values. Text also carries ``maxLength`` (a string of at most N bytes has at most N characters), so
a consumer that ignores the extension still knows a bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator, Field, GetJsonSchemaHandler, StringConstraints
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from engine.models import common
from engine.models.common import ID_PATTERN, MAX_PAYLOAD_BYTES, MAX_REFS, MAX_TEXT_BYTES, canonical_json

MAX_BYTES_KEYWORD = "x-max-bytes"
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
MAX_REASON_CHARS = 4000
# A JSON value is sized as the payload {"v": value}: its own canonical JSON may use the rest.
MAX_JSON_VALUE_BYTES = MAX_PAYLOAD_BYTES - (len(canonical_json({"v": None})) - len(canonical_json(None)))


@dataclass(frozen=True)
class MaxBytes:
    """JSON-schema annotation of a byte limit (the limit itself is enforced by the type's validator)."""

    limit: int

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        out = handler(schema)
        out[MAX_BYTES_KEYWORD] = self.limit
        return out


def max_utf8_bytes(limit: int) -> AfterValidator:
    """A validator refusing text over ``limit`` bytes of UTF-8 (``payload_too_large``)."""

    def check(value: str) -> str:
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise PydanticCustomError("payload_too_large", "text is {size} bytes; the limit is {limit}",
                                      {"size": size, "limit": limit})
        return value
    return AfterValidator(check)


Id = common.Id
Refs = common.Refs
Name = common.Name
Text = Annotated[common.Text, StringConstraints(max_length=MAX_TEXT_BYTES), MaxBytes(MAX_TEXT_BYTES)]
Payload = Annotated[common.Payload, MaxBytes(MAX_PAYLOAD_BYTES)]
JsonValue = Annotated[common.JsonValue, MaxBytes(MAX_JSON_VALUE_BYTES)]
Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]
ExpectedVersion = Annotated[int, Field(ge=1, le=INT64_MAX, description=(
    "Compare-and-set: apply only if the object is at this version (else version_conflict with the current "
    "one); omit to apply on whatever version it is at."))]
TimeUs = Annotated[int, Field(ge=0, le=INT64_MAX)]
Reason = Annotated[str, StringConstraints(max_length=MAX_REASON_CHARS)]
Capability = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_.:\-]{0,99}$")]

_ID_BODY = ID_PATTERN.removeprefix("^").removesuffix("$")
# ``agent:ID``, ``term:KEY``, ``session:ID``, or a bare agent id (which then has no colon).
TARGET_PATTERN = rf"^(?:(?:agent|term|session):{_ID_BODY}|[A-Za-z0-9][A-Za-z0-9_.\-]{{0,127}})$"
TargetText = Annotated[str, StringConstraints(pattern=TARGET_PATTERN), Field(description=(
    "An explicit target: agent:AGENT_ID, term:TERM_KEY or session:SESSION_ID (a bare value is an agent id)."))]

__all__ = ["INT64_MAX", "INT64_MIN", "MAX_BYTES_KEYWORD", "MAX_JSON_VALUE_BYTES", "MAX_REASON_CHARS", "MAX_REFS",
           "TARGET_PATTERN", "Capability", "ExpectedVersion", "Id", "Int64", "JsonValue", "MaxBytes", "Name",
           "Payload", "Reason", "Refs", "TargetText", "Text", "TimeUs", "max_utf8_bytes"]
