"""The artifact registry: content-addressed files beside the database, registry rows in SQL.

Content is written first (to ``<artifact_dir>/sha256/<aa>/<digest>``, atomically, fsynced), then the
registry row is committed; an interrupted write leaves at most an unreferenced file, never a row that
points at nothing. Every read verifies the checksum.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import Field

from engine.errors import ArtifactCorrupted, InvalidInput, NotPermitted, StoreUnavailable
from engine.models.artifacts import Artifact, ArtifactContent, ArtifactStatus, ArtifactVersion
from engine.models.common import Id, Model
from engine.policy.enforcement import Check
from engine.validation import build, check_id
from engine.world.core import Cause, Plan, WorldCore
from store import Insert, Update

MAX_ARTIFACT_BYTES = 64 * 1024 * 1024


class RegisterArtifact(Model):
    artifact_type: Id
    checksum: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0, le=MAX_ARTIFACT_BYTES)
    artifact_id: Id | None = None
    task_id: Id | None = None
    expected_version: int | None = Field(default=None, ge=1)


class ArtifactCalls(WorldCore):
    def _content_root(self) -> Path:
        if self.artifact_dir is None:
            raise InvalidInput("artifact_dir", "this world has no artifact directory configured")
        return self.artifact_dir

    def _put_content(self, content: bytes) -> tuple[str, str]:
        digest = hashlib.sha256(content).hexdigest()
        rel = f"sha256/{digest[:2]}/{digest}"
        path = self._content_root() / rel
        if path.exists():
            return digest, rel
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(content)
                fh.flush()
                os.fsync(fh.fileno())
            Path(tmp).replace(path)
        except OSError as exc:
            raise StoreUnavailable(f"cannot write artifact content: {exc}") from exc
        return digest, rel

    def register_artifact(self, actor: str, artifact_type: str, content: bytes, *, artifact_id: str | None = None,
                          task_id: str | None = None, op_id: str | None = None,
                          cause: Cause | None = None) -> Artifact:
        """Register new content as version 1 of a new artifact owned by ``actor``."""
        self._check_bytes(content)
        req = build(RegisterArtifact, artifact_type=artifact_type, checksum=hashlib.sha256(content).hexdigest(),
                    size=len(content), artifact_id=artifact_id, task_id=task_id)

        def plan(now: int) -> Plan:
            if req.task_id is not None:
                self._row("tasks", "task", req.task_id, task_id=req.task_id)
            _, location = self._put_content(content)
            aid = req.artifact_id or self.ids.new("art")
            art = Artifact(artifact_id=aid, artifact_type=req.artifact_type, owner=actor, created_by=actor,
                           task_id=req.task_id, status=ArtifactStatus.ACTIVE, checksum=req.checksum,
                           size=req.size, location=location, created_at_us=now, updated_at_us=now, version=1)
            ver = self._version_row(art, actor, now)
            return Plan("artifact.committed", "artifact", aid, art,
                        checks=[Check("artifact", aid, "create", art.model_dump(mode="json"))],
                        changes=[Insert("artifacts", art.model_dump(mode="json"), "artifact", aid), ver],
                        payload={"version": 1, "checksum": req.checksum},
                        provenance=[("task", req.task_id, "artifact", aid, "produced_for")] if req.task_id else (),
                        resulting_version=1)
        return self._write("register_artifact", actor, req, plan, Artifact, op_id=op_id, cause=cause)

    def new_artifact_version(self, actor: str, artifact_id: str, content: bytes, *,
                             expected_version: int | None = None, op_id: str | None = None,
                             cause: Cause | None = None) -> Artifact:
        """Commit new content as the next version (compare-and-set on ``expected_version`` if given)."""
        self._check_bytes(content)
        check_id("artifact_id", artifact_id)
        current = self._load(Artifact, "artifacts", "artifact", artifact_id, artifact_id=artifact_id)
        req = build(RegisterArtifact, artifact_type=current.artifact_type,
                    checksum=hashlib.sha256(content).hexdigest(), size=len(content), artifact_id=artifact_id,
                    expected_version=expected_version)

        def plan(now: int) -> Plan:
            art = self._load(Artifact, "artifacts", "artifact", artifact_id, artifact_id=artifact_id)
            if art.status is not ArtifactStatus.ACTIVE:
                raise NotPermitted(actor, "version", "artifact", artifact_id, "artifact is retired")
            base = req.expected_version or art.version
            _, location = self._put_content(content)
            new = art.model_copy(update={"checksum": req.checksum, "size": req.size, "location": location,
                                         "updated_at_us": now, "version": base + 1})
            values = {"checksum": req.checksum, "size": req.size, "location": location, "updated_at_us": now}
            return Plan("artifact.committed", "artifact", artifact_id, new,
                        checks=[Check("artifact", artifact_id, "version", art.model_dump(mode="json"))],
                        changes=[Update("artifacts", {"artifact_id": artifact_id}, base, values, "artifact",
                                        artifact_id), self._version_row(new, actor, now)],
                        payload={"version": base + 1, "checksum": req.checksum},
                        provenance=[("artifact", f"{artifact_id}@{base}", "artifact", f"{artifact_id}@{base + 1}",
                                     "revised_by")], base_version=base, resulting_version=base + 1)
        return self._write("new_artifact_version", actor, req, plan, Artifact, op_id=op_id, cause=cause)

    @staticmethod
    def _version_row(art: Artifact, actor: str, now: int) -> Insert:
        ver = ArtifactVersion(artifact_id=art.artifact_id, version=art.version, checksum=art.checksum,
                              size=art.size, location=art.location, created_by=actor, created_at_us=now)
        return Insert("artifact_versions", ver.model_dump(mode="json"), "artifact_version",
                      f"{art.artifact_id}@{art.version}")

    @staticmethod
    def _check_bytes(content: Any) -> None:
        if not isinstance(content, bytes | bytearray):
            raise InvalidInput("content", f"artifact content must be bytes, not {type(content).__name__}")
        if len(content) > MAX_ARTIFACT_BYTES:
            raise InvalidInput("content", f"{len(content)} bytes exceeds {MAX_ARTIFACT_BYTES}")

    def get_artifact(self, artifact_id: str, *, actor: str | None = None) -> Artifact:
        check_id("artifact_id", artifact_id)
        return self._get(Artifact, "artifacts", "artifact", artifact_id, actor, artifact_id=artifact_id)

    def artifact_versions(self, artifact_id: str, *, actor: str | None = None) -> list[ArtifactVersion]:
        check_id("artifact_id", artifact_id)
        self.get_artifact(artifact_id, actor=actor)
        return [ArtifactVersion.model_validate(r) for r in self.store.read.rows(
            "artifact_versions", {"artifact_id": artifact_id}, order_by=("version",))]

    def read_artifact(self, artifact_id: str, version: int | None = None, *,
                      actor: str | None = None) -> ArtifactContent:
        """The content of ``version`` (default: head), verified against the registered checksum."""
        head = self.get_artifact(artifact_id, actor=actor)
        v = head.version if version is None else version
        if not isinstance(v, int) or v < 1:
            raise InvalidInput("version", f"{version!r} is not a version number")
        ver = self._load(ArtifactVersion, "artifact_versions", "artifact_version", f"{artifact_id}@{v}",
                         artifact_id=artifact_id, version=v)
        try:
            data = (self._content_root() / ver.location).read_bytes()
        except FileNotFoundError:
            raise ArtifactCorrupted(artifact_id, v, ver.checksum, "missing") from None
        actual = hashlib.sha256(data).hexdigest()
        if actual != ver.checksum:
            raise ArtifactCorrupted(artifact_id, v, ver.checksum, actual)
        return ArtifactContent(artifact=ver, content=data)

    def list_artifacts(self, *, task_id: str | None = None, limit: int = 1000,
                       actor: str | None = None) -> list[Artifact]:
        where = {"task_id": check_id("task_id", task_id)} if task_id is not None else {}
        return self._list(Artifact, "artifacts", "artifact", actor, where, limit=limit)
