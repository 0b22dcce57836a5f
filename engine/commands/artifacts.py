"""The artifact registry: content-addressed, checksummed content with an identity of its own.

Content is UTF-8 text in a command (what an agent or a JSON transport can carry), held as the bytes the
World stores (``content.encode()``; a text over 64 KiB would not fit in one model string). Binary content
goes through the World's named calls, which take any bytes.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from engine.commands.base import Command
from engine.commands.fields import MAX_BYTES_KEYWORD, ExpectedVersion, Id

MAX_ARTIFACT_BYTES = 64 * 1024 * 1024


def _utf8(value: bytes) -> bytes:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PydanticCustomError("content_not_utf8", "content is not UTF-8 text (at byte {at}); binary content "
                                  "goes through the World's named call", {"at": exc.start}) from None
    return value


class _ContentSchema:
    """The JSON schema of artifact content: a string of UTF-8 text, at most 64 MiB of it."""

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {"type": "string", "maxLength": MAX_ARTIFACT_BYTES, MAX_BYTES_KEYWORD: MAX_ARTIFACT_BYTES,
                "description": "The content as UTF-8 text (stored as its bytes; at most 64 MiB)."}


# Held as the bytes the World stores (a text given is encoded as UTF-8): one string of a model is at most
# 64 KiB, content is at most 64 MiB.
Content = Annotated[bytes, Field(max_length=MAX_ARTIFACT_BYTES), AfterValidator(_utf8), _ContentSchema]


class RegisterArtifact(Command):
    """Register ``content`` as version 1 of a new artifact owned by the caller (for ``task_id``, an existing
    task, if given). Every read of it verifies the checksum."""

    name = "register_artifact"
    events = ("artifact.committed",)
    agent_effect = True
    ref_field = "artifact_id"

    artifact_type: Id = Field(description="The artifact type, e.g. report.")
    content: Content
    artifact_id: Id | None = Field(default=None, description="Choose the artifact id (default: generated).")
    task_id: Id | None = Field(default=None, description="The task it was produced for.")


class NewArtifactVersion(Command):
    """Commit ``content`` as the next version of an active artifact (on ``expected_version``, the version the
    caller saw, if given)."""

    name = "new_artifact_version"
    events = ("artifact.committed",)
    agent_effect = True
    ref_field = "artifact_id"

    artifact_id: Id
    content: Content
    expected_version: ExpectedVersion | None = None


__all__ = ["MAX_ARTIFACT_BYTES", "NewArtifactVersion", "RegisterArtifact"]
