"""The artifact registry: content-addressed files beside the database, registry rows in SQL.

A write is planned (reads only), decided by the policy, and only then touches disk: the bytes are staged
in ``<artifact_dir>/.staging/`` (content-addressed name, fsynced, directory fsynced), the registry row is
committed through the one write path, and the staged file is then promoted to its place,
``<artifact_dir>/sha256/<aa>/<digest>`` (an atomic rename). Every failure before the promotion (a denial,
a version or operation conflict, a full disk, a store error) removes the staged file; a denied write
leaves no byte on disk. Content already in place is not written again.

A crash after the commit and before the promotion leaves the bytes in staging, durable: a read that finds
no file in place promotes the staged copy of that checksum. A crash before the commit leaves at most an
unreferenced staged file, never a row that points at nothing. Every read verifies the checksum.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from engine.commands.artifacts import MAX_ARTIFACT_BYTES, NewArtifactVersion, RegisterArtifact
from engine.errors import ArtifactCorrupted, ArtifactUnwritable, InvalidInput, NotPermitted
from engine.models.artifacts import Artifact, ArtifactContent, ArtifactStatus, ArtifactVersion
from engine.policy.enforcement import Check
from engine.validation import build, check_id
from engine.world.core import Cause, Plan, WorldCore
from engine.world.list_limits import MAX_LISTED, check_limit
from store import Insert, Update

STAGING_DIR = ".staging"
_C = TypeVar("_C", RegisterArtifact, NewArtifactVersion)


def content_location(digest: str) -> str:
    """Where content with sha256 ``digest`` lives, relative to the artifact directory."""
    return f"sha256/{digest[:2]}/{digest}"


def check_artifact_rules(actor: str, action: str, artifact: Artifact) -> None:
    """The World's own rule for ``action`` on ``artifact`` (before the policy): only an active artifact
    takes a new version (``NotPermitted``)."""
    if action == "version" and artifact.status is not ArtifactStatus.ACTIVE:
        raise NotPermitted(actor, "version", "artifact", artifact.artifact_id, "artifact is retired")


class ArtifactCalls(WorldCore):
    def _content_root(self) -> Path:
        if self.artifact_dir is None:
            raise InvalidInput("artifact_dir", "this world has no artifact directory configured")
        return self.artifact_dir

    def register_artifact(self, actor: str, artifact_type: str, content: bytes, *, artifact_id: str | None = None,
                          task_id: str | None = None, op_id: str | None = None,
                          cause: Cause | None = None) -> Artifact:
        """Register new content as version 1 of a new artifact owned by ``actor`` (nothing reaches disk
        unless the policy allows it)."""
        req, digest = self._content_request(RegisterArtifact, content, artifact_type=artifact_type,
                                            artifact_id=artifact_id, task_id=task_id)

        def plan(now: int) -> Plan:
            self._content_root()
            if req.task_id is not None:
                self._row("tasks", "task", req.task_id, task_id=req.task_id)
            aid = req.artifact_id or self.ids.new("art")
            art = Artifact(artifact_id=aid, artifact_type=req.artifact_type, owner=actor, created_by=actor,
                           task_id=req.task_id, status=ArtifactStatus.ACTIVE, checksum=digest,
                           size=len(content), location=content_location(digest), created_at_us=now,
                           updated_at_us=now, version=1)
            ver = self._version_row(art, actor, now)
            return Plan("artifact.committed", "artifact", aid, art,
                        checks=[Check("artifact", aid, "create", art.model_dump(mode="json"))],
                        changes=[Insert("artifacts", art.model_dump(mode="json"), "artifact", aid), ver],
                        payload={"version": 1, "checksum": digest},
                        provenance=[("task", req.task_id, "artifact", aid, "produced_for")] if req.task_id else (),
                        resulting_version=1)
        return self._write_with_content("register_artifact", actor, req, plan, content, op_id, cause)

    def new_artifact_version(self, actor: str, artifact_id: str, content: bytes, *,
                             expected_version: int | None = None, op_id: str | None = None,
                             cause: Cause | None = None) -> Artifact:
        """Commit new content as the next version (compare-and-set on ``expected_version`` if given; nothing
        reaches disk unless the policy allows it, and a lost race leaves nothing behind)."""
        req, digest = self._content_request(NewArtifactVersion, content, artifact_id=artifact_id,
                                            expected_version=expected_version)

        def plan(now: int) -> Plan:
            self._content_root()
            aid = req.artifact_id
            row = self._row("artifacts", "artifact", aid, artifact_id=aid)
            art = Artifact.model_validate(row)
            check_artifact_rules(actor, "version", art)
            base = req.expected_version or art.version
            location = content_location(digest)
            new = art.model_copy(update={"checksum": digest, "size": len(content), "location": location,
                                         "updated_at_us": now, "version": base + 1})
            values = {"checksum": digest, "size": len(content), "location": location, "updated_at_us": now}
            return Plan("artifact.committed", "artifact", aid, new,
                        checks=[Check("artifact", aid, "version", row)],
                        changes=[Update("artifacts", {"artifact_id": aid}, base, values, "artifact", aid),
                                 self._version_row(new, actor, now)],
                        payload={"version": base + 1, "checksum": digest},
                        provenance=[("artifact", f"{aid}@{base}", "artifact", f"{aid}@{base + 1}", "revised_by")],
                        base_version=base, resulting_version=base + 1)
        return self._write_with_content("new_artifact_version", actor, req, plan, content, op_id, cause)

    def _content_request(self, command: type[_C], content: bytes, **fields: Any) -> tuple[_C, str]:
        """``command`` validated on ``fields``, and the sha256 of ``content`` (any bytes, at most
        ``MAX_ARTIFACT_BYTES``: the named call takes binary content, which the command, carrying UTF-8 text,
        does not). The command returned holds ``sha256:<digest>`` as its content: the request's identity
        (what a retried operation id must match) names the content by its digest, never its bytes."""
        self._check_bytes(content)
        req = build(command, content=b"", **fields)
        digest = hashlib.sha256(content).hexdigest()
        return req.model_copy(update={"content": f"sha256:{digest}".encode()}), digest

    # -- plan, decide, stage, commit, promote ---------------------------------------------------------

    def _write_with_content(self, command: str, actor: str, req: RegisterArtifact | NewArtifactVersion,
                            plan: Callable[[int], Plan], content: bytes, op_id: str | None,
                            cause: Cause | None) -> Artifact:
        """The artifact write path: a known ``op_id`` is answered from the ledger (nothing planned, decided
        or staged); else the plan is built once (reads only), decided, the bytes staged, the plan committed
        through ``_write`` and the staged file promoted. Any failure after staging removes the staged file."""
        if op_id is not None and self._store.operation(check_id("op_id", op_id)) is not None:
            return self._write(command, actor, req, _answered_from_ledger, Artifact, op_id=op_id, cause=cause)
        planned = plan(self.clock.now_us())
        self._authorize(actor, planned.checks, command)  # the decision, before any byte reaches disk
        assert isinstance(planned.result, Artifact)
        target = self._content_root() / planned.result.location
        staged = None if target.exists() else self._stage(content, planned.result.checksum)
        try:
            done = self._write(command, actor, req, lambda now: planned, Artifact, op_id=op_id, cause=cause)
        except BaseException:
            if staged is not None:
                staged.unlink(missing_ok=True)
            raise
        if staged is not None:
            self._promote(staged, target)
        return done

    def _staging(self) -> Path:
        return self._content_root() / STAGING_DIR

    def _stage(self, content: bytes, digest: str) -> Path:
        """Write ``content`` to a new file in staging named after its digest, fsync it and the directory.
        A failure (``ArtifactUnwritable``) leaves no file."""
        staging = self._staging()
        tmp: str | None = None
        try:
            staging.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=staging, prefix=f"{digest}.", suffix=".staged")
            with os.fdopen(fd, "wb") as fh:
                fh.write(content)
                fh.flush()
                os.fsync(fh.fileno())
            _fsync_dir(staging)
        except OSError as exc:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            raise ArtifactUnwritable(str(exc), exc.errno) from exc
        return Path(tmp)

    def _promote(self, staged: Path, target: Path) -> None:
        """Move a staged file to its content-addressed place (atomic; identical content may already be
        there, or have been promoted by a reader). The row is committed: a failure here leaves the bytes
        in staging, where a read finds them."""
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            staged.replace(target)
            _fsync_dir(target.parent)
        except OSError:
            return  # committed either way: the bytes are in place (promoted by a reader) or durable in staging

    def _content_of(self, ver: ArtifactVersion) -> bytes | None:
        """The bytes of a committed version: in place, or still in staging (a promotion that was cut
        short; promoted now). ``None`` if neither holds a copy with the registered checksum."""
        target = self._content_root() / ver.location
        try:
            return target.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            pass  # not in place
        staging = self._staging()
        for staged in sorted(staging.glob(f"{ver.checksum}.*.staged")) if staging.is_dir() else []:
            try:
                data = staged.read_bytes()
            except FileNotFoundError:
                continue  # promoted or removed meanwhile
            if hashlib.sha256(data).hexdigest() == ver.checksum:
                self._promote(staged, target)
                return data
        return target.read_bytes() if target.exists() else None

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
        return [ArtifactVersion.model_validate(r) for r in self._store.read.rows(
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
        data = self._content_of(ver)
        if data is None:
            raise ArtifactCorrupted(artifact_id, v, ver.checksum, "missing")
        actual = hashlib.sha256(data).hexdigest()
        if actual != ver.checksum:
            raise ArtifactCorrupted(artifact_id, v, ver.checksum, actual)
        return ArtifactContent(artifact=ver, content=data)

    def list_artifacts(self, *, task_id: str | None = None, limit: int = 1000,
                       actor: str | None = None) -> list[Artifact]:
        where = {"task_id": check_id("task_id", task_id)} if task_id is not None else {}
        return self._list(Artifact, "artifacts", "artifact", actor, where, limit=check_limit(limit, MAX_LISTED))


def _answered_from_ledger(now: int) -> Plan:
    raise AssertionError("a known operation is answered from the ledger, never planned")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
