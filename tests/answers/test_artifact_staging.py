"""Plan, then decide, then commit: artifact bytes reach disk only after the PDP allows, are staged
(content-addressed, fsynced) and promoted after the commit, and every failure leaves no staged file.

Every check counts the files under the artifact directory, staging included.
"""

from __future__ import annotations

import errno
import hashlib
import os
import resource
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.errors import (
    AlreadyExists,
    ArtifactUnwritable,
    OperationConflict,
    PolicyDenied,
    StoreUnavailable,
    VersionConflict,
)
from engine.policy.enforcement import LocalScopeRules
from engine.sources import ManualClock, SeededIds
from engine.world import World
from engine.world.artifacts import STAGING_DIR, content_location
from engine.world.book import open_world
from tests.answers.conftest import files_under
from tests.conftest import book_of, close_world, kept

MiB = 1024 * 1024


def _artifact_dir(world: World) -> Path:
    assert world.artifact_dir is not None
    return world.artifact_dir


def _rows(world: World) -> tuple[int, int]:
    read = book_of(world).store.read
    return len(read.rows("artifacts", {})), len(read.rows("artifact_versions", {}))


@pytest.fixture
def local(tmp_path: Path) -> Iterator[World]:
    """An in-memory world (no database file is written) with agent ``a``, artifacts under tmp_path."""
    w = kept(open_world("sqlite://", policy=LocalScopeRules(), artifact_dir=tmp_path / "artifacts",
                        clock=ManualClock(), ids=SeededIds(3)))
    w.register_agent("a", "A", "worker", "t-a")
    yield w
    close_world(w)


def test_five_denied_registrations_leave_no_byte_on_disk(team: World) -> None:
    root = _artifact_dir(team)
    denials = len(book_of(team).store.read.rows("events", {"event_type": "policy.denied"}))
    for n in range(5):
        with pytest.raises(PolicyDenied):
            team.register_artifact("mallory", "blob", bytes([n]) * (10 * MiB))
    assert files_under(root) == []
    assert not (root / STAGING_DIR).exists()  # staging was never even created
    assert _rows(team) == (0, 0)
    assert len(book_of(team).store.read.rows("events", {"event_type": "policy.denied"})) == denials + 5
    art = team.register_artifact("alice", "blob", b"allowed content")  # the count does see a written file
    assert files_under(root) == [root / art.location]


def test_a_denied_new_version_leaves_no_byte_on_disk(team: World) -> None:
    root = _artifact_dir(team)
    art = team.register_artifact("alice", "note", b"v1")
    with pytest.raises(PolicyDenied):
        team.new_artifact_version("mallory", art.artifact_id, b"v2 by someone else" * 100_000)
    assert files_under(root) == [root / art.location]


def test_a_failed_commit_after_staging_leaves_no_staged_file(world: World) -> None:
    world.register_agent("a", "A", "worker", "t-a")
    root = _artifact_dir(world)
    art = world.register_artifact("a", "note", b"v1", artifact_id="art-1")
    v2 = b"v2, planned on a stale version"
    with pytest.raises(VersionConflict):  # decided and staged, then refused by the gateway's compare-and-set
        world.new_artifact_version("a", art.artifact_id, v2, expected_version=7)
    with pytest.raises(AlreadyExists):  # the id is taken: the insert fails at commit
        world.register_artifact("a", "note", b"another first version", artifact_id="art-1")
    assert (root / STAGING_DIR).is_dir()  # the bytes were staged ...
    assert files_under(root) == [root / art.location]  # ... and removed: v1's content is the only file
    assert not (root / content_location(hashlib.sha256(v2).hexdigest())).exists()
    assert _rows(world) == (1, 1)


def test_a_full_disk_gives_a_typed_error_and_leaks_nothing(local: World) -> None:
    """The staged write fails part-way (RLIMIT_FSIZE: the kernel refuses to grow a file past 256 KiB, as
    a full disk would): a typed error, no temp file, no row."""
    root = _artifact_dir(local)
    events = len(local.events(limit=1000))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of a signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, hard))
    try:
        with pytest.raises(ArtifactUnwritable) as raised:
            local.register_artifact("a", "blob", b"x" * (2 * MiB))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert raised.value.errno == errno.EFBIG and raised.value.code == "artifact_unwritable"
    assert isinstance(raised.value, StoreUnavailable)  # retryable later (exit 8), not bad input
    assert raised.value.to_dict()["errno"] == errno.EFBIG
    assert (root / STAGING_DIR).is_dir() and files_under(root) == []  # the partial file is gone
    assert _rows(local) == (0, 0) and len(local.events(limit=1000)) == events
    art = local.register_artifact("a", "blob", b"x" * (2 * MiB))  # nothing half-done stands in the way
    assert local.read_artifact(art.artifact_id, actor="a").content == b"x" * (2 * MiB)
    assert files_under(root) == [root / art.location]


@pytest.mark.parametrize("blocked", [STAGING_DIR, ""])
def test_an_unwritable_directory_gives_a_typed_error_and_writes_nothing(tmp_path: Path, blocked: str) -> None:
    """The staging directory (or the artifact directory itself) is a file: nothing can be staged."""
    root = tmp_path / "artifacts"
    if blocked:
        root.mkdir()
    (root / blocked if blocked else root).write_bytes(b"in the way")
    w = kept(open_world("sqlite://", policy=LocalScopeRules(), artifact_dir=root, clock=ManualClock(),
                        ids=SeededIds(3)))
    try:
        w.register_agent("a", "A", "worker", "t-a")
        events = len(w.events(limit=1000))
        with pytest.raises(ArtifactUnwritable) as raised:
            w.register_artifact("a", "blob", b"content")
        assert raised.value.errno in (errno.EEXIST, errno.ENOTDIR)
        assert _rows(w) == (0, 0) and len(w.events(limit=1000)) == events
        if blocked:
            assert files_under(root) == [root / blocked]  # only what was in the way
        else:
            assert root.read_bytes() == b"in the way"
    finally:
        close_world(w)


def test_a_promotion_cut_short_is_finished_by_the_first_read(local: World) -> None:
    """Committed, but the bytes could not be moved into place (as after a crash between commit and
    promotion): they stay durable in staging, a read verifies and serves them, and promotes them once it
    can."""
    root = _artifact_dir(local)
    content = b"committed before its promotion"
    digest = hashlib.sha256(content).hexdigest()
    blocker = root / "sha256" / digest[:2]
    blocker.parent.mkdir(parents=True)
    blocker.write_bytes(b"not a directory")  # the promotion's mkdir fails
    art = local.register_artifact("a", "note", content)
    staged = list((root / STAGING_DIR).iterdir())
    assert len(staged) == 1 and staged[0].name.startswith(f"{digest}.")
    assert local.read_artifact(art.artifact_id, actor="a").content == content  # served from staging
    blocker.unlink()
    assert local.read_artifact(art.artifact_id, actor="a").content == content  # promoted now
    assert files_under(root) == [root / art.location]


def test_content_in_place_is_not_written_again_and_a_retry_stages_nothing(local: World) -> None:
    root = _artifact_dir(local)
    first = local.register_artifact("a", "note", b"same bytes", op_id="op-reg-1")
    again = local.register_artifact("a", "note", b"same bytes", op_id="op-reg-1")
    assert again == first  # answered from the ledger
    other = local.register_artifact("a", "note", b"same bytes")  # a second artifact, one content file
    assert other.location == first.location
    with pytest.raises(OperationConflict):
        local.register_artifact("a", "note", b"different bytes", op_id="op-reg-1")
    assert files_under(root) == [root / first.location]
    ver = local.new_artifact_version("a", first.artifact_id, b"v2", op_id="op-ver-1")
    assert local.new_artifact_version("a", first.artifact_id, b"v2", op_id="op-ver-1") == ver
    with pytest.raises(OperationConflict):
        local.new_artifact_version("a", first.artifact_id, b"v2 changed", op_id="op-ver-1")
    assert files_under(root) == sorted([root / first.location, root / ver.location])
    assert os.listdir(root / STAGING_DIR) == []
