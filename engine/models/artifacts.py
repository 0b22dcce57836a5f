"""The artifact registry: identity independent of any conversation; content on disk, checksummed."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from engine.models.common import Id, Model, TimeUs, Version


class ArtifactStatus(StrEnum):
    ACTIVE = "active"
    RETIRED = "retired"


class Artifact(Model):
    """The registry entry; ``version`` is the head content version (and the row's CAS version)."""

    artifact_id: Id
    artifact_type: Id
    owner: Id
    created_by: Id
    task_id: Id | None = None
    status: ArtifactStatus
    checksum: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)
    location: str
    created_at_us: TimeUs
    updated_at_us: TimeUs
    version: Version


class ArtifactVersion(Model):
    artifact_id: Id
    version: Version
    checksum: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)
    location: str
    created_by: Id
    created_at_us: TimeUs


class ArtifactContent(Model):
    """A verified read: the bytes matched the registered checksum."""

    artifact: ArtifactVersion
    content: bytes


__all__ = ["Artifact", "ArtifactContent", "ArtifactStatus", "ArtifactVersion"]
